package safefs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Owner is who a created file or directory is given to with fchown: -1
// keeps that id as the kernel set it (the process's, or the parent's gid
// on a setgid directory). Keep changes nothing.
type Owner struct{ UID, GID int }

// Keep is the Owner that leaves ownership alone.
var Keep = Owner{UID: -1, GID: -1}

func (o Owner) set() bool { return o.UID >= 0 || o.GID >= 0 }

// Dir is an open directory. Every path given to its methods is relative to
// it and is resolved by the kernel beneath it without following symlinks.
// A Dir stays valid when its name is renamed or replaced: it is the
// directory, not the name.
type Dir struct {
	f    *os.File
	path string // for messages only; never resolved again
}

// dirFlags open a directory for reading, so the descriptor can be
// fchmod'ed, fchown'ed, fsynced, flocked and listed (an O_PATH descriptor
// can do none of these).
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY

// OpenRoot opens the directory at path. Every component of path must be a
// real directory, not a symlink (openat2 RESOLVE_NO_SYMLINKS from the
// filesystem root, or the component walk): a privileged process trusts the
// root of what it works on to be the directory it was configured with. A
// relative path is taken from the current directory.
func OpenRoot(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "safefs: %q: %v", trunc(path), err)
	}
	rel := strings.TrimLeft(abs, "/")
	if rel == "" {
		rel = "."
	}
	slash, err := os.Open("/")
	if err != nil {
		return nil, pathErr("open", "/", err)
	}
	defer slash.Close()
	fd, err := openBeneath(int(slash.Fd()), rel, dirFlags, 0)
	if err != nil {
		return nil, pathErr("open", abs, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), abs), path: abs}, nil
}

// Path is the name the Dir was opened by, for messages. Never open it again
// by this name: that is the re-resolution this package exists to avoid.
func (d *Dir) Path() string { return d.path }

// Fd is the directory's descriptor, valid until Close (for flock and *at
// syscalls this package does not wrap).
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

func (d *Dir) join(rel string) string { return filepath.Join(d.path, rel) }

// OpenDir opens the directory rel beneath d ("." is d itself, a new
// descriptor). A symlink on the way is ELOOP; a non-directory ENOENT
// (ENOTDIR).
func (d *Dir) OpenDir(rel string) (*Dir, error) {
	c, err := clean(rel)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(d.Fd(), c, dirFlags, 0)
	if err != nil {
		return nil, pathErr("open", d.join(c), err)
	}
	p := d.join(c)
	return &Dir{f: os.NewFile(uintptr(fd), p), path: p}, nil
}

// MkdirAll opens the directory rel beneath d, creating each missing
// component with mkdirat(2) relative to its parent's descriptor. A created
// directory gets exactly mode (fchmod: the umask does not apply) and owner
// (fchown) on its descriptor; existing directories are left as they are.
// It returns the last directory, open.
func (d *Dir) MkdirAll(rel string, mode os.FileMode, owner Owner) (*Dir, error) {
	c, err := clean(rel)
	if err != nil {
		return nil, err
	}
	cur, err := d.OpenDir(".")
	if err != nil {
		return nil, err
	}
	if c == "." {
		return cur, nil
	}
	for _, p := range strings.Split(c, "/") {
		next, err := cur.mkdirOne(p, mode, owner)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// mkdirOne opens or creates the single component name in d.
func (d *Dir) mkdirOne(name string, mode os.FileMode, owner Owner) (*Dir, error) {
	next, err := d.OpenDir(name)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return next, err
	}
	created := true
	if err := unix.Mkdirat(d.Fd(), name, 0o700); err != nil {
		if err != unix.EEXIST {
			return nil, pathErr("mkdir", d.join(name), err)
		}
		created = false // made concurrently: open what is there, as above
	}
	// Open what now has the name, again without following a symlink: a
	// user who swapped our new directory for a symlink gets ELOOP.
	if next, err = d.OpenDir(name); err != nil {
		return nil, err
	}
	if created {
		if err := next.Chmod(mode); err != nil {
			next.Close()
			return nil, err
		}
		if err := next.Chown(owner); err != nil {
			next.Close()
			return nil, err
		}
	}
	return next, nil
}

// Mkdir creates the directory rel beneath d (its parent must exist) with
// exactly mode and owner, set on the new directory's descriptor. An
// existing entry is EEXIST.
func (d *Dir) Mkdir(rel string, mode os.FileMode, owner Owner) error {
	dir, base, err := split(rel)
	if err != nil {
		return err
	}
	parent, err := d.OpenDir(dir)
	if err != nil {
		return err
	}
	defer parent.Close()
	if err := unix.Mkdirat(parent.Fd(), base, 0o700); err != nil {
		return pathErr("mkdir", d.join(rel), err)
	}
	nd, err := parent.OpenDir(base)
	if err != nil {
		return err
	}
	defer nd.Close()
	if err := nd.Chmod(mode); err != nil {
		return err
	}
	return nd.Chown(owner)
}

// Stat is fstat(2) of the directory.
func (d *Dir) Stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.Fd(), &st); err != nil {
		return st, pathErr("stat", d.path, err)
	}
	return st, nil
}

