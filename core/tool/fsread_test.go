package tool

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestFSRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("hello.txt", "hello world")
	write("utf8.txt", "aé€") // 1 + 2 + 3 bytes
	write("empty.txt", "")
	write("big.txt", strings.Repeat("x", DefaultMaxOutput+100))
	if err := os.Symlink("hello.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	abs := func(name string) string { return filepath.Join(dir, name) }

	tests := []struct {
		name    string
		max     int
		args    map[string]any
		content string
		offset  float64
		bytes   float64
		eof     bool
		path    string
	}{
		{"whole file", 0, map[string]any{"path": "hello.txt"}, "hello world", 0, 11, true, "hello.txt"},
		{"absolute path", 0, map[string]any{"path": abs("hello.txt")}, "hello world", 0, 11, true, "hello.txt"},
		{"dot path", 0, map[string]any{"path": "./sub/../hello.txt"}, "hello world", 0, 11, true, "hello.txt"},
		{"symlink followed", 0, map[string]any{"path": "link"}, "hello world", 0, 11, true, "link"},
		{"empty file", 0, map[string]any{"path": "empty.txt"}, "", 0, 0, true, "empty.txt"},
		{"offset and limit", 0, map[string]any{"path": "hello.txt", "offset": 6, "limit": 3}, "wor", 6, 3, false, "hello.txt"},
		{"limit reaching the end", 0, map[string]any{"path": "hello.txt", "offset": 6, "limit": 5}, "world", 6, 5, true, "hello.txt"},
		{"limit past the end", 0, map[string]any{"path": "hello.txt", "offset": 6, "limit": 100}, "world", 6, 5, true, "hello.txt"},
		{"offset at the end", 0, map[string]any{"path": "hello.txt", "offset": 11}, "", 11, 0, true, "hello.txt"},
		{"offset past the end", 0, map[string]any{"path": "hello.txt", "offset": 1 << 40}, "", 1 << 40, 0, true, "hello.txt"},
		{"MaxOutput caps", 4, map[string]any{"path": "hello.txt"}, "hell", 0, 4, false, "hello.txt"},
		{"MaxOutput caps limit", 4, map[string]any{"path": "hello.txt", "limit": 8}, "hell", 0, 4, false, "hello.txt"},
		{"limit below MaxOutput", 4, map[string]any{"path": "hello.txt", "limit": 2}, "he", 0, 2, false, "hello.txt"},
		{"default MaxOutput", 0, map[string]any{"path": "big.txt"}, strings.Repeat("x", DefaultMaxOutput), 0, DefaultMaxOutput, false, "big.txt"},
		{"UTF-8 whole", 0, map[string]any{"path": "utf8.txt"}, "aé€", 0, 6, true, "utf8.txt"},
		{"limit splits é", 0, map[string]any{"path": "utf8.txt", "limit": 2}, "a", 0, 1, false, "utf8.txt"},
		{"limit splits €", 0, map[string]any{"path": "utf8.txt", "limit": 5}, "aé", 0, 3, false, "utf8.txt"},
		{"read on after a split", 0, map[string]any{"path": "utf8.txt", "offset": 3, "limit": 3}, "€", 3, 3, true, "utf8.txt"},
		{"integral float offset", 0, map[string]any{"path": "hello.txt", "offset": 6.0, "limit": 1e1}, "world", 6, 5, true, "hello.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustCall(t, "fs.read", Env{Cwd: dir, MaxOutput: tt.max}, jsonArgs(t, tt.args))
			size := map[string]float64{"hello.txt": 11, "utf8.txt": 6, "empty.txt": 0, "big.txt": DefaultMaxOutput + 100, "link": 11}[tt.path]
			want := map[string]any{"path": abs(tt.path), "content": tt.content, "offset": tt.offset,
				"bytes": tt.bytes, "size": size, "eof": tt.eof}
			for k, v := range want {
				if got[k] != v {
					if s, ok := got[k].(string); ok && len(s) > 100 {
						t.Errorf("%s = %d bytes, want %d", k, len(s), len(v.(string)))
						continue
					}
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// TestFSReadProcFile: /proc files claim size 0; fs.read must read them
// anyway and still find the end.
func TestFSReadProcFile(t *testing.T) {
	got := mustCall(t, "fs.read", Env{}, `{"path":"/proc/self/status"}`)
	if !strings.Contains(got["content"].(string), "Pid:") || got["eof"] != true {
		t.Fatalf("read /proc/self/status = %v", got)
	}
}

func TestFSReadErrors(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"binary":       "ab\x00\xff\xfe",
		"cut-at-end":   "ok\xe2\x82", // a truncated € at EOF is not text
		"utf8.txt":     "€uro",
		"plain":        "text",
		"invalid-late": "good" + "\xff",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args string
		code abi.Code
		msg  string
	}{
		{"missing", `{"path":"nope"}`, abi.ENOENT, "no such file"},
		{"missing dir", `{"path":"nodir/file"}`, abi.ENOENT, ""},
		{"file as dir", `{"path":"plain/x"}`, abi.ENOENT, "not a directory"},
		{"dangling symlink", `{"path":"dangling"}`, abi.ENOENT, ""},
		{"directory", `{"path":"."}`, abi.EINVAL, "is a directory"},
		{"fifo does not block", `{"path":"fifo"}`, abi.EINVAL, "not a regular file"},
		{"device", `{"path":"/dev/null"}`, abi.EINVAL, "not a regular file"},
		{"binary", `{"path":"binary"}`, abi.EINVAL, "binary file; fs.read returns UTF-8 text only (invalid UTF-8 at byte 3)"},
		{"binary from offset", `{"path":"invalid-late","offset":2}`, abi.EINVAL, "invalid UTF-8 at byte 4"},
		{"cut rune at EOF", `{"path":"cut-at-end"}`, abi.EINVAL, "binary file"},
		{"offset inside a character", `{"path":"utf8.txt","offset":1}`, abi.EINVAL, "offset 1 is inside a UTF-8 character"},
		{"limit smaller than a character", `{"path":"utf8.txt","limit":2}`, abi.EINVAL, "limit 2 is too small for the character at offset 0"},
		{"NUL in path", `{"path":"a\u0000b"}`, abi.EINVAL, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Call(context.Background(), "fs.read", Env{Cwd: dir}, []byte(tt.args))
				done <- err
			}()
			select {
			case err := <-done:
				wantErr(t, err, tt.code, "fs.read: ", tt.msg)
			case <-time.After(5 * time.Second):
				t.Fatal("fs.read blocked")
			}
		})
	}
}
