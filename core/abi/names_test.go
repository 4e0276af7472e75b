package abi

import (
	"regexp"
	"strings"
	"testing"
)

// nameRE is the grammar of object-abi.md "Names and Aliases".
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}$`)

func TestMaxNameLen(t *testing.T) {
	if MaxNameLen != 64 {
		t.Fatalf("MaxNameLen = %d, want 64 (one leading char + up to 63 more)", MaxNameLen)
	}
}

func TestValidName(t *testing.T) {
	len64 := "a" + strings.Repeat("b", 63)
	len65 := len64 + "c"
	tests := []struct {
		name string
		in   string
		ok   bool
		msg  string // fragment the EINVAL message must contain
	}{
		// Accepted.
		{"single letter", "a", true, ""},
		{"single upper", "Z", true, ""},
		{"single digit", "7", true, ""},
		{"leading digit", "0abc", true, ""},
		{"model-ish", "gpt-4o", true, ""},
		{"dotted", "gpt-5.4-mini", true, ""},
		{"host-like", "api.lmm.best", true, ""},
		{"embedded plus", "a+b", true, ""},
		{"embedded dash", "a-b", true, ""},
		{"embedded dot", "a.b", true, ""},
		{"embedded underscore", "a_b", true, ""},
		{"all allowed punctuation", "a._+-z", true, ""},
		{"double dot inside", "a..b", true, ""},
		{"trailing dot", "a.", true, ""},
		{"trailing dash", "a-", true, ""},
		{"trailing plus", "a+", true, ""},
		{"exactly 64 bytes", len64, true, ""},
		{"sock without dot", "sock", true, ""},
		{"sock suffix continued", "foo.sockx", true, ""},
		{"sock infix", "a.sock.b", true, ""},
		{"d without dot", "xd", true, ""},
		{"dd suffix", "x.dd", true, ""},
		{"d infix", "a.d.b", true, ""},
		// The suffix checks use strings.HasSuffix and are case-sensitive:
		// only the lower-case ".sock" and ".d" are reserved, so these pass.
		{"upper D suffix (case-sensitive)", "x.D", true, ""},
		{"upper SOCK suffix (case-sensitive)", "x.SOCK", true, ""},
		{"mixed Sock suffix (case-sensitive)", "x.Sock", true, ""},

		// Rejected.
		{"empty", "", false, "empty"},
		{"dot", ".", false, "reserved"},
		{"dotdot", "..", false, "reserved"},
		{"three dots", "...", false, "must start with a letter or digit"},
		{"leading dot", ".hidden", false, "must start with a letter or digit"},
		{"leading dash", "-a", false, "must start with a letter or digit"},
		{"leading underscore", "_a", false, "must start with a letter or digit"},
		{"leading plus", "+a", false, "must start with a letter or digit"},
		{"leading space", " a", false, "must start with a letter or digit"},
		{"65 bytes", len65, false, "longer than 64"},
		{"slash", "a/b", false, "contains '/'"},
		{"leading slash", "/a", false, "contains '/'"},
		{"lone slash", "/", false, "contains '/'"},
		{"NUL inside", "a\x00b", false, "contains NUL"},
		{"lone NUL", "\x00", false, "contains NUL"},
		{"newline inside", "a\nb", false, "contains newline"},
		{"trailing newline", "a\n", false, "contains newline"},
		{"lone newline", "\n", false, "contains newline"},
		{"tab", "a\tb", false, "control character"},
		{"carriage return", "a\rb", false, "control character"},
		{"escape", "a\x1bb", false, "control character"},
		{"unit separator 0x1f", "a\x1fb", false, "control character"},
		{"DEL 0x7f", "a\x7fb", false, "control character"},
		{"space inside", "a b", false, "not allowed"},
		{"colon", "a:b", false, "not allowed"},
		{"backslash", `a\b`, false, "not allowed"},
		{"at sign", "a@b", false, "not allowed"},
		{"tilde", "a~", false, "not allowed"},
		{"non-ASCII é inside", "caf\u00e9", false, "not allowed"},
		{"non-ASCII é leading", "\u00e9t\u00e9", false, "must start with a letter or digit"},
		{"invalid UTF-8", "a\xffb", false, "not allowed"},
		{"sock suffix", "a.sock", false, ".sock"},
		{"bare .sock", ".sock", false, "must start with a letter or digit"},
		{"d suffix", "x.d", false, "suffix .d"},
		{"bare .d", ".d", false, "must start with a letter or digit"},
		{"sock then d", "x.sock.d", false, "suffix .d"},
		{"d then sock", "x.d.sock", false, ".sock"},
		{"64 bytes ending .sock", strings.Repeat("a", 59) + ".sock", false, ".sock"},
		{"64 bytes ending .d", strings.Repeat("a", 62) + ".d", false, "suffix .d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidName(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidName(%q) = %v, want nil", tt.in, err)
				}
			} else {
				wantErr(t, err, EINVAL, tt.msg)
			}
			// Cross-check the table itself against the spec grammar.
			spec := nameRE.MatchString(tt.in) &&
				!strings.HasSuffix(tt.in, ".sock") && !strings.HasSuffix(tt.in, ".d")
			if spec != tt.ok {
				t.Errorf("table entry %q: ok=%v but spec grammar says %v", tt.in, tt.ok, spec)
			}
		})
	}
}

// Hostile input must not produce unbounded error messages.
func TestValidNameMessageBounded(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("a", 100000),
		strings.Repeat("\x00", 100000),
		strings.Repeat("\u00e9", 50000),
		"a" + strings.Repeat("\x01", 63),
	} {
		err := ValidName(in)
		wantErr(t, err, EINVAL)
		if n := len(err.Error()); n > maxErrLen {
			t.Errorf("message for %d-byte input is %d bytes, want <= %d", len(in), n, maxErrLen)
		}
	}
}

func TestSplitModelID(t *testing.T) {
	tests := []struct {
		name          string
		in            string
		provider, mdl string
		ok            bool
		msg           string
	}{
		{"openai", "openai/gpt-4o", "openai", "gpt-4o", true, ""},
		{"dotted provider and model", "api.lmm.best/gpt-5.4-mini", "api.lmm.best", "gpt-5.4-mini", true, ""},
		{"debug echo", "debug/echo", "debug", "echo", true, ""},
		{"single chars", "a/b", "a", "b", true, ""},
		{"64+64", strings.Repeat("p", 64) + "/" + strings.Repeat("m", 64), strings.Repeat("p", 64), strings.Repeat("m", 64), true, ""},
		{"plus in model", "local/llama+lora", "local", "llama+lora", true, ""},

		{"three components", "provider/model/extra", "", "", false, "two components"},
		{"double slash", "a//b", "", "", false, "two components"},
		{"leading slash", "/a", "", "", false, "empty"},
		{"trailing slash", "a/", "", "", false, "empty"},
		{"lone slash", "/", "", "", false, "empty"},
		{"one component", "a", "", "", false, "two components"},
		{"empty", "", "", "", false, "two components"},
		{"model is .sock", "a/.sock", "", "", false, "invalid model id"},
		{"model has .sock suffix", "a/b.sock", "", "", false, ".sock"},
		{"provider has .d suffix", "a.d/b", "", "", false, "suffix .d"},
		{"provider dot", "./a", "", "", false, "reserved"},
		{"provider dotdot", "../a", "", "", false, "reserved"},
		{"model dotdot", "a/..", "", "", false, "reserved"},
		{"model newline", "a/b\n", "", "", false, "newline"},
		{"model NUL", "a/b\x00", "", "", false, "NUL"},
		{"model space", "a/b c", "", "", false, "not allowed"},
		{"model 65 bytes", "a/" + strings.Repeat("m", 65), "", "", false, "longer than 64"},
		{"leading dash model", "a/-b", "", "", false, "must start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, m, err := SplitModelID(tt.in)
			verr := ValidModelID(tt.in)
			if tt.ok {
				if err != nil || verr != nil {
					t.Fatalf("SplitModelID(%q) = %v / ValidModelID = %v, want nil", tt.in, err, verr)
				}
				if p != tt.provider || m != tt.mdl {
					t.Errorf("SplitModelID(%q) = (%q, %q), want (%q, %q)", tt.in, p, m, tt.provider, tt.mdl)
				}
				return
			}
			wantErr(t, err, EINVAL, tt.msg)
			wantErr(t, verr, EINVAL, tt.msg)
			if p != "" || m != "" {
				t.Errorf("on error SplitModelID(%q) returned (%q, %q), want empty", tt.in, p, m)
			}
		})
	}
}

func TestSplitModelIDMessageBounded(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("a/", 50000),
		strings.Repeat("a", 100000) + "/b",
		"a/" + strings.Repeat("\x00", 100000),
	} {
		_, _, err := SplitModelID(in)
		wantErr(t, err, EINVAL)
		if n := len(err.Error()); n > maxErrLen {
			t.Errorf("message for %d-byte id is %d bytes, want <= %d", len(in), n, maxErrLen)
		}
	}
}

func TestPaths(t *testing.T) {
	if SockSuffix != ".sock" || CtlSuffix != ".d" {
		t.Fatalf("suffixes = %q, %q", SockSuffix, CtlSuffix)
	}
	tests := []struct{ in, sock, ctl string }{
		{"echo", "echo.sock", "echo.d"},
		{"/m/openai/gpt-4o", "/m/openai/gpt-4o.sock", "/m/openai/gpt-4o.d"},
		{"/a/tool/", "/a/tool.sock", "/a/tool.d"},
		{"/a/tool///", "/a/tool.sock", "/a/tool.d"},
	}
	for _, tt := range tests {
		if got := SockPath(tt.in); got != tt.sock {
			t.Errorf("SockPath(%q) = %q, want %q", tt.in, got, tt.sock)
		}
		if got := CtlDir(tt.in); got != tt.ctl {
			t.Errorf("CtlDir(%q) = %q, want %q", tt.in, got, tt.ctl)
		}
	}
	// A valid name plus either suffix is never itself a valid name, so the
	// object triple name, name.sock, name.d cannot collide.
	for _, n := range []string{"a", "echo", "gpt-4o"} {
		for _, p := range []string{SockPath(n), CtlDir(n)} {
			if ValidName(p) == nil {
				t.Errorf("ValidName(%q) = nil, want EINVAL (reserved suffix)", p)
			}
		}
	}
	if ClassModel != "model" || ClassTool != "tool" || ClassAgent != "agent" {
		t.Errorf("classes = %q %q %q", ClassModel, ClassTool, ClassAgent)
	}
}
