package safefs

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// OpenFile opens the regular file rel beneath d. flag is os.O_RDONLY,
// os.O_WRONLY or os.O_RDWR, optionally with os.O_APPEND, os.O_CREATE,
// os.O_EXCL and os.O_TRUNC. A file it creates gets exactly perm (fchmod,
// not the umask) and is 0600 until then; an existing file keeps its mode.
//
// Whatever the flags: no symlink is followed anywhere on the way
// (ELOOP); the open never blocks (O_NONBLOCK: a FIFO opened for reading
// returns at once, for writing without a reader fails ENXIO); anything but
// a regular file is closed again and refused with EINVAL; a file opened
// for writing must have exactly one link (EACCES otherwise: a hard link
// planted by another user would make us write someone else's file); and
// O_TRUNC is applied with ftruncate only after those checks.
func (d *Dir) OpenFile(rel string, flag int, perm os.FileMode) (*os.File, error) {
	c, err := clean(rel)
	if err != nil {
		return nil, err
	}
	trunc := flag&os.O_TRUNC != 0
	flag &^= os.O_TRUNC
	var fd int
	created := false
	if flag&os.O_CREATE != 0 && flag&os.O_EXCL == 0 {
		// Create exclusively first, so we know whether the mode is ours
		// to set; an existing file is then opened as it is.
		fd, err = openBeneath(d.Fd(), c, flag|os.O_EXCL, 0o600)
		created = err == nil
		if err == unix.EEXIST {
			fd, err = openBeneath(d.Fd(), c, flag&^os.O_CREATE, 0)
		}
	} else {
		fd, err = openBeneath(d.Fd(), c, flag, 0o600)
		created = err == nil && flag&os.O_CREATE != 0
	}
	if err != nil {
		return nil, pathErr("open", d.join(c), err)
	}
	f := os.NewFile(uintptr(fd), d.join(c))
	fail := func(err error) (*os.File, error) {
		f.Close()
		if created {
			_ = d.Remove(c) // walked beneath d again, like the open
		}
		return nil, err
	}
	st, err := Fstat(f)
	if err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fail(abi.Errorf(abi.EINVAL, "%s is not a regular file (%s)", f.Name(), Kind(st.Mode)))
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 && st.Nlink != 1 {
		return fail(abi.Errorf(abi.EACCES, "%s has %d hard links; refusing to write it", f.Name(), st.Nlink))
	}
	if created && perm.Perm() != 0o600 {
		if err := unix.Fchmod(fd, unixMode(perm)); err != nil {
			return fail(pathErr("chmod", f.Name(), err))
		}
	}
	if trunc {
		if err := f.Truncate(0); err != nil {
			return fail(pathErr("truncate", f.Name(), err))
		}
	}
	return f, nil
}

// Open opens the regular file rel beneath d for reading (see OpenFile).
func (d *Dir) Open(rel string) (*os.File, error) { return d.OpenFile(rel, os.O_RDONLY, 0) }

// Create creates the regular file rel beneath d, which must not exist
// (EEXIST), for reading and writing, with exactly perm and owner, both set
// on the new file's descriptor before anything is written.
func (d *Dir) Create(rel string, perm os.FileMode, owner Owner) (*os.File, error) {
	f, err := d.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	if owner.set() {
		if err := f.Chown(owner.UID, owner.GID); err != nil {
			f.Close()
			_ = d.Remove(rel)
			return nil, pathErr("chown", f.Name(), err)
		}
	}
	return f, nil
}

