package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// recorder is an io.Writer counting Write calls; the Writer's mutex is what
// makes it safe to share.
type recorder struct {
	bytes.Buffer
	calls int
}

func (r *recorder) Write(p []byte) (int, error) {
	r.calls++
	return r.Buffer.Write(p)
}

func TestWriteFrame(t *testing.T) {
	max := strings.Repeat("m", MaxFrame)
	tests := []struct {
		name     string
		frame    string
		wantCode abi.Code
	}{
		{"json object", `{"a":1}`, ""},
		{"inner cr allowed", "a\rb", ""},
		{"exactly MaxFrame", max, ""},
		{"MaxFrame+1", max + "x", abi.EMSGSIZE},
		{"raw newline", "{\n}", abi.EINVAL},
		{"trailing newline", "{}\n", abi.EINVAL},
		{"empty", "", abi.EINVAL},
		{"trailing cr", "{}\r", abi.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out recorder
			err := NewWriter(&out).WriteFrame([]byte(tt.frame))
			if code := abi.CodeOf(err); code != tt.wantCode {
				t.Fatalf("WriteFrame: code %q (%v), want %q", code, err, tt.wantCode)
			}
			want, wantCalls := tt.frame+"\n", 1
			if tt.wantCode != "" {
				want, wantCalls = "", 0
			}
			if out.String() != want || out.calls != wantCalls {
				t.Fatalf("wrote %d bytes in %d calls, want %d bytes in %d calls",
					out.Len(), out.calls, len(want), wantCalls)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	tests := []struct {
		name     string
		value    any
		want     string
		wantCode abi.Code
	}{
		{"no html escaping", map[string]string{"s": "<a&b>"}, `{"s":"<a&b>"}` + "\n", ""},
		{"newline in string is escaped", "a\nb", `"a\nb"` + "\n", ""},
		{"unsupported type", make(chan int), "", abi.EINVAL},
		{"too large", strings.Repeat("x", MaxFrame), "", abi.EMSGSIZE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out recorder
			err := NewWriter(&out).Encode(tt.value)
			if code := abi.CodeOf(err); code != tt.wantCode {
				t.Fatalf("Encode: code %q (%v), want %q", code, err, tt.wantCode)
			}
			if out.String() != tt.want {
				t.Fatalf("wrote %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func TestWriterConcurrentEncode(t *testing.T) {
	const writers, perWriter = 8, 200
	var out recorder
	w := NewWriter(&out)
	type msg struct {
		Writer int    `json:"writer"`
		Seq    int    `json:"seq"`
		Pad    string `json:"pad"`
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				// Padding of varying length makes interleaving visible.
				if err := w.Encode(msg{g, i, strings.Repeat("p", (g*31+i)%500)}); err != nil {
					t.Errorf("Encode: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()

	if out.calls != writers*perWriter {
		t.Fatalf("underlying Write called %d times, want one per frame (%d)", out.calls, writers*perWriter)
	}
	next := make([]int, writers) // frames of one writer must stay in order
	r := NewReader(&out.Buffer)
	for n := 0; ; n++ {
		var m msg
		err := r.Decode(&m)
		if err == io.EOF {
			if n != writers*perWriter {
				t.Fatalf("read %d frames, want %d", n, writers*perWriter)
			}
			return
		}
		if err != nil {
			t.Fatalf("frame %d: %v", n, err)
		}
		if m.Writer < 0 || m.Writer >= writers || m.Seq != next[m.Writer] {
			t.Fatalf("frame %d: writer %d seq %d out of order", n, m.Writer, m.Seq)
		}
		next[m.Writer]++
	}
}

func TestWriterBackpressure(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	w := NewWriter(pw)

	done := make(chan error, 1)
	go func() { done <- w.WriteFrame([]byte(`{"a":1}`)) }()

	select {
	case err := <-done:
		t.Fatalf("WriteFrame returned (%v) while nobody reads", err)
	case <-time.After(100 * time.Millisecond):
	}

	got, err := NewReader(pr).ReadFrame()
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("ReadFrame = %q, %v", got, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WriteFrame: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteFrame still blocked after the reader read")
	}
}

// failingWriter accepts ok calls, then fails every call as told.
type failingWriter struct {
	ok    int
	short bool // fail with a short count and no error
	calls int
}

var errDisk = errors.New("disk on fire")

func (f *failingWriter) Write(p []byte) (int, error) {
	f.calls++
	if f.calls <= f.ok {
		return len(p), nil
	}
	if f.short {
		return len(p) / 2, nil
	}
	return 0, errDisk
}

func TestWriterStickyError(t *testing.T) {
	tests := []struct {
		name  string
		short bool
		cause error
	}{
		{"write error", false, errDisk},
		{"short write", true, io.ErrShortWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw := &failingWriter{ok: 1, short: tt.short}
			w := NewWriter(fw)
			if err := w.WriteFrame([]byte("first")); err != nil {
				t.Fatalf("first WriteFrame: %v", err)
			}
			first := w.WriteFrame([]byte("second"))
			if !errors.Is(first, tt.cause) {
				t.Fatalf("second WriteFrame = %v, want %v", first, tt.cause)
			}
			later := []error{w.WriteFrame([]byte("third")), w.Encode(json.RawMessage(`{}`))}
			for i, err := range later {
				if err != first {
					t.Fatalf("later call %d = %v, want the sticky %v", i, err, first)
				}
			}
			if fw.calls != 2 {
				t.Fatalf("underlying Write called %d times, want 2", fw.calls)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	values := []any{map[string]any{"a": "<b>"}, []int{1, 2}, "x", 42.5, nil}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, v := range values {
		if err := w.Encode(v); err != nil {
			t.Fatalf("Encode(%v): %v", v, err)
		}
	}
	r := NewReader(&buf)
	for _, want := range values {
		var got any
		if err := r.Decode(&got); err != nil {
			t.Fatalf("Decode: %v", err)
		}
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("round trip = %s, want %s", gotJSON, wantJSON)
		}
	}
	if err := r.Decode(new(any)); err != io.EOF {
		t.Fatalf("Decode at end = %v, want io.EOF", err)
	}
}
