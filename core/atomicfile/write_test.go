package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The tests below change the process umask, so none of them runs in parallel.

// withUmask runs the rest of the test under mask and restores the old one.
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// tempFiles lists leftover temporary files for base in dir.
func tempFiles(t *testing.T, dir, base string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "."+base+".tmp-*"))
	if err != nil {
		t.Fatalf("glob: %v", err)
	}
	return names
}

func TestWriteFileMode(t *testing.T) {
	tests := []struct {
		mode  os.FileMode
		umask int
		old   bool // replace an existing file with a different mode
	}{
		{0o600, 0, false},
		{0o600, 0o077, false},
		{0o644, 0, false},
		{0o644, 0o077, false},
		{0o644, 0o077, true},
		{0o600, 0, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("mode %o umask %03o replace %v", tt.mode, tt.umask, tt.old), func(t *testing.T) {
			withUmask(t, tt.umask)
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if tt.old {
				if err := os.WriteFile(path, []byte("old contents"), 0o666^tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			data := []byte("new contents\n")
			if err := WriteFile(path, data, tt.mode); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("contents = %q, %v; want %q", got, err, data)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tt.mode {
				t.Fatalf("mode = %v, want %v", fi.Mode(), tt.mode)
			}
			if left := tempFiles(t, dir, "f"); len(left) != 0 {
				t.Fatalf("temporary files left behind: %q", left)
			}
		})
	}
}

func TestWriteModeDuringFill(t *testing.T) {
	tests := []struct {
		mode  os.FileMode
		umask int
	}{
		{0o600, 0},
		{0o644, 0o077},
		{0o640, 0o022},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("mode %o umask %03o", tt.mode, tt.umask), func(t *testing.T) {
			withUmask(t, tt.umask)
			dir := t.TempDir()
			path := filepath.Join(dir, "secret")
			err := Write(path, tt.mode, func(w io.Writer) error {
				temps := tempFiles(t, dir, "secret")
				if len(temps) != 1 {
					return fmt.Errorf("want one temporary file during fill, got %q", temps)
				}
				fi, err := os.Stat(temps[0])
				if err != nil {
					return err
				}
				if fi.Mode() != tt.mode || fi.Size() != 0 {
					return fmt.Errorf("temporary file has mode %v and %d bytes before the first write, want %v and 0",
						fi.Mode(), fi.Size(), tt.mode)
				}
				_, err = io.WriteString(w, "s3cr3t")
				return err
			})
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
		})
	}
}

func TestWriteFailureLeavesOriginal(t *testing.T) {
	errFill := errors.New("fill failed")
	tests := []struct {
		name string
		fill func(w io.Writer) error
	}{
		{"error before writing", func(io.Writer) error { return errFill }},
		{"error after writing", func(w io.Writer) error {
			io.WriteString(w, strings.Repeat("partial", 10000))
			return errFill
		}},
		{"panic", func(w io.Writer) error {
			io.WriteString(w, "partial")
			panic(errFill)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte("original"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = p.(error)
					}
				}()
				return Write(path, 0o600, tt.fill)
			}()
			if !errors.Is(err, errFill) {
				t.Fatalf("Write = %v, want it to wrap %v", err, errFill)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "original" {
				t.Fatalf("original file now %q, %v", got, err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != 0o644 {
				t.Fatalf("original mode now %v, want 0644", fi.Mode())
			}
			if left := tempFiles(t, dir, "f"); len(left) != 0 {
				t.Fatalf("temporary files left behind: %q", left)
			}
		})
	}
}

func TestWriteFileConcurrent(t *testing.T) {
	const writers, rounds = 8, 20
	dir := t.TempDir()
	path := filepath.Join(dir, "shared")
	contents := make([][]byte, writers)
	for i := range contents {
		// Large enough to need several write syscalls.
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 256<<10+i)
	}
	if err := WriteFile(path, contents[0], 0o644); err != nil {
		t.Fatal(err)
	}
	isWhole := func(b []byte) bool {
		for _, c := range contents {
			if bytes.Equal(b, c) {
				return true
			}
		}
		return false
	}

	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := os.ReadFile(path)
			if err != nil || !isWhole(got) {
				t.Errorf("reader saw %d bytes (%v), not one writer's whole contents", len(got), err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for range rounds {
				if err := WriteFile(path, contents[i], 0o644); err != nil {
					t.Errorf("WriteFile: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	got, err := os.ReadFile(path)
	if err != nil || !isWhole(got) {
		t.Fatalf("final file has %d bytes (%v), not one writer's whole contents", len(got), err)
	}
	if left := tempFiles(t, dir, "shared"); len(left) != 0 {
		t.Fatalf("temporary files left behind: %q", left)
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	err := WriteFile(path, []byte("x"), 0o644)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteFile into a missing directory = %v, want fs.ErrNotExist", err)
	}
}

func TestWriteFileSymlinkReplaced(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("target"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new"), 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	fi, err := os.Lstat(link)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() {
		t.Fatalf("link is now %v, want a regular file", fi.Mode())
	}
	got, err := os.ReadFile(target)
	if err != nil || string(got) != "target" {
		t.Fatalf("link target now %q, %v; want it untouched", got, err)
	}
}