// Chmod sets the directory's permission bits exactly (fchmod(2) on the
// descriptor: no name is resolved).
func (d *Dir) Chmod(mode os.FileMode) error {
	if err := unix.Fchmod(d.Fd(), unixMode(mode)); err != nil {
		return pathErr("chmod", d.path, err)
	}
	return nil
}

// Chown gives the directory to owner (fchown(2) on the descriptor); Keep
// does nothing.
func (d *Dir) Chown(owner Owner) error {
	if !owner.set() {
		return nil
	}
	if err := unix.Fchown(d.Fd(), owner.UID, owner.GID); err != nil {
		return pathErr("chown", d.path, err)
	}
	return nil
}

// Sync makes the directory's entries durable (fsync(2) on it), after
// creating, renaming or removing something in it.
func (d *Dir) Sync() error {
	if err := d.f.Sync(); err != nil {
		return pathErr("sync", d.path, err)
	}
	return nil
}

// Names lists the directory's entries (without "." and ".."), unsorted.
func (d *Dir) Names() ([]string, error) {
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return nil, pathErr("readdir", d.path, err)
	}
	names, err := d.f.Readdirnames(-1)
	if err != nil {
		return nil, pathErr("readdir", d.path, err)
	}
	return names, nil
}

// Lstat is fstatat(2) of rel without following a final symlink; the
// directories on the way are walked as everywhere else here.
func (d *Dir) Lstat(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	c, err := clean(rel)
	if err != nil {
		return st, err
	}
	if c == "." {
		return d.Stat()
	}
	dir, base := filepath.Split(c)
	pfd := d.Fd()
	if dir != "" {
		// A bare descriptor of the parent, opened as OpenDir opens it
		// but without an *os.File, which would cost an fcntl and a
		// poller registration per call (a FUSE server calls this for
		// every lookup).
		fd, err := openBeneath(d.Fd(), filepath.Clean(dir), dirFlags, 0)
		if err != nil {
			return st, pathErr("open", d.join(dir), err)
		}
		defer unix.Close(fd)
		pfd = fd
	}
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, pathErr("lstat", d.join(c), err)
	}
	return st, nil
}

// unixMode turns an os.FileMode into chmod bits, setuid/setgid/sticky
// included.
func unixMode(m os.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		b |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		b |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		b |= unix.S_ISVTX
	}
	return b
}

// DirEntry is one entry of a directory listing: its name and its type
// (the S_IFMT bits of st_mode: unix.S_IFREG, unix.S_IFDIR, unix.S_IFLNK, …).
type DirEntry struct {
	Name string
	Type uint32
}

// ReadDir lists the directory's entries (without "." and ".."), unsorted,
// with their types, refusing more than max entries (EMSGSIZE). Types come
// from getdents(2); where the filesystem does not report one it is asked
// with fstatat(2) relative to the directory's descriptor, never by a path
// string (os.File.ReadDir would lstat "dir/name" by name).
func (d *Dir) ReadDir(max int) ([]DirEntry, error) {
	if _, err := unix.Seek(d.Fd(), 0, io.SeekStart); err != nil {
		return nil, pathErr("readdir", d.path, err)
	}
	var out []DirEntry
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(d.Fd(), buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, pathErr("readdir", d.path, err)
		}
		if n <= 0 {
			return out, nil
		}
		for b := buf[:n]; len(b) > 0; {
			// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
			// d_type u8, d_name NUL-terminated.
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 20 || reclen > len(b) {
				return nil, abi.Errorf(abi.EIO, "readdir %s: malformed dirent", d.path)
			}
			typ, name := b[18], b[19:reclen]
			if i := bytesIndexZero(name); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if s := string(name); s != "." && s != ".." {
				if len(out) >= max {
					return nil, abi.Errorf(abi.EMSGSIZE, "readdir %s: more than %d entries", d.path, max)
				}
				out = append(out, DirEntry{Name: s, Type: d.direntType(s, typ)})
			}
		}
	}
}

