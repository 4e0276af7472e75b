package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cortexfs/cortexfs/core/abi"
)

func readAll(t *testing.T, r io.Reader, limit int) ([]Event, error) {
	t.Helper()
	rd := NewReaderSize(r, limit)
	var out []Event
	for {
		ev, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		ev.Data = append([]byte(nil), ev.Data...)
		out = append(out, ev)
	}
}

func TestReaderFields(t *testing.T) {
	in := "\xef\xbb\xbf: comment\r\nevent: a\r\ndata: x\r\ndata:y\r\nid: 7\r\nretry: 10\r\n\r\n" +
		"data: only\n\n\n\nevent: lone\n\ndata: last\n"
	evs, err := readAll(t, iotest.OneByteReader(strings.NewReader(in)), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{Type: "a", Data: []byte("x\ny"), ID: "7"}, {Data: []byte("only")}, {Data: []byte("last")}}
	if len(evs) != len(want) {
		t.Fatalf("got %d events: %+v", len(evs), evs)
	}
	for i, w := range want {
		if evs[i].Type != w.Type || !bytes.Equal(evs[i].Data, w.Data) || evs[i].ID != w.ID {
			t.Errorf("event %d = %+v, want %+v", i, evs[i], w)
		}
	}
}

func TestReaderCutAndLimit(t *testing.T) {
	if _, err := readAll(t, strings.NewReader("data: {\"a\":1}\n\ndata: {\"b"), 0); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut line: %v", err)
	}
	_, err := readAll(t, strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 64)
	if abi.CodeOf(err) != abi.EMSGSIZE {
		t.Errorf("oversize: %v", err)
	}
	_, err = readAll(t, strings.NewReader(strings.Repeat("data: 0123456789\n", 10)+"\n"), 64)
	if abi.CodeOf(err) != abi.EMSGSIZE {
		t.Errorf("oversize across lines: %v", err)
	}
}

// FuzzReader: any stream ends (EOF or an error), and no event's data
// exceeds the limit.
func FuzzReader(f *testing.F) {
	for _, s := range []string{"data: x\n\n", "event: e\ndata: {}\n\n", ": c\n\ndata: a\ndata: b\n\n", "data: cut", "\r\n\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewReaderSize(bytes.NewReader(b), 256)
		for i := 0; ; i++ {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 256 || i > len(b) {
				t.Fatalf("event %d of %d bytes from %d input bytes", i, len(ev.Data), len(b))
			}
		}
	})
}
