package inputs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, []byte("12345"), 0o600)
	tests := []struct {
		path  string
		limit int64
		code  abi.Code
	}{
		{fifo, 10, abi.EINVAL},
		{dir, 10, abi.EINVAL},
		{"/dev/null", 10, abi.EINVAL},
		{filepath.Join(dir, "none"), 10, abi.ENOENT},
		{reg, 4, abi.EMSGSIZE},
		{reg, 5, ""},
	}
	for _, tt := range tests {
		done := make(chan error, 1)
		go func() {
			f, err := Open(tt.path, tt.limit)
			if err == nil {
				var b []byte
				b, err = ReadAll(f, tt.limit)
				if err == nil && string(b) != "12345" {
					t.Errorf("read %q", b)
				}
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if abi.CodeOf(err) != tt.code {
				t.Errorf("Open(%s, %d) = %v, want %q", tt.path, tt.limit, err, tt.code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocked", tt.path)
		}
	}
}

func TestReaderBoundsGrowth(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("abc"), 0o600)
	f, err := Open(p, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.WriteFile(p, []byte("abcdefgh"), 0o600) // grows after the check
	buf := make([]byte, 64)
	var n int
	var rerr error
	r := Reader(f, 4)
	for rerr == nil {
		var k int
		k, rerr = r.Read(buf[n:])
		n += k
	}
	if abi.CodeOf(rerr) != abi.EMSGSIZE || n > 5 {
		t.Fatalf("grown file: %d bytes, %v", n, rerr)
	}
}
