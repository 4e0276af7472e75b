package fs

import (
	"context"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/policy"
)

// node is one projected path. It holds no durable state of its own: every
// request resolves vpath through the mount's view again, so a change of
// the tree or of an agent's authority applies to the next request.
type node struct {
	gofs.Inode
	m     *mount
	vpath string

	mu       sync.Mutex
	st       unix.Stat_t // attributes last served, for the ancestor checks
	hasSt    bool
	watchKey string // durable directory this node watches ("" none)
	watched  bool   // changes of this directory's entries reach the kernel
}

var (
	_ = (gofs.InodeEmbedder)((*node)(nil))
	_ = (gofs.NodeLookuper)((*node)(nil))
	_ = (gofs.NodeGetattrer)((*node)(nil))
	_ = (gofs.NodeOpendirHandler)((*node)(nil))
	_ = (gofs.NodeOpener)((*node)(nil))
	_ = (gofs.NodeReader)((*node)(nil))
	_ = (gofs.NodeFlusher)((*node)(nil))
	_ = (gofs.NodeReadlinker)((*node)(nil))
	_ = (gofs.NodeStatfser)((*node)(nil))
	_ = (gofs.NodeOnForgetter)((*node)(nil))
)

func (n *node) setStat(st unix.Stat_t) {
	n.mu.Lock()
	old, had := n.st, n.hasSt
	n.st, n.hasSt = st, true
	n.mu.Unlock()
	n.m.links.set(n, &old, &st, had)
}

// stale makes the next ancestor check read the node's attributes again.
func (n *node) stale() {
	n.mu.Lock()
	n.hasSt = false
	n.mu.Unlock()
}

// attrs are the node's attributes for a permission check: the last served
// ones, or freshly resolved.
func (n *node) attrs() (unix.Stat_t, syscall.Errno) {
	n.mu.Lock()
	st, ok := n.st, n.hasSt
	n.mu.Unlock()
	if ok {
		return st, 0
	}
	e, err := n.m.view.resolve(n.vpath)
	if err != nil {
		return st, errno(err)
	}
	n.setStat(e.st)
	return e.st, 0
}

// checkPath is the per-request check of the caller against the projection
// as on the durable tree: search permission on every directory from the
// root down to n's parent, and on n itself when self is set (a lookup
// inside n). The kernel checks the same with default_permissions on its
// cached attributes; this is the server's own answer for every request
// that reaches it, from the uid, gid and thread in the request header.
func (n *node) checkPath(c *caller, self bool) syscall.Errno {
	cur := n
	if !self {
		_, p := n.Parent()
		if p == nil {
			return 0 // the root: nothing above it
		}
		cur = p.Operations().(*node)
	}
	for cur != nil {
		st, en := cur.attrs()
		if en != 0 {
			return en
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return syscall.ENOTDIR
		}
		if !c.permits(&st, policy.MayExec) {
			return syscall.EACCES
		}
		_, p := cur.Parent()
		if p == nil {
			break
		}
		cur = p.Operations().(*node)
	}
	return 0
}

// Lookup resolves name in this directory for the caller.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	c := callerOf(ctx)
	if en := n.m.admit(c); en != 0 {
		return nil, en
	}
	if en := n.checkPath(c, true); en != 0 {
		return nil, en
	}
	// Watch this directory before reading what it holds: a change after
	// the watch is in place cannot be missed.
	n.ensureWatch()
	vp := joinV(n.vpath, name)
	e, err := n.m.view.resolve(vp)
	if err != nil {
		if en := errno(err); en != syscall.ENOENT || !n.cachesChildren() {
			// Not cached: a name missing under a directory nobody
			// watches must be asked for again.
			out.SetEntryTimeout(n.m.timeout(false))
			return nil, en
		}
		return nil, syscall.ENOENT
	}
	typ := e.st.Mode & unix.S_IFMT
	child := n.GetChild(name)
	if child == nil || child.StableAttr().Mode != typ {
		child = n.NewInode(ctx, &node{m: n.m, vpath: vp}, gofs.StableAttr{Mode: typ})
	}
	cn := child.Operations().(*node)
	cn.setStat(e.st)
	fillAttr(&out.Attr, &e.st)
	cached := n.cachesChildren()
	out.SetEntryTimeout(n.m.timeout(cached))
	out.SetAttrTimeout(cn.attrTimeout(&e.st, cached))
	return child, 0
}

