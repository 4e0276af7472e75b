package safefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// OpenPath gives a handle on any file type beneath the Dir, needs no read
// permission on the file, and refuses symlinks and escapes like every
// other walk.
func TestOpenPath(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		root, err := OpenRoot(fx.root)
		must(t, err)
		defer root.Close()
		must(t, os.Chmod(filepath.Join(fx.root, "a", "b", "file"), 0))
		f, err := root.OpenPath("a/b/file")
		must(t, err)
		var st unix.Stat_t
		must(t, unix.Fstat(int(f.Fd()), &st))
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Errorf("OpenPath(a/b/file) is mode %o, want a regular file", st.Mode)
		}
		f.Close()
		d, err := root.OpenPath("a/b")
		must(t, err)
		d.Close()
		for _, rel := range []string{"link", "a/out", "a/self/file", "link/secret"} {
			_, err := root.OpenPath(rel)
			wantCode(t, "OpenPath("+rel+")", err, abi.ELOOP)
		}
		_, err = root.OpenPath("../outside/secret")
		wantCode(t, "OpenPath(../outside/secret)", err, abi.EINVAL)
		_, err = root.OpenPath("a/missing")
		wantCode(t, "OpenPath(a/missing)", err, abi.ENOENT)
	})
}

// NewDir walks beneath an O_PATH descriptor like beneath OpenRoot, and
// refuses a descriptor that is not a directory.
func TestNewDir(t *testing.T) {
	fx := newFixture(t)
	fd, err := unix.Open(fx.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	d, err := NewDir(os.NewFile(uintptr(fd), fx.root), fx.root)
	must(t, err)
	defer d.Close()
	sub, err := d.MkdirAll("x/y", 0o750, Keep)
	must(t, err)
	sub.Close()
	if fi, err := os.Stat(filepath.Join(fx.root, "x", "y")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("MkdirAll beneath an O_PATH Dir: %v %v", fi, err)
	}
	_, err = d.OpenPath("link/secret")
	wantCode(t, "OpenPath through a symlink", err, abi.ELOOP)
	ffd, err := unix.Open(filepath.Join(fx.root, "a", "b", "file"), unix.O_PATH|unix.O_CLOEXEC, 0)
	must(t, err)
	f := os.NewFile(uintptr(ffd), "file")
	defer f.Close()
	_, err = NewDir(f, "file")
	wantCode(t, "NewDir(regular file)", err, abi.EINVAL)
	fx.outsideUntouched(t)
}
