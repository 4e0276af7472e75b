package sockstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func ownerOf(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

func TestDirStoreModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	store := DirStore{Dir: func(k SessionKey) string { return filepath.Join(root, "u", k.Name) }}
	uid := uint32(os.Geteuid())
	if uid == 0 {
		uid = 1000 // as root, the files must be handed to the key's uid
	}
	key := SessionKey{UID: uid, Name: "default"}
	l, err := store.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := store.Dir(key)
	for path, mode := range map[string]os.FileMode{
		filepath.Dir(dir):              os.ModeDir | 0o700,
		dir:                            os.ModeDir | 0o700,
		filepath.Join(dir, EventsFile): 0o600,
		filepath.Join(dir, SendsFile):  0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), mode)
		}
		if path != filepath.Dir(dir) && ownerOf(t, path) != uid {
			t.Errorf("%s: owner %d, want %d", path, ownerOf(t, path), uid)
		}
	}
	if _, err := store.Open(key); abi.CodeOf(err) != abi.EBUSY {
		t.Errorf("second open: %v, want EBUSY", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A widened directory is narrowed again on open.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err = store.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("reopened dir mode %v", fi.Mode())
	}
}

// A user owning a session directory must not make the daemon open, chmod
// or chown other files through it.
func TestDirStoreRefusesPlantedFiles(t *testing.T) {
	root := t.TempDir()
	victim := filepath.Join(root, "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		plant func(dir string) error
		code  abi.Code
	}{
		{"symlinked events", func(dir string) error { return os.Symlink(victim, filepath.Join(dir, EventsFile)) }, abi.ELOOP},
		{"hard-linked sends", func(dir string) error { return os.Link(victim, filepath.Join(dir, SendsFile)) }, abi.EACCES},
		{"directory as events", func(dir string) error { return os.Mkdir(filepath.Join(dir, EventsFile), 0o700) }, abi.EACCES},
		{"fifo as events", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, EventsFile), 0o600) }, abi.EACCES},
		{"symlinked session dir", func(dir string) error { os.Remove(dir); return os.Symlink(root, dir) }, abi.ELOOP},
		{"symlinked parent dir", func(dir string) error {
			os.Remove(dir)
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			return os.Symlink(root, filepath.Join(dir, "p"))
		}, abi.ELOOP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(root, tt.name)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tt.plant(dir); err != nil {
				t.Fatal(err)
			}
			store := DirStore{Dir: func(SessionKey) string { return dir }}
			if tt.name == "symlinked parent dir" {
				store = DirStore{Root: root, Dir: func(SessionKey) string { return filepath.Join(dir, "p", "s") }}
			}
			if l, err := store.Open(SessionKey{UID: 1000, Name: "s"}); abi.CodeOf(err) != tt.code {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open = %v, want %s", err, tt.code)
			}
			if fi, _ := os.Stat(victim); fi.Mode().Perm() != 0o644 || ownerOf(t, victim) != uint32(os.Geteuid()) {
				t.Fatalf("victim changed: %v", fi.Mode())
			}
		})
	}
}

func TestFrameID(t *testing.T) {
	tests := []struct {
		line string
		want uint64
		ok   bool
	}{
		{`{"type":"delta","id":"12","run":"r","text":"x"}`, 12, true},
		{`{"id":"7","type":"pong"}`, 7, true},
		{`{"type":"x\"y","id":"9"}`, 9, true},
		{`{"type":"delta","id":"0"}`, 0, false},
		{`{"type":"delta","id":"01"}`, 0, false},
		{`{"type":"delta","id":"18446744073709551616"}`, 0, false},
		{`{"type":"delta"}`, 0, false},
		{`not json`, 0, false},
	}
	for _, tt := range tests {
		got, err := frameID([]byte(tt.line))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("frameID(%s) = %d, %v; want %d, ok %v", tt.line, got, err, tt.want, tt.ok)
		}
	}
}

// Frames finds the first frame after any id, whether it is among the
// newest (remembered exactly), far behind (found from a checkpoint) or
// beyond the end, before and after a reopen.
func TestDirLogFrames(t *testing.T) {
	root := t.TempDir()
	store := DirStore{Dir: func(SessionKey) string { return filepath.Join(root, "s") }}
	key := SessionKey{UID: uint32(os.Geteuid()), Name: "s"}
	l, err := store.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000 // ~3 MiB: several checkpoints, and more frames than recentFrames
	pad := strings.Repeat("p", 1000)
	for id := uint64(1); id <= n; id++ {
		frame, _ := abi.Event{Type: abi.EvDelta, ID: strconv.FormatUint(id, 10), Run: "r", Text: pad}.MarshalJSON()
		if err := l.Append(id, frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Append(n, []byte(`{"type":"delta","id":"3000"}`)); abi.CodeOf(err) != abi.EINVAL {
		t.Fatalf("Append of a repeated id = %v, want EINVAL", err)
	}
	check := func(l Log) {
		t.Helper()
		if got := l.LastID(); got != n {
			t.Fatalf("LastID = %d, want %d", got, n)
		}
		for _, after := range []uint64{0, 1, 2, 500, 1023, 1024, 1025, 1977, 1978, 2500, n - 1, n, n + 10} {
			want := after + 1
			err := l.Frames(after, func(id uint64, frame []byte) error {
				if id != want {
					return fmt.Errorf("after %d: frame %d, want %d", after, id, want)
				}
				if !bytes.HasPrefix(frame, []byte(`{"type":"delta","id":"`+strconv.FormatUint(id, 10)+`"`)) {
					return fmt.Errorf("after %d: frame %d reads %.40s", after, id, frame)
				}
				want++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if last := max(after, n); want != last+1 {
				t.Fatalf("after %d: stopped before %d", after, want)
			}
		}
	}
	check(l)
	l.Close()
	if l, err = store.Open(key); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check(l)
}
