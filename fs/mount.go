package fs

import (
	"errors"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// FSType is the filesystem type of every projection in /proc/self/mountinfo
// ("fuse." + Name): how `ctx doctor` finds them.
const (
	Name   = "cortexfs"
	FSType = "fuse." + Name
)

// Cache lifetimes. What a watched directory holds is cached for long and
// invalidated by notification when it changes; what lies in a directory
// that could not be watched (the inotify watch limit) expires quickly, so
// a change still shows within the 100 ms the issue asks for.
const (
	cacheLong     = time.Minute
	cacheNegative = 10 * time.Second
	cacheShort    = 50 * time.Millisecond
)

// Options configure one projection.
type Options struct {
	// Source is the durable CortexFS root.
	Source string
	// Agent, when set, is the path of an agent object (agent/<name> or
	// home/<uid>/agent/<name> under Source): the mount is that agent's
	// view instead of the whole tree.
	Agent string
	// UID, when not nil, admits only that uid (and root): a projection
	// mounted by root for one user. Everyone else gets EACCES. Such a mount
	// is served uncached: the kernel asks the server for every lookup,
	// stat and read (zero timeouts, direct I/O, no cached listings), so no
	// answer it kept for the admitted user reaches another one without
	// the server's check. (Mounting it as the user's own, user_id=UID
	// without allow_other, would let the kernel refuse everyone else by
	// itself, but also refuses the mounting root's processes, go-fuse's
	// mount handshake included.)
	UID *uint32
	// SockDir is the directory where sockets beneath Source are reached
	// from inside the mount (default: Source itself). A socket entry
	// name.sock is projected as a symlink to SockDir/<its path in the
	// tree>; a sandbox that binds Source (or the directories holding the
	// sockets it may use) at SockDir lets its processes connect(2)
	// through the entry they see.
	SockDir string
	// AllowOther lets other users use the mount. Nil means: when the
	// server runs as root (a non-root mount needs user_allow_other in
	// /etc/fuse.conf for it).
	AllowOther *bool
	// Debug logs every FUSE request through Logf.
	Debug bool
	// Logf receives diagnostics (nil: discarded).
	Logf func(format string, args ...any)

	// noKernelChecks leaves default_permissions out, so that tests see
	// the server's own per-request checks alone.
	noKernelChecks bool
}

// Server is a mounted projection.
type Server struct {
	srv        *fuse.Server
	m          *mount
	Mountpoint string
	done       chan struct{}
}

// mount is the state every node of one projection shares.
type mount struct {
	root     *base
	view     view
	w        *watcher
	rootNode *node
	uid      *uint32
	uncached bool // every request reaches the server (a UID mount)
	logf     func(string, ...any)
	links    links
}

// Mount mounts a projection of o.Source at mountpoint and serves it in the
// background; Wait blocks until it is unmounted.
//
// The mount is read-only, nosuid and nodev, with default_permissions: the
// kernel checks every access against the mode bits served, with the
// caller's real credentials (supplementary groups included), on top of the
// server's own per-request check. As root it is made with mount(2)
// directly and needs no fusermount; as another user go-fuse runs
// fusermount3 (or fusermount) from PATH.
func Mount(mountpoint string, o Options) (*Server, error) {
	m, err := newMount(o)
	if err != nil {
		return nil, err
	}
	if err := checkMountpoint(mountpoint, m.root); err != nil {
		m.close()
		return nil, err
	}
	root, err := m.view.resolve("")
	if err != nil {
		m.close()
		return nil, abi.Errorf(abi.CodeOf(err), "projection root: %v", err)
	}
	m.rootNode.setStat(root.st)
	m.rootNode.ensureWatch()
	asRoot := os.Geteuid() == 0
	allowOther := asRoot
	if o.AllowOther != nil {
		allowOther = *o.AllowOther
	}
	long, neg := cacheLong, cacheNegative
	if m.uncached {
		long, neg = 0, 0
	}
	opts := &gofs.Options{
		EntryTimeout:    &long,
		AttrTimeout:     &long,
		NegativeTimeout: &neg,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			AllowOther:        allowOther,
			Name:              Name,
			FsName:            fsName(o.Source),
			Options:           mountOptions(o),
			DirectMountStrict: asRoot,
			DirectMountFlags:  syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV,
			DisableXAttrs:     true,
			// Replies are small (metadata, control files): a write(2) of
			// the reply beats moving it through a pipe with splice(2).
			DisableSplice: true,
			Debug:         o.Debug,
		},
	}
	if o.Debug {
		opts.MountOptions.Logger = log.New(logWriter(m.logf), "", 0)
	}
	srv, err := gofs.Mount(mountpoint, m.rootNode, opts)
	if err != nil {
		m.close()
		return nil, abi.Errorf(mountCode(err), "mount %s: %v", mountpoint, err)
	}
	s := &Server{srv: srv, m: m, Mountpoint: mountpoint, done: make(chan struct{})}
	go func() {
		srv.Wait()
		m.close()
		close(s.done)
	}()
	return s, nil
}

