package tasks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpoolCapAndTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	s, err := newSpool(p, 10, 4)
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("abcdef"))
	s.Write([]byte("ghijklmnop"))
	s.Close()
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "abcdefghij" || !s.truncated || s.Tail() != "mnop" || fi.Mode().Perm() != 0o600 {
		t.Errorf("file %q truncated %v tail %q mode %v", b, s.truncated, s.Tail(), fi.Mode())
	}
	if got := readTail(p, 3); got != "hij" {
		t.Errorf("readTail = %q", got)
	}
	if !strings.HasPrefix(readTail(p, 100), "abc") {
		t.Error("readTail of a short file")
	}
}
