package fs

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// maxDirEntries bounds one directory listing: a directory a user filled
// with millions of names cannot make the server allocate without limit.
const maxDirEntries = 1 << 20

// base is a durable directory a projection reads beneath: the root of the
// tree, or a CTX_PATH tier outside it. It is opened once, without following
// a symlink anywhere on its path (safefs.OpenRoot); everything beneath it
// is reached relative to that descriptor, never by a path string.
type base struct {
	dir  *safefs.Dir
	path string // absolute; messages, watch keys and .sock link targets only
}

// backing names a durable file or directory: rel beneath a base.
type backing struct {
	b   *base
	rel string // "." is the base itself
}

func (k backing) valid() bool { return k.b != nil }

func (k backing) join(elem ...string) backing {
	return backing{k.b, path.Join(append([]string{k.rel}, elem...)...)}
}

// key is the durable path, for watches and messages.
func (k backing) key() string { return path.Join(k.b.path, k.rel) }

func (k backing) lstat() (unix.Stat_t, error) {
	return k.b.dir.Lstat(k.rel)
}

func (k backing) readDir() ([]safefs.DirEntry, error) {
	d, err := k.b.dir.OpenDir(k.rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(maxDirEntries)
}

// kind is what a projected entry is made of.
type kind uint8

const (
	// kindRaw is a durable file, directory or symlink shown as it is.
	kindRaw kind = iota
	// kindVirtual is a directory whose listing a view computes (the
	// per-agent view's filtered tiers); its attributes are those of its
	// durable counterpart.
	kindVirtual
	// kindSock is a socket entry, shown as a symlink to where the socket
	// can be reached (see sockTarget): FUSE cannot host a socket inode.
	kindSock
)

// entry is one resolved projection path.
type entry struct {
	kind   kind
	back   backing
	st     unix.Stat_t // attributes as served
	target string      // kindSock: the link target
}

func (e entry) isDir() bool { return e.st.Mode&unix.S_IFMT == unix.S_IFDIR }

// inval is one thing the kernel must forget after a durable change: the
// entry name in the directory at vpath (its dentry, positive or negative,
// when entry is set; its attributes and cached content always), and the
// directory's own listing when listing is set.
type inval struct {
	vpath   string
	name    string
	entry   bool
	listing bool
}

// view maps projection paths ("" is the mount root, "model/debug/echo")
// to durable entries. The system projection maps every path to itself;
// the per-agent view computes which paths exist.
type view interface {
	resolve(vpath string) (entry, error)
	list(vpath string, e entry) ([]safefs.DirEntry, error)
	// changed turns events in the durable directory behind the directory
	// node at vpath into invalidations.
	changed(vpath string, e entry, evs []event) []inval
	// covered reports whether the view's own watches invalidate what lies
	// in the virtual directory at vpath.
	covered(vpath string) bool
	close()
}

// rawEntry resolves a durable path as it is; a socket becomes a symlink to
// its reachable path.
func rawEntry(k backing, sockDir string) (entry, error) {
	st, err := k.lstat()
	if err != nil {
		return entry{}, err
	}
	e := entry{kind: kindRaw, back: k, st: st}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		e.kind, e.target = kindSock, sockTarget(k, sockDir)
		e.st.Mode = unix.S_IFLNK | 0o777
		e.st.Size = int64(len(e.target))
	}
	return e, nil
}

// sockTarget is where a durable socket is reached from inside a mount: for
// a socket beneath the tree's root, sockDir (default: the root's own
// absolute path) joined with its path in the tree; for one in a CTX_PATH
// tier outside the root, its own absolute path.
func sockTarget(k backing, sockDir string) string {
	if sockDir == "" {
		return k.key()
	}
	return path.Join(sockDir, k.rel)
}

// rawList lists a durable directory; sockets are listed as the symlinks
// they are projected as.
func rawList(k backing) ([]safefs.DirEntry, error) {
	es, err := k.readDir()
	for i := range es {
		if es[i].Type == unix.S_IFSOCK {
			es[i].Type = unix.S_IFLNK
		}
	}
	return es, err
}

// rawChanged is the invalidation of events in a directory shown as it is:
// a name that appeared, went or was renamed loses its dentry and the
// directory its cached listing; a name whose content or attributes changed
// loses only its attributes and pages (invalidating its dentry too would
// detach anything mounted on it, as a sandbox's binds are).
func rawChanged(vpath string, evs []event) []inval {
	var out []inval
	for _, e := range evs {
		if e.name == "" {
			continue // the directory itself: its parent's watch reports it
		}
		out = append(out, inval{vpath: vpath, name: e.name, entry: e.mask&entryEvents != 0, listing: e.mask&entryEvents != 0})
	}
	return out
}

// systemView is the whole durable tree, unchanged.
type systemView struct {
	root    *base
	sockDir string
}

func (v *systemView) resolve(vpath string) (entry, error) {
	return rawEntry(backing{v.root, relOf(vpath)}, v.sockDir)
}

func (v *systemView) list(vpath string, e entry) ([]safefs.DirEntry, error) { return rawList(e.back) }

func (v *systemView) changed(vpath string, e entry, evs []event) []inval {
	return rawChanged(vpath, evs)
}

func (v *systemView) covered(string) bool { return false }

func (v *systemView) close() {}

// relOf is a projection path as a path relative to a base.
func relOf(vpath string) string {
	if vpath == "" {
		return "."
	}
	return vpath
}

func joinV(vpath, name string) string {
	if vpath == "" {
		return name
	}
	return vpath + "/" + name
}

func splitV(vpath string) []string {
	if vpath == "" {
		return nil
	}
	return strings.Split(vpath, "/")
}

// errno is the FUSE answer for an error of the durable side.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	if errors.Is(err, fs.ErrNotExist) {
		return syscall.ENOENT
	}
	switch abi.CodeOf(err) {
	case abi.ENOENT:
		return syscall.ENOENT
	case abi.EACCES:
		return syscall.EACCES
	case abi.ELOOP:
		return syscall.ELOOP
	case abi.EINVAL:
		return syscall.EINVAL
	case abi.EMSGSIZE:
		return syscall.EFBIG
	case abi.EROFS:
		return syscall.EROFS
	}
	return syscall.EIO
}
