package jsonl

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/cortexfs/cortexfs/core/abi"
)

// FuzzReader checks ReadFrame against a model: split the input on '\n',
// drop one trailing '\r' per line, skip empty lines, and expect one
// EMSGSIZE per line over the limit. Several limits and read patterns make
// frames land on, across and inside chunk boundaries.
func FuzzReader(f *testing.F) {
	for _, seed := range []string{
		"",
		"\n",
		"{}\n",
		"a\r\nb\n\n\r\nc",
		"\r\r\n\r",
		"0123456789012345678901234567890123456789012345678901234567890123\nok\n",
		"01234567890123456789012345678901234567890123456789012345678901234\nok",
		"0123456789012345678901234567890123456789012345678901234567890123\r\nok",
		"x\n\n\n{\"long\":\"0123456789012345678901234567890123456789012345678901234567890123456789\"}\r\ny",
	} {
		f.Add([]byte(seed))
	}
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"data+eof": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, limit := range []int{1, 7, 64} {
			want := model(data, limit)
			for name, newReader := range readers {
				got := fuzzRead(t, NewReaderSize(newReader(data), limit), limit, len(data))
				if !slices.Equal(got, want) {
					t.Fatalf("limit %d, %s reader: frames %q, want %q", limit, name, got, want)
				}
			}
		}
	})
}

// model is the expected ReadFrame sequence, with tooBig for EMSGSIZE.
func model(data []byte, limit int) []string {
	var want []string
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0:
		case len(line) > limit:
			want = append(want, tooBig)
		default:
			want = append(want, string(line))
		}
	}
	return want
}

// fuzzRead drains r, checking per-frame invariants on the way.
func fuzzRead(t *testing.T, r *Reader, limit, inputLen int) []string {
	var got []string
	// Each result consumes at least one input byte; more calls mean a loop.
	for range inputLen + 2 {
		frame, err := r.ReadFrame()
		switch {
		case err == io.EOF:
			return got
		case abi.CodeOf(err) == abi.EMSGSIZE:
			got = append(got, tooBig)
		case err != nil:
			t.Fatalf("limit %d: unexpected error %v", limit, err)
		case len(frame) == 0 || len(frame) > limit || bytes.IndexByte(frame, '\n') >= 0:
			t.Fatalf("limit %d: bad frame %q", limit, frame)
		default:
			got = append(got, string(frame))
		}
	}
	t.Fatalf("limit %d: no io.EOF after %d calls on %d input bytes", limit, inputLen+2, inputLen)
	return nil
}