// mountOptions are the -o options: read-only, no setuid, no devices, and
// the kernel's own mode-bit checks on every access.
func mountOptions(o Options) []string {
	opts := []string{"ro", "nosuid", "nodev"}
	if !o.noKernelChecks {
		opts = append(opts, "default_permissions")
	}
	return opts
}

func newMount(o Options) (*mount, error) {
	if o.Source == "" {
		return nil, abi.Errorf(abi.EINVAL, "no source tree")
	}
	src, err := filepath.Abs(o.Source)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "source %q: %v", o.Source, err)
	}
	dir, err := safefs.OpenRoot(src)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "source %s: %v", src, err)
	}
	m := &mount{root: &base{dir: dir, path: src}, uid: o.UID, uncached: o.UID != nil, logf: o.Logf}
	if m.logf == nil {
		m.logf = func(string, ...any) {}
	}
	m.rootNode = &node{m: m}
	if m.w, err = newWatcher(m.overflow); err != nil {
		m.logf("inotify unavailable (%v): caches expire after %v instead of being invalidated", err, cacheShort)
		m.w = nil
	}
	sockDir := o.SockDir
	if sockDir == "" {
		sockDir = src
	}
	if o.Agent == "" {
		m.view = &systemView{root: m.root, sockDir: sockDir}
		return m, nil
	}
	av, err := newAgentView(m, o.Agent, sockDir)
	if err != nil {
		m.close()
		return nil, err
	}
	m.view = av
	return m, nil
}

func (m *mount) close() {
	m.w.close()
	if m.view != nil {
		m.view.close()
	}
	m.root.dir.Close()
}

// Wait blocks until the projection is unmounted and its last user let
// go (after a lazy unmount the server answers its remaining users).
func (s *Server) Wait() { <-s.done }

// Done is closed when Wait would return.
func (s *Server) Done() <-chan struct{} { return s.done }

// Unmount unmounts the projection. A mount in use (an open file, a current
// directory inside) is EBUSY unless lazy is set: then it is detached from
// the namespace at once and the server keeps answering its remaining users
// until they let go (umount2 MNT_DETACH).
func (s *Server) Unmount(lazy bool) error { return Unmount(s.Mountpoint, lazy) }

// Unmount unmounts the projection at mountpoint, whether its server is
// alive or dead: as root with umount2(2) (UMOUNT_NOFOLLOW: a symlink at the
// mountpoint is not followed), else with fusermount3 -u.
func Unmount(mountpoint string, lazy bool) error {
	if os.Geteuid() != 0 {
		return fusermountUnmount(mountpoint, lazy)
	}
	flags := unix.UMOUNT_NOFOLLOW
	if lazy {
		flags |= unix.MNT_DETACH
	}
	err := unix.Unmount(mountpoint, flags)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EBUSY):
		return abi.Errorf(abi.EBUSY, "%s is in use (an open file or a current directory inside); `ctx-mount -u --lazy %s` detaches it now", mountpoint, mountpoint)
	case errors.Is(err, unix.EINVAL):
		return abi.Errorf(abi.EINVAL, "%s is not a mount point", mountpoint)
	}
	return abi.Errorf(abi.CodeOf(err), "unmount %s: %v", mountpoint, err)
}

// admit applies Options.UID.
func (m *mount) admit(c *caller) syscall.Errno {
	if m.uid == nil || c.uid == 0 || c.uid == *m.uid {
		return 0
	}
	return syscall.EACCES
}

func (m *mount) timeout(cached bool) time.Duration {
	if m.uncached {
		return 0
	}
	if cached {
		return cacheLong
	}
	return cacheShort
}

// onEvents is the listener of a directory node's watch.
func (m *mount) onEvents(n *node, evs []event) {
	if gone(evs) {
		n.mu.Lock()
		n.watchKey, n.watched = "", false
		n.mu.Unlock()
	}
	for _, ev := range evs {
		if ev.name == "" && ev.mask&unix.IN_ATTRIB != 0 {
			// The directory's own attributes: its parent's watch says so
			// too, but the root has no parent here.
			n.stale()
			n.NotifyContent(0, 0)
			break
		}
	}
	e, err := m.view.resolve(n.vpath)
	if err != nil {
		// The directory itself went: its parent's watch reports that.
		return
	}
	m.apply(m.view.changed(n.vpath, e, evs))
}