// direntType maps a d_type to S_IFMT bits, asking fstatat for DT_UNKNOWN.
func (d *Dir) direntType(name string, dt uint8) uint32 {
	switch dt {
	case unix.DT_REG:
		return unix.S_IFREG
	case unix.DT_DIR:
		return unix.S_IFDIR
	case unix.DT_LNK:
		return unix.S_IFLNK
	case unix.DT_FIFO:
		return unix.S_IFIFO
	case unix.DT_SOCK:
		return unix.S_IFSOCK
	case unix.DT_CHR:
		return unix.S_IFCHR
	case unix.DT_BLK:
		return unix.S_IFBLK
	}
	var st unix.Stat_t
	if unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return 0
	}
	return st.Mode & unix.S_IFMT
}

func bytesIndexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// Readlink returns the target of the symlink rel beneath d (readlinkat(2)
// relative to its parent's descriptor): the link is read, never followed.
// A target longer than PATH_MAX is ENAMETOOLONG.
func (d *Dir) Readlink(rel string) (string, error) {
	dir, base, err := split(rel)
	if err != nil {
		return "", err
	}
	parent, err := d.OpenDir(dir)
	if err != nil {
		return "", err
	}
	defer parent.Close()
	buf := make([]byte, unix.PathMax+1)
	n, err := unix.Readlinkat(parent.Fd(), base, buf)
	if err != nil {
		return "", pathErr("readlink", d.join(rel), err)
	}
	if n > unix.PathMax {
		return "", pathErr("readlink", d.join(rel), unix.ENAMETOOLONG)
	}
	return string(buf[:n]), nil
}

// ChmodAt sets the permission bits of the entry name in d (one component:
// a socket, a FIFO, a file) without following it if it is a symlink
// (ELOOP). Linux has no lchmod: the entry is opened O_PATH|O_NOFOLLOW,
// checked with fstat, and chmod(2) is applied to /proc/self/fd/N, which
// names exactly that inode — the way glibc emulates fchmodat with
// AT_SYMLINK_NOFOLLOW. An entry with more than one link is EACCES: a hard
// link another user swapped in under the name would have us chmod a file
// that lives elsewhere too.
func (d *Dir) ChmodAt(name string, mode os.FileMode) error {
	return d.chmodAt(name, 0, mode)
}

// ChmodSocket is ChmodAt for the socket a server just bound at name: what
// is there must be a socket with exactly one link (EINVAL for any other
// type, EACCES for more links), checked on the very descriptor the chmod
// goes through. Between bind(2) and the chmod a user who can write the
// directory may rename something else into the name; it is refused, never
// chmodded.
func (d *Dir) ChmodSocket(name string, mode os.FileMode) error {
	return d.chmodAt(name, unix.S_IFSOCK, mode)
}

// chmodAt is ChmodAt requiring the type want (S_IFMT bits; 0: any).
func (d *Dir) chmodAt(name string, want uint32, mode os.FileMode) error {
	if strings.Contains(name, "/") {
		return abi.Errorf(abi.EINVAL, "safefs: %q is not one path component", trunc(name))
	}
	if _, err := clean(name); err != nil {
		return err
	}
	fd, err := unix.Openat(d.Fd(), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("chmod", d.join(name), err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("chmod", d.join(name), err)
	}
	switch typ := st.Mode & unix.S_IFMT; {
	case typ == unix.S_IFLNK:
		return pathErr("chmod", d.join(name), unix.ELOOP)
	case want != 0 && typ != want:
		return abi.Errorf(abi.EINVAL, "chmod %s: %s is there, not %s; refusing", d.join(name), Kind(st.Mode), Kind(want))
	case st.Nlink != 1 && typ != unix.S_IFDIR:
		return abi.Errorf(abi.EACCES, "chmod %s: it has %d hard links; refusing", d.join(name), st.Nlink)
	}
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), unixMode(mode)); err != nil {
		return pathErr("chmod", d.join(name), err)
	}
	return nil
}

// ProcPath names the entry name in d through /proc/self/fd: a path the
// kernel resolves to d itself, whatever happened to d's name, for calls
// that take only a path (bind(2) of a Unix socket). It is valid while d is
// open and needs /proc.
func (d *Dir) ProcPath(name string) string {
	return "/proc/self/fd/" + strconv.Itoa(d.Fd()) + "/" + name
}
