package jsonl

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// tooBig stands for an EMSGSIZE result in expected frame lists.
const tooBig = "<EMSGSIZE>"

// readAll drains r, recording frames as strings and EMSGSIZE as tooBig.
func readAll(t *testing.T, r *Reader) []string {
	t.Helper()
	var got []string
	for {
		frame, err := r.ReadFrame()
		switch {
		case err == io.EOF:
			return got
		case abi.CodeOf(err) == abi.EMSGSIZE:
			got = append(got, tooBig)
		case err != nil:
			t.Fatalf("ReadFrame: unexpected error: %v", err)
		default:
			got = append(got, string(frame))
		}
	}
}

func TestReadFrame(t *testing.T) {
	max := strings.Repeat("m", MaxFrame)
	tests := []struct {
		name  string
		input string
		limit int // 0 means NewReader
		want  []string
	}{
		{"empty input", "", 0, nil},
		{"one frame", "{}\n", 0, []string{"{}"}},
		{"several frames", "a\nb\nc\n", 0, []string{"a", "b", "c"}},
		{"final frame without newline", "a\nb", 0, []string{"a", "b"}},
		{"crlf", "a\r\nb\r\n", 0, []string{"a", "b"}},
		{"final frame without newline keeps crlf rule", "a\r", 0, []string{"a"}},
		{"only one trailing cr stripped", "a\r\r\n", 0, []string{"a\r"}},
		{"inner cr kept", "a\rb\n", 0, []string{"a\rb"}},
		{"empty lines skipped", "\n\na\n\n\r\nb\n\n", 0, []string{"a", "b"}},
		{"only newlines", "\n\n\n", 0, nil},
		{"exactly MaxFrame", max + "\nnext\n", 0, []string{max, "next"}},
		{"exactly MaxFrame with crlf", max + "\r\nnext\n", 0, []string{max, "next"}},
		{"MaxFrame+1 then next frame", max + "x\nnext\n", 0, []string{tooBig, "next"}},
		{"MaxFrame+1 at eof", "a\n" + max + "x", 0, []string{"a", tooBig}},
		{"small limit exact", "12345\n", 5, []string{"12345"}},
		{"small limit exact with crlf", "12345\r\n", 5, []string{"12345"}},
		{"small limit over", "123456\nok\n", 5, []string{tooBig, "ok"}},
		{"small limit over with cr", "123456\r\nok\n", 5, []string{tooBig, "ok"}},
		{"over limit spanning chunks", strings.Repeat("z", 100) + "\nok\n", 5, []string{tooBig, "ok"}},
		{"frame spanning chunks", strings.Repeat("z", 40) + "\nok\n", 64, []string{strings.Repeat("z", 40), "ok"}},
		{"consecutive oversize", "123456\n1234567\n\nok", 5, []string{tooBig, tooBig, "ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *Reader
			if tt.limit == 0 {
				r = NewReader(strings.NewReader(tt.input))
			} else {
				r = NewReaderSize(strings.NewReader(tt.input), tt.limit)
			}
			got := readAll(t, r)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("frames = %q, want %q", abbreviate(got), abbreviate(tt.want))
			}
			// EOF is stable once reached.
			if _, err := r.ReadFrame(); err != io.EOF {
				t.Fatalf("ReadFrame after EOF = %v, want io.EOF", err)
			}
		})
	}
}

// generator yields n copies of fill followed by tail, producing the bytes on
// the fly so the test itself holds no large input.
type generator struct {
	n    int64
	fill byte
	tail io.Reader
	blk  [4096]byte
}

func newGenerator(n int64, fill byte, tail string) *generator {
	g := &generator{n: n, fill: fill, tail: strings.NewReader(tail)}
	for i := range g.blk {
		g.blk[i] = fill
	}
	return g
}

func (g *generator) Read(p []byte) (int, error) {
	if g.n == 0 {
		return g.tail.Read(p)
	}
	k := 0
	for k < len(p) && g.n > 0 {
		c := copy(p[k:], g.blk[:min(int64(len(g.blk)), g.n)])
		k += c
		g.n -= int64(c)
	}
	return k, nil
}