// apply sends the kernel what it must forget. Notifications are sent from
// the watcher's goroutine, never from inside a request handler: the kernel
// may hold the directory's lock for a request still waiting on us.
func (m *mount) apply(ivs []inval) {
	listings := map[*node]bool{}
	files := map[fileID]bool{} // inodes whose other names must forget too
	for _, iv := range ivs {
		p := m.find(iv.vpath)
		if p == nil {
			continue // the kernel does not know the directory: nothing cached
		}
		if c := p.GetChild(iv.name); c != nil {
			cn := c.Operations().(*node)
			cn.mu.Lock()
			st, had := cn.st, cn.hasSt
			cn.mu.Unlock()
			if had && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				files[idOf(&st)] = true
			}
			cn.stale()
			c.NotifyContent(0, 0)
		}
		if iv.entry && iv.name != "" {
			p.NotifyEntry(iv.name)
			// A new name may be a new link of a file the kernel knows
			// under another name: that name's link count changed.
			if e, err := m.view.resolve(joinV(iv.vpath, iv.name)); err == nil && e.st.Mode&unix.S_IFMT != unix.S_IFDIR {
				files[idOf(&e.st)] = true
			}
		}
		if iv.listing {
			listings[p] = true
		}
	}
	for id := range files {
		for _, n := range m.links.peers(id) {
			n.stale()
			n.NotifyContent(0, 0)
		}
	}
	for p := range listings {
		p.stale()
		p.NotifyContent(0, 0)
	}
}

// find is the node of vpath the kernel knows, or nil.
func (m *mount) find(vpath string) *node {
	cur := &m.rootNode.Inode
	for _, name := range splitV(vpath) {
		if cur = cur.GetChild(name); cur == nil {
			return nil
		}
	}
	return cur.Operations().(*node)
}

// overflow runs when inotify dropped events: every attribute, page and
// listing the kernel holds may be stale, so all are invalidated, and so is
// every dentry but directories' (a directory's dentry may carry a mount).
func (m *mount) overflow() {
	m.logf("inotify queue overflowed: invalidating every cached entry")
	if av, ok := m.view.(*agentView); ok {
		av.recompute()
	}
	var walk func(n *gofs.Inode)
	walk = func(n *gofs.Inode) {
		n.Operations().(*node).stale()
		n.NotifyContent(0, 0)
		for name, c := range n.Children() {
			if !c.IsDir() {
				n.NotifyEntry(name)
			}
			walk(c)
		}
	}
	walk(&m.rootNode.Inode)
}

// checkMountpoint refuses a mountpoint inside the source tree: the server
// would walk into its own mount while answering a request and wait on
// itself.
func checkMountpoint(mountpoint string, root *base) error {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return abi.Errorf(abi.CodeOf(err), "mountpoint %s: %v", mountpoint, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return abi.Errorf(abi.EINVAL, "mountpoint %s is not a directory", mountpoint)
	}
	rst, err := root.dir.Stat()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return abi.Errorf(abi.EINVAL, "mountpoint %s: %v", mountpoint, err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		var s unix.Stat_t
		if unix.Stat(p, &s) == nil && s.Dev == rst.Dev && s.Ino == rst.Ino {
			return abi.Errorf(abi.EINVAL, "mountpoint %s lies inside the source tree %s", mountpoint, root.path)
		}
		if p == "/" {
			return nil
		}
	}
}

// fsName is the mount source shown in mountinfo: the durable root, when it
// survives the mount option syntax.
func fsName(src string) string {
	if src == "" || strings.ContainsAny(src, ", \t\n\\") {
		return Name
	}
	return src
}

func mountCode(err error) abi.Code {
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return abi.EACCES
	case errors.Is(err, syscall.ENOENT):
		return abi.ENOENT
	case errors.Is(err, syscall.EBUSY):
		return abi.EBUSY
	case errors.Is(err, syscall.ENODEV):
		return abi.ENOTSUP
	}
	return abi.EIO
}

type logWriter func(string, ...any)

func (l logWriter) Write(p []byte) (int, error) {
	l("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fusermountUnmount unmounts as an ordinary user, through the setuid
// helper that mounted it.
func fusermountUnmount(mountpoint string, lazy bool) error {
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			return abi.Errorf(abi.ENOTSUP, "unmount %s: not root and no fusermount3 in PATH", mountpoint)
		}
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	out, err := exec.Command(bin, append(args, "--", mountpoint)...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "busy") {
			return abi.Errorf(abi.EBUSY, "%s is in use; `ctx-mount -u --lazy %s` detaches it now (%s)", mountpoint, mountpoint, msg)
		}
		return abi.Errorf(abi.EACCES, "unmount %s: %s: %v", mountpoint, msg, err)
	}
	return nil
}
