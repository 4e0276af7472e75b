package sock

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// Listen binds the socket entry at path with mode perm. Its directory is
// opened once, without following symlinks (core/safefs), and everything
// after that goes through the directory's descriptor: the bind itself
// (through /proc/self/fd/N/name, so a directory swapped for a symlink
// cannot move the socket), the removal of a stale socket, and the chmod
// (which never follows a symlink and refuses anything but a socket with one
// link: a file renamed into the name after the bind is not chmodded, and
// the listen fails). Another live server on path is EBUSY; a
// non-socket file in the way is EEXIST and is never deleted.
func Listen(path string, perm os.FileMode) (*net.UnixListener, error) {
	dirPath, name := filepath.Split(filepath.Clean(path))
	d, err := safefs.OpenRoot(dirPath)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to listen on %s: %w", path, err)
	}
	defer d.Close()
	if st, err := d.Lstat(name); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, abi.Errorf(abi.EEXIST, "%s exists and is not a socket; refusing to replace it", path)
		}
		if c, err := net.DialTimeout("unix", d.ProcPath(name), time.Second); err == nil {
			c.Close()
			return nil, abi.Errorf(abi.EBUSY, "%s is served by another process", path)
		}
		if err := d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, abi.Errorf(abi.CodeOf(err), "failed to remove stale socket %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.ProcPath(name), Net: "unix"})
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := d.ChmodSocket(name, perm); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Unlink removes the socket entry at path through its directory's
// descriptor, never following a symlink; a missing one is not an error.
func Unlink(path string) error {
	dirPath, name := filepath.Split(filepath.Clean(path))
	d, err := safefs.OpenRoot(dirPath)
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return abi.Errorf(abi.EEXIST, "%s is not a socket; leaving it", path)
	}
	return d.Remove(name)
}