func TestReadFrameOversizeBoundedMemory(t *testing.T) {
	const lineLen = 64 << 20
	const budget = 4 << 20
	src := newGenerator(lineLen, 'x', "\n{\"after\":true}\n")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := NewReader(src)
	_, err := r.ReadFrame()
	if code := abi.CodeOf(err); code != abi.EMSGSIZE {
		t.Fatalf("ReadFrame on %d-byte line: code %q (%v), want EMSGSIZE", lineLen, code, err)
	}
	frame, err := r.ReadFrame()
	if err != nil || string(frame) != `{"after":true}` {
		t.Fatalf("ReadFrame after oversize = %q, %v; want the following frame", frame, err)
	}
	runtime.ReadMemStats(&after)
	delta := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte line allocated %d bytes", lineLen, delta)
	if delta > budget {
		t.Fatalf("reading a %d-byte line allocated %d bytes, want at most %d", lineLen, delta, budget)
	}
}

func TestDecode(t *testing.T) {
	input := `{"n":1}` + "\n" +
		`{"n":` + "\n" + // invalid JSON
		`{"n":2} {"n":3}` + "\n" + // trailing data is invalid too
		strings.Repeat(" ", 40) + "\n" + // over the limit
		`{"n":4}` + "\n"
	r := NewReaderSize(strings.NewReader(input), 32)
	tests := []struct {
		wantN    int
		wantCode abi.Code
	}{
		{1, ""},
		{0, abi.EINVAL},
		{0, abi.EINVAL},
		{0, abi.EMSGSIZE},
		{4, ""},
	}
	for i, tt := range tests {
		var v struct{ N int }
		err := r.Decode(&v)
		if code := abi.CodeOf(err); code != tt.wantCode {
			t.Fatalf("Decode #%d: code %q (%v), want %q", i, code, err, tt.wantCode)
		}
		if err == nil && v.N != tt.wantN {
			t.Fatalf("Decode #%d: n = %d, want %d", i, v.N, tt.wantN)
		}
	}
	if err := r.Decode(new(any)); err != io.EOF {
		t.Fatalf("Decode at end = %v, want io.EOF", err)
	}
}

// step is one scripted result of a scriptedReader.
type step struct {
	data string
	err  error
}

// scriptedReader returns its steps one Read at a time, then io.EOF.
type scriptedReader []step

func (s *scriptedReader) Read(p []byte) (int, error) {
	if len(*s) == 0 {
		return 0, io.EOF
	}
	st := (*s)[0]
	*s = (*s)[1:]
	return copy(p, st.data), st.err
}

func TestReadFrameStreamErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		steps scriptedReader
		// want lists frames, or "!" for a boom error.
		want []string
	}{
		{
			name:  "error between frames is not sticky",
			steps: scriptedReader{{"a\n", nil}, {"", boom}, {"b\n", nil}},
			want:  []string{"a", "!", "b"},
		},
		{
			name:  "error mid-line is sticky",
			steps: scriptedReader{{"a\npar", nil}, {"", boom}, {"tial\nb\n", nil}},
			want:  []string{"a", "!", "!", "!"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(&tt.steps)
			for i, want := range tt.want {
				frame, err := r.ReadFrame()
				if want == "!" {
					if !errors.Is(err, boom) {
						t.Fatalf("ReadFrame #%d = %q, %v; want boom", i, frame, err)
					}
					continue
				}
				if err != nil || string(frame) != want {
					t.Fatalf("ReadFrame #%d = %q, %v; want %q", i, frame, err, want)
				}
			}
		})
	}
}

// abbreviate keeps failure messages readable when frames are 1 MiB long.
func abbreviate(frames []string) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		if len(f) > 40 {
			f = fmt.Sprintf("%s…(%d bytes)", f[:20], len(f))
		}
		out[i] = f
	}
	return out
}

func TestReaderLineNumbers(t *testing.T) {
	r := NewReaderSize(strings.NewReader("a\n\n\r\n"+strings.Repeat("x", 20)+"\nb\n\nc"), 8)
	type got struct {
		line  int
		frame string
	}
	var all []got
	for {
		frame, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if abi.CodeOf(err) == abi.EMSGSIZE {
			frame = []byte(tooBig)
		} else if err != nil {
			t.Fatal(err)
		}
		all = append(all, got{r.Line(), string(frame)})
	}
	want := []got{{1, "a"}, {4, tooBig}, {5, "b"}, {7, "c"}}
	if !slices.Equal(all, want) {
		t.Errorf("got %v, want %v", all, want)
	}
}