// cachesChildren reports whether what this directory holds may be cached
// for long: a watch (ours or the view's) invalidates it on change.
func (n *node) cachesChildren() bool {
	n.mu.Lock()
	w := n.watched
	n.mu.Unlock()
	return w || n.m.view.covered(n.vpath)
}

// ensureWatch registers the durable directory behind this directory
// node, so that changes of its entries invalidate the kernel's caches. It
// runs when the kernel first caches something about the entries (a lookup
// in the directory, a listing), not when the directory itself is looked
// up: its own attributes are its parent's watch's business, and a listing
// of ten thousand tool directories must not cost ten thousand watches.
func (n *node) ensureWatch() {
	if n.m.view.covered(n.vpath) {
		return
	}
	n.mu.Lock()
	done := n.watchKey != ""
	n.mu.Unlock()
	if done {
		return
	}
	e, err := n.m.view.resolve(n.vpath)
	if err != nil || !e.back.valid() || !e.isDir() {
		return
	}
	key := e.back.key()
	d, err := e.back.b.dir.OpenDir(e.back.rel)
	if err != nil {
		return
	}
	ok := n.m.w.add(d.Fd(), key, n, func(evs []event) { n.m.onEvents(n, evs) })
	d.Close()
	n.mu.Lock()
	n.watchKey, n.watched = key, ok
	n.mu.Unlock()
}

// OnForget drops the node's watch once the kernel forgot it.
func (n *node) OnForget() {
	n.mu.Lock()
	key, st := n.watchKey, n.st
	n.watchKey, n.watched = "", false
	n.mu.Unlock()
	n.m.links.forget(n, &st)
	if key != "" {
		n.m.w.remove(key, n)
	}
}

// Getattr serves fresh attributes of the durable entry.
func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c := callerOf(ctx)
	if en := n.m.admit(c); en != 0 {
		return en
	}
	if en := n.checkPath(c, false); en != 0 {
		return en
	}
	e, err := n.m.view.resolve(n.vpath)
	if err != nil {
		return errno(err)
	}
	n.setStat(e.st)
	fillAttr(&out.Attr, &e.st)
	parentCaches := true // the root: its own watch reports its attributes
	if _, p := n.Parent(); p != nil {
		parentCaches = p.Operations().(*node).cachesChildren()
	}
	out.SetTimeout(n.attrTimeout(&e.st, parentCaches))
	return 0
}

// OpendirHandle checks the caller may read the directory and snapshots its
// listing. The kernel keeps the listing (FOPEN_CACHE_DIR) until a change
// invalidates it; every opendir still reaches us and is checked.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	c := callerOf(ctx)
	if en := n.m.admit(c); en != 0 {
		return nil, 0, en
	}
	if en := n.checkPath(c, false); en != 0 {
		return nil, 0, en
	}
	e, err := n.m.view.resolve(n.vpath)
	if err != nil {
		return nil, 0, errno(err)
	}
	n.setStat(e.st)
	if !e.isDir() {
		return nil, 0, syscall.ENOTDIR
	}
	if !c.permits(&e.st, policy.MayRead) {
		return nil, 0, syscall.EACCES
	}
	n.ensureWatch()
	l := &listing{fill: func() ([]fuse.DirEntry, syscall.Errno) { return n.entries(e) }}
	flags = 0
	if n.cachesChildren() && !n.m.uncached {
		flags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return l, flags, 0
}

// entries is the directory's listing with "." and "..".
func (n *node) entries(e entry) ([]fuse.DirEntry, syscall.Errno) {
	es, err := n.m.view.list(n.vpath, e)
	if err != nil {
		return nil, errno(err)
	}
	out := make([]fuse.DirEntry, 0, len(es)+2)
	out = append(out, fuse.DirEntry{Name: ".", Mode: unix.S_IFDIR}, fuse.DirEntry{Name: "..", Mode: unix.S_IFDIR})
	for _, de := range es {
		out = append(out, fuse.DirEntry{Name: de.Name, Mode: de.Type})
	}
	for i := range out {
		out[i].Off = uint64(i + 1)
	}
	return out, 0
}

// Open answers ENOSYS: the kernel then opens files of this mount without
// asking (FUSE "no open" support) and keeps their pages across opens
// (FOPEN_KEEP_CACHE is implied), so a warm read costs what a local file
// costs. Permission to open is the kernel's default_permissions check;
// every read that misses the cache still comes here and is checked.
//
// An uncached mount (Options.UID) opens every file itself, checking the
// caller, with direct I/O: every read then reaches Read and its check,
// never a page another caller's read left in the cache.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if !n.m.uncached {
		return nil, 0, syscall.ENOSYS
	}
	c := callerOf(ctx)
	if en := n.m.admit(c); en != 0 {
		return nil, 0, en
	}
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

