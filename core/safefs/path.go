package safefs

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// NewDir makes a Dir of an open directory descriptor of any kind, O_PATH
// included: privileged code that holds a directory by some other means
// than a trusted path — the root of a mount cloned with open_tree(2), a
// descriptor another process passed — walks beneath it like beneath any
// Dir. Anything but a directory is EINVAL. The Dir owns f; path is for
// messages only.
func NewDir(f *os.File, path string) (*Dir, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, pathErr("stat", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, abi.Errorf(abi.EINVAL, "%s is not a directory (%s)", path, Kind(st.Mode))
	}
	return &Dir{f: f, path: path}, nil
}

// OpenPath opens rel beneath d with O_PATH: a handle on whatever is there,
// of any file type, that names it to *at(2), fchdir(2) and the mount
// syscalls but can neither read nor write it. Only search permission on
// the directories on the way is needed. No symlink is followed (ELOOP),
// as everywhere in this package.
func (d *Dir) OpenPath(rel string) (*os.File, error) {
	c, err := clean(rel)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(d.Fd(), c, unix.O_PATH, 0)
	if err != nil {
		return nil, pathErr("open", d.join(c), err)
	}
	// O_PATH|O_NOFOLLOW on a trailing symlink opens the link itself (the
	// component walk's last step); openat2 already refused it.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		if err == nil {
			err = unix.ELOOP
		}
		return nil, pathErr("open", d.join(c), err)
	}
	return os.NewFile(uintptr(fd), d.join(c)), nil
}
