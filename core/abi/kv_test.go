package abi

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseKV(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []KV
		msg  string // non-empty: want EINVAL mentioning this
	}{
		{"empty", "", nil, ""},
		{"only newlines", "\n\n\n", nil, ""},
		{"one line", "A=1\n", []KV{{"A", "1"}}, ""},
		{"no trailing newline", "A=1", []KV{{"A", "1"}}, ""},
		{"order kept", "B=2\nA=1\nC=3\n", []KV{{"B", "2"}, {"A", "1"}, {"C", "3"}}, ""},
		{"comments", "# header\nA=1\n  # indented\n\t# tab\n#B=2\n", []KV{{"A", "1"}}, ""},
		{"blank lines", "\n  \n\t\nA=1\n\n\r\n", []KV{{"A", "1"}}, ""},
		{"CRLF", "A=1\r\nB=2\r\n", []KV{{"A", "1"}, {"B", "2"}}, ""},
		{"CRLF no final newline", "A=1\r\nB=2\r", []KV{{"A", "1"}, {"B", "2"}}, ""},
		{"mixed LF and CRLF", "A=1\nB=2\r\nC=3\n", []KV{{"A", "1"}, {"B", "2"}, {"C", "3"}}, ""},
		{"equals inside value", "URL=http://h/?a=b=c\n", []KV{{"URL", "http://h/?a=b=c"}}, ""},
		{"value is only equals", "A===\n", []KV{{"A", "=="}}, ""},
		{"empty value", "A=\n", []KV{{"A", ""}}, ""},
		{"hash inside value", "A=b#c\n", []KV{{"A", "b#c"}}, ""},
		{"key trimmed", "  A \t=1\n", []KV{{"A", "1"}}, ""},
		{"value kept verbatim", "A= spaced value \t\n", []KV{{"A", " spaced value \t"}}, ""},
		{"value with utf-8", "A=caf\u00e9\n", []KV{{"A", "caf\u00e9"}}, ""},
		{"key charset", "a_b.c-d9=1\n_x=2\nZ=3\n", []KV{{"a_b.c-d9", "1"}, {"_x", "2"}, {"Z", "3"}}, ""},
		{"key case-sensitive", "a=1\nA=2\n", []KV{{"a", "1"}, {"A", "2"}}, ""},

		{"missing equals", "A=1\nB\n", nil, "line 2: want KEY=VALUE"},
		{"missing equals after blanks", "\n# c\n\nnokey\n", nil, "line 4: want KEY=VALUE"},
		{"empty key", "=v\n", nil, "line 1: empty key"},
		{"blank key", "  =v\n", nil, "line 1: empty key"},
		{"key leading digit", "9a=1\n", nil, `line 1: invalid key "9a"`},
		{"key leading dot", ".a=1\n", nil, "invalid key"},
		{"key leading dash", "-a=1\n", nil, "invalid key"},
		{"key with space", "a b=1\n", nil, "invalid key"},
		{"key with slash", "a/b=1\n", nil, "invalid key"},
		{"key non-ASCII", "\u00e9=1\n", nil, "invalid key"},
		{"key with plus", "a+b=1\n", nil, "invalid key"},
		{"duplicate key", "A=1\nB=2\nA=3\n", nil, `line 3: key "A" repeats line 1`},
		{"duplicate after trim", "A=1\n\n  A =2\n", nil, `line 3: key "A" repeats line 1`},
		{"duplicate with CRLF line numbers", "A=1\r\n\r\n# c\r\nA=2\r\n", nil, `line 4: key "A" repeats line 1`},
		{"NUL in value", "A=1\x00\n", nil, "NUL"},
		{"NUL in comment", "# \x00\nA=1\n", nil, "NUL"},
		{"NUL alone", "\x00", nil, "NUL"},
		{"first error wins", "A=1\nbad\nA=2\n", nil, "line 2:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKV([]byte(tt.in))
			if tt.msg != "" {
				wantErr(t, err, EINVAL, tt.msg)
				return
			}
			if err != nil {
				t.Fatalf("ParseKV(%q) = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseKV(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseKVSize(t *testing.T) {
	if MaxControlFile != 64<<10 {
		t.Fatalf("MaxControlFile = %d, want 64 KiB", MaxControlFile)
	}
	// Exactly at the limit: accepted, including one single long line.
	exact := "A=" + strings.Repeat("v", MaxControlFile-3) + "\n"
	kvs, err := ParseKV([]byte(exact))
	if err != nil || len(kvs) != 1 || len(kvs[0].Value) != MaxControlFile-3 {
		t.Fatalf("ParseKV(%d bytes) = %d kvs, %v", len(exact), len(kvs), err)
	}
	comments := strings.Repeat("# padding padding padding padding\n", MaxControlFile/34+1)
	for _, in := range []string{exact + "\n", comments[:MaxControlFile+1], strings.Repeat("\n", 1<<20)} {
		_, err := ParseKV([]byte(in))
		wantErr(t, err, EINVAL, "larger than 65536 bytes")
	}
}

func TestKVMap(t *testing.T) {
	m, err := KVMap([]byte("A=1\nB=x=y\n# c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"A": "1", "B": "x=y"}; !reflect.DeepEqual(m, want) {
		t.Errorf("KVMap = %v, want %v", m, want)
	}
	m, err = KVMap(nil)
	if err != nil || len(m) != 0 || m == nil {
		t.Errorf("KVMap(nil) = %v, %v; want empty non-nil map", m, err)
	}
	m, err = KVMap([]byte("A=1\nA=2\n"))
	if m != nil {
		t.Errorf("KVMap on error returned %v", m)
	}
	wantErr(t, err, EINVAL, "repeats")
}

func TestFormatKV(t *testing.T) {
	tests := []struct {
		name string
		in   []KV
		want string
		msg  string
	}{
		{"nil", nil, "", ""},
		{"one", []KV{{"A", "1"}}, "A=1\n", ""},
		{"order kept", []KV{{"B", "2"}, {"A", "1"}}, "B=2\nA=1\n", ""},
		{"empty value", []KV{{"A", ""}}, "A=\n", ""},
		{"equals and hash in value", []KV{{"U", "a=b#c"}}, "U=a=b#c\n", ""},
		{"spaces kept", []KV{{"A", " x "}}, "A= x \n", ""},
		{"tab in value", []KV{{"A", "a\tb"}}, "A=a\tb\n", ""},

		{"newline in value", []KV{{"A", "a\nb"}}, "", "line break or NUL"},
		{"CR in value", []KV{{"A", "a\rb"}}, "", "line break or NUL"},
		{"trailing CR in value", []KV{{"A", "a\r"}}, "", "line break or NUL"},
		{"NUL in value", []KV{{"A", "a\x00"}}, "", "line break or NUL"},
		{"empty key", []KV{{"", "v"}}, "", "empty key"},
		{"key leading digit", []KV{{"1A", "v"}}, "", "invalid key"},
		{"key with equals", []KV{{"A=B", "v"}}, "", "invalid key"},
		{"key with space", []KV{{" A", "v"}}, "", "invalid key"},
		{"key with hash", []KV{{"#A", "v"}}, "", "invalid key"},
		{"duplicate key", []KV{{"A", "1"}, {"A", "2"}}, "", `key "A" repeats`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FormatKV(tt.in)
			if tt.msg != "" {
				wantErr(t, err, EINVAL, tt.msg)
				if got != nil {
					t.Errorf("FormatKV returned %q with the error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("FormatKV: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("FormatKV = %q, want %q", got, tt.want)
			}
			back, err := ParseKV(got)
			if err != nil {
				t.Fatalf("ParseKV(FormatKV) = %v", err)
			}
			if !kvEqual(back, tt.in) {
				t.Errorf("round trip: got %q, want %q", back, tt.in)
			}
		})
	}
}

// Parse -> Format is canonical: comments, blank lines, CRLF and key padding
// disappear; a second round changes nothing.
func TestKVCanonicalRoundTrip(t *testing.T) {
	in := "# cortexfs default\r\n\r\n  MODEL = openai/gpt-4o\r\nURL=http://h/?a=b\r\nEMPTY=\r\n"
	kvs, err := ParseKV([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := FormatKV(kvs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "MODEL= openai/gpt-4o\nURL=http://h/?a=b\nEMPTY=\n"; string(out) != want {
		t.Errorf("canonical form = %q, want %q", out, want)
	}
	kvs2, err := ParseKV(out)
	if err != nil || !kvEqual(kvs, kvs2) {
		t.Errorf("second parse = %q, %v; want %q", kvs2, err, kvs)
	}
}

// FormatKV promises that its output "always parses back to the same list".
func TestFormatKVOutputWithinLimit(t *testing.T) {
	kvs := []KV{{"A", strings.Repeat("v", MaxControlFile)}}
	out, err := FormatKV(kvs)
	if err != nil {
		return // refusing is a fix too
	}
	if _, err := ParseKV(out); err != nil {
		t.Fatalf("FormatKV accepted a %d-byte value and wrote %d bytes that ParseKV rejects: %v",
			len(kvs[0].Value), len(out), err)
	}
}

// ParseKV keeps a CR inside a value (only a trailing CR is dropped), which
// FormatKV then refuses to write back.
func TestParseKVEmbeddedCR(t *testing.T) {
	kvs, err := ParseKV([]byte("A=x\ry\n"))
	if err != nil {
		return // rejecting it is consistent with FormatKV
	}
	if _, err := FormatKV(kvs); err != nil {
		t.Fatalf("ParseKV(%q) = %q but FormatKV of that list fails: %v", "A=x\ry\n", kvs, err)
	}
}

func kvEqual(a, b []KV) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