// ReadFile reads the regular file rel beneath d, at most max bytes: a
// larger file is EMSGSIZE and nothing is returned.
//
// It works on the bare descriptor with the checks of Open: an *os.File
// would register the O_NONBLOCK descriptor with the poller (refused for a
// regular file) and switch it back to blocking, three system calls more
// for every small control file a run reads.
func (d *Dir) ReadFile(rel string, max int64) ([]byte, error) {
	c, err := clean(rel)
	if err != nil {
		return nil, err
	}
	name := d.join(c)
	fd, err := openBeneath(d.Fd(), c, os.O_RDONLY, 0)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathErr("stat", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, abi.Errorf(abi.EINVAL, "%s is not a regular file (%s)", name, Kind(st.Mode))
	}
	if st.Size > max {
		return nil, tooBig(name, max)
	}
	// Room for one byte more than max tells a file that grew while read.
	b := make([]byte, 0, min(st.Size, max)+1)
	for {
		if int64(len(b)) > max {
			return nil, tooBig(name, max) // it grew while we read
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		end := cap(b)
		if max < int64(end-1) {
			end = int(max) + 1
		}
		n, err := unix.Read(fd, b[len(b):end])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, pathErr("read", name, err)
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// readBounded reads all of f, refusing more than max bytes.
func readBounded(f *os.File, max int64) ([]byte, error) {
	st, err := Fstat(f)
	if err != nil {
		return nil, err
	}
	if st.Size > max {
		return nil, tooBig(f.Name(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, pathErr("read", f.Name(), err)
	}
	if int64(len(b)) > max {
		return nil, tooBig(f.Name(), max) // it grew while we read
	}
	return b, nil
}

func tooBig(name string, max int64) error {
	return abi.Errorf(abi.EMSGSIZE, "%s is larger than %d bytes", name, max)
}

// WriteFile replaces the file rel beneath d with data, atomically: a
// temporary file ".<name>.tmp-<random>" is created exclusively in the same
// directory, given exactly perm and owner on its descriptor before the
// first byte, written, fsynced and renamed over rel with renameat(2)
// relative to the directory's descriptor; then the directory is fsynced.
// Readers see the old or the new file, never a mix; a symlink at rel is
// replaced, never followed; on failure rel is untouched and the temporary
// file removed.
func (d *Dir) WriteFile(rel string, data []byte, perm os.FileMode, owner Owner) error {
	dir, base, err := split(rel)
	if err != nil {
		return err
	}
	parent, err := d.OpenDir(dir)
	if err != nil {
		return err
	}
	defer parent.Close()
	var f *os.File
	var tmp string
	for range 100 {
		tmp = "." + base + ".tmp-" + strconv.FormatUint(rand.Uint64(), 36)
		if len(tmp) > 255 {
			tmp = ".tmp-" + strconv.FormatUint(rand.Uint64(), 36)
		}
		f, err = parent.Create(tmp, perm, owner)
		if abi.CodeOf(err) != abi.EEXIST {
			break
		}
	}
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			_ = unix.Unlinkat(parent.Fd(), tmp, 0)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return pathErr("write", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return pathErr("sync", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return pathErr("close", f.Name(), err)
	}
	if err := unix.Renameat(parent.Fd(), tmp, parent.Fd(), base); err != nil {
		return pathErr("rename", d.join(rel), err)
	}
	renamed = true
	return parent.Sync()
}

// ReadAt reads the regular file rel beneath d at offset off into p, the
// way OpenFile opens it for reading (no symlink, never blocking, regular
// files only: EINVAL otherwise), and returns the attributes of what it
// read, so that the caller judges the very file the bytes came from. It
// reads at most len(p) bytes; fewer at the end of the file.
func (d *Dir) ReadAt(rel string, p []byte, off int64) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	c, err := clean(rel)
	if err != nil {
		return 0, st, err
	}
	fd, err := openBeneath(d.Fd(), c, unix.O_RDONLY, 0)
	if err != nil {
		return 0, st, pathErr("open", d.join(c), err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, st, pathErr("stat", d.join(c), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, st, abi.Errorf(abi.EINVAL, "%s is not a regular file (%s)", d.join(c), Kind(st.Mode))
	}
	n := 0
	for n < len(p) {
		m, err := unix.Pread(fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, st, pathErr("read", d.join(c), err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, st, nil
}

// Remove removes the file or empty directory rel beneath d (unlinkat(2)
// relative to its parent's descriptor; a symlink is removed, not
// followed).
func (d *Dir) Remove(rel string) error {
	dir, base, err := split(rel)
	if err != nil {
		return err
	}
	parent, err := d.OpenDir(dir)
	if err != nil {
		return err
	}
	defer parent.Close()
	err = unix.Unlinkat(parent.Fd(), base, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(parent.Fd(), base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return pathErr("remove", d.join(rel), err)
	}
	return nil
}

// maxRemoveDepth bounds RemoveAll's recursion (and its open descriptors)
// in a hostile tree.
const maxRemoveDepth = 64

// RemoveAll removes rel beneath d and everything in it, walking by
// descriptor: symlinks inside are removed, never followed, and nothing
// outside rel is touched. A missing rel is not an error.
func (d *Dir) RemoveAll(rel string) error {
	dir, base, err := split(rel)
	if err != nil {
		return err
	}
	parent, err := d.OpenDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer parent.Close()
	return parent.removeAll(base, 0)
}

func (d *Dir) removeAll(name string, depth int) error {
	err := unix.Unlinkat(d.Fd(), name, 0)
	switch err {
	case nil, unix.ENOENT:
		return nil
	case unix.EISDIR:
	default:
		return pathErr("remove", d.join(name), err)
	}
	if depth >= maxRemoveDepth {
		return abi.Errorf(abi.EINVAL, "safefs: %s is nested deeper than %d directories", d.join(name), maxRemoveDepth)
	}
	sub, err := d.OpenDir(name)
	if err != nil {
		return err
	}
	names, err := sub.Names()
	if err == nil {
		for _, n := range names {
			if err = sub.removeAll(n, depth+1); err != nil {
				break
			}
		}
	}
	sub.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(d.Fd(), name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return pathErr("remove", d.join(name), err)
	}
	return nil
}

// Rename renames oldRel beneath d to newRel beneath to (renameat(2)
// relative to both parents' descriptors). What newRel names is replaced;
// neither name is followed if it is a symlink.
func (d *Dir) Rename(oldRel string, to *Dir, newRel string) error {
	odir, obase, err := split(oldRel)
	if err != nil {
		return err
	}
	ndir, nbase, err := split(newRel)
	if err != nil {
		return err
	}
	op, err := d.OpenDir(odir)
	if err != nil {
		return err
	}
	defer op.Close()
	np, err := to.OpenDir(ndir)
	if err != nil {
		return err
	}
	defer np.Close()
	if err := unix.Renameat(op.Fd(), obase, np.Fd(), nbase); err != nil {
		return pathErr("rename", d.join(oldRel), err)
	}
	return nil
}

// Fstat is fstat(2) of an open file.
func Fstat(f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return st, pathErr("stat", f.Name(), err)
	}
	return st, nil
}

// Open opens the regular file at path for reading; every component of the
// path must be a real directory or file, not a symlink (see OpenRoot).
func Open(path string) (*os.File, error) {
	root, rel, err := rootOf(path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Open(rel)
}

// ReadFile is Open plus a read of at most max bytes (EMSGSIZE past it).
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, max)
}

// rootOf opens "/" and returns path relative to it.
func rootOf(path string) (*Dir, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", abi.Errorf(abi.EINVAL, "safefs: %q: %v", trunc(path), err)
	}
	root, err := OpenRoot("/")
	if err != nil {
		return nil, "", err
	}
	rel := abs[1:]
	if rel == "" {
		rel = "."
	}
	return root, rel, nil
}

// Kind names the file type in mode's S_IFMT bits for messages ("a FIFO").
func Kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFREG:
		return "a regular file"
	}
	return "not a regular file"
}

// Symlink creates the symlink rel beneath d pointing at target
// (symlinkat(2) relative to its parent's descriptor). Nothing resolves
// target here; an existing entry is EEXIST.
func (d *Dir) Symlink(target, rel string) error {
	dir, base, err := split(rel)
	if err != nil {
		return err
	}
	parent, err := d.OpenDir(dir)
	if err != nil {
		return err
	}
	defer parent.Close()
	if err := unix.Symlinkat(target, parent.Fd(), base); err != nil {
		return pathErr("symlink", d.join(rel), err)
	}
	return nil
}
