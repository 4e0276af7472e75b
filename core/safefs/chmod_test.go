package safefs

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestChmodAtAndProcPath(t *testing.T) {
	fx := newFixture(t)
	d, err := OpenRoot(fx.root)
	must(t, err)
	defer d.Close()
	ln, err := net.Listen("unix", d.ProcPath("s.sock"))
	must(t, err)
	defer ln.Close()
	fi, err := os.Lstat(filepath.Join(fx.root, "s.sock"))
	if err != nil || fi.Mode()&fs.ModeSocket == 0 {
		t.Fatalf("bind through ProcPath: %v %v", fi, err)
	}
	must(t, d.ChmodAt("s.sock", 0o600))
	if fi, _ := os.Lstat(filepath.Join(fx.root, "s.sock")); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode())
	}
	must(t, os.Symlink(filepath.Join(fx.outside, "secret"), filepath.Join(fx.root, "sym")))
	wantCode(t, "ChmodAt(symlink)", d.ChmodAt("sym", 0o666), abi.ELOOP)
	wantCode(t, "ChmodAt(a/b)", d.ChmodAt("a/b", 0o700), abi.EINVAL)
	fx.outsideUntouched(t)
}

// Issue 15: between bind(2) and the chmod of a server's socket, a user who
// can write the directory may rename a hard link of someone else's file
// into the socket's name. ChmodAt refuses an entry with several links and
// ChmodSocket anything but a socket, so neither file changes mode.
func TestChmodAtRefusesHardLinksAndNonSockets(t *testing.T) {
	fx := newFixture(t)
	d, err := OpenRoot(fx.root)
	must(t, err)
	defer d.Close()
	victim := filepath.Join(fx.root, "victim")
	must(t, os.WriteFile(victim, []byte("x"), 0o600))
	must(t, os.Chmod(victim, 0o600))
	must(t, os.Link(victim, filepath.Join(fx.root, "s.sock")))
	wantCode(t, "ChmodAt(hard link)", d.ChmodAt("s.sock", 0o666), abi.EACCES)
	wantCode(t, "ChmodSocket(hard link)", d.ChmodSocket("s.sock", 0o666), abi.EINVAL)
	must(t, os.Remove(filepath.Join(fx.root, "s.sock")))
	wantCode(t, "ChmodSocket(regular file)", d.ChmodSocket("victim", 0o666), abi.EINVAL)
	if fi, _ := os.Lstat(victim); fi.Mode().Perm() != 0o600 {
		t.Errorf("victim mode %v, want 0600", fi.Mode())
	}
	ln, err := net.Listen("unix", d.ProcPath("s.sock"))
	must(t, err)
	defer ln.Close()
	must(t, d.ChmodSocket("s.sock", 0o600))
	must(t, os.Link(filepath.Join(fx.root, "s.sock"), filepath.Join(fx.root, "s2.sock")))
	wantCode(t, "ChmodSocket(socket with two links)", d.ChmodSocket("s.sock", 0o666), abi.EACCES)
	if fi, _ := os.Lstat(filepath.Join(fx.root, "s.sock")); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode())
	}
	fx.outsideUntouched(t)
}