// Flush answers ENOSYS so that close(2) stops costing a round trip: there
// is nothing to flush in a read-only projection.
func (n *node) Flush(ctx context.Context, f gofs.FileHandle) syscall.Errno { return syscall.ENOSYS }

// Read reads the durable file for a page-cache miss: resolved again,
// opened without following symlinks and without blocking (a FIFO a user
// put in place of a file is refused, never waited on), checked against the
// caller on the attributes of the descriptor actually read, and bounded by
// the request's size.
func (n *node) Read(ctx context.Context, f gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	c := callerOf(ctx)
	if en := n.m.admit(c); en != 0 {
		return nil, en
	}
	if en := n.checkPath(c, false); en != 0 {
		return nil, en
	}
	e, err := n.m.view.resolve(n.vpath)
	if err != nil {
		return nil, errno(err)
	}
	if e.kind != kindRaw || e.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, syscall.EINVAL
	}
	m, st, err := e.back.b.dir.ReadAt(e.back.rel, dest, off)
	if err != nil {
		return nil, errno(err)
	}
	if !c.permits(&st, policy.MayRead) {
		return nil, syscall.EACCES
	}
	return fuse.ReadResultData(dest[:m]), 0
}

// Readlink returns a symlink's target as the durable tree has it ("symlink
// means symlink": an alias stays an alias), or where a socket entry leads.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	c := callerOf(ctx)
	if en := n.m.admit(c); en != 0 {
		return nil, en
	}
	if en := n.checkPath(c, false); en != 0 {
		return nil, en
	}
	e, err := n.m.view.resolve(n.vpath)
	if err != nil {
		return nil, errno(err)
	}
	switch {
	case e.kind == kindSock:
		return []byte(e.target), 0
	case e.st.Mode&unix.S_IFMT != unix.S_IFLNK:
		return nil, syscall.EINVAL
	}
	t, err := e.back.b.dir.Readlink(e.back.rel)
	if err != nil {
		return nil, errno(err)
	}
	return []byte(t), 0
}

// Statfs reports the durable root's filesystem.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s unix.Statfs_t
	if err := unix.Fstatfs(n.m.root.dir.Fd(), &s); err != nil {
		return errno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = s.Blocks, s.Bfree, s.Bavail
	out.Files, out.Ffree = s.Files, s.Ffree
	out.Bsize, out.Frsize = uint32(s.Bsize), uint32(s.Frsize)
	out.NameLen = uint32(s.Namelen)
	return 0
}

// listing is an open directory. Its entries are read from the durable
// tree when the kernel first asks for them (at the first READDIR): an
// opendir answered from the kernel's cached listing costs no listing.
type listing struct {
	mu     sync.Mutex
	fill   func() ([]fuse.DirEntry, syscall.Errno)
	ents   []fuse.DirEntry
	filled bool
	i      int
}

var (
	_ = (gofs.FileReaddirenter)((*listing)(nil))
	_ = (gofs.FileSeekdirer)((*listing)(nil))
)

func (l *listing) load() syscall.Errno {
	if l.filled {
		return 0
	}
	ents, en := l.fill()
	if en != 0 {
		return en
	}
	l.ents, l.filled = ents, true
	return 0
}

func (l *listing) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if en := l.load(); en != 0 {
		return nil, en
	}
	if l.i >= len(l.ents) {
		return nil, 0
	}
	e := l.ents[l.i]
	l.i++
	return &e, 0
}

func (l *listing) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if en := l.load(); en != 0 {
		return en
	}
	l.i = min(int(off), len(l.ents))
	return 0
}

// fillAttr copies durable attributes into a FUSE reply; the inode number
// is the projection's own (go-fuse sets it).
func fillAttr(a *fuse.Attr, st *unix.Stat_t) {
	a.Size = uint64(st.Size)
	a.Blocks = uint64(st.Blocks)
	a.Atime, a.Atimensec = uint64(st.Atim.Sec), uint32(st.Atim.Nsec)
	a.Mtime, a.Mtimensec = uint64(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	a.Ctime, a.Ctimensec = uint64(st.Ctim.Sec), uint32(st.Ctim.Nsec)
	a.Mode = st.Mode
	a.Nlink = uint32(st.Nlink)
	a.Uid, a.Gid = st.Uid, st.Gid
	a.Rdev = uint32(st.Rdev)
	a.Blksize = uint32(st.Blksize)
}
