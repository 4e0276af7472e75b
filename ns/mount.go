package ns

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// mounter builds the sandbox's tree. With the mount API of Linux 5.12+
// (open_tree, mount_setattr, move_mount, fsopen/fsmount) every step works
// on descriptors: a source is cloned as a detached tree, its flags are set
// recursively in one call, and it is attached onto the mount point's
// descriptor — no path is resolved twice. Older kernels take the classic
// mount(2) path (mount_classic.go).
type mounter struct {
	classic bool
}

func newMounter(s *Spec) *mounter {
	return &mounter{classic: s.ClassicMounts || !haveMountAPI()}
}

// haveMountAPI probes mount_setattr(2): with a bad descriptor a kernel
// that has it answers EBADF (or EINVAL), one that has not ENOSYS.
func haveMountAPI() bool {
	err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{})
	return err != unix.ENOSYS
}

// assemble makes the root and every mount of the spec, in order, as the
// spec's Resolve identity, and returns the root (a directory on the root
// mount) for pivot.
func (m *mounter) assemble(s *Spec) (*os.File, error) {
	restore, err := resolveAs(s.Resolve, s.SetgroupsDenied)
	if err != nil {
		return nil, err
	}
	defer restore()
	rootFile, err := m.root(s.Root)
	if err != nil {
		return nil, err
	}
	dupFd, err := unix.FcntlInt(rootFile.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		rootFile.Close()
		return nil, abi.Errorf(codeOf(err), "root: %v", err)
	}
	root, err := safefs.NewDir(os.NewFile(uintptr(dupFd), "/"), "/")
	if err != nil {
		rootFile.Close()
		return nil, err
	}
	defer root.Close()
	for _, mt := range s.Mounts {
		if err := m.apply(root, mt); err != nil {
			rootFile.Close()
			return nil, err
		}
	}
	return rootFile, nil
}

func (m *mounter) apply(root *safefs.Dir, mt Mount) error {
	switch mt.Kind {
	case KindBind:
		return m.bind(root, mt)
	case KindProc:
		_, err := m.fresh(root, mt, "proc", nil, procAttrs)
		return err
	case KindTmpfs:
		_, err := m.fresh(root, mt, "tmpfs", []fsOpt{{"mode", "1777"}, {"size", "25%"}}, tmpAttrs)
		return err
	case KindDev:
		return m.dev(root, mt)
	}
	return mt.errorf(abi.EINVAL, "unknown mount kind %q", mt.Kind)
}

// Attributes of the filesystems the sandbox makes itself.
const (
	procAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC
	tmpAttrs  = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	devAttrs  = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC
)

type fsOpt struct{ key, value string } // value "" is a flag

// attrsOf are the MOUNT_ATTR_* flags a mount asks for.
func attrsOf(mt Mount) uint64 {
	var a uint64
	if mt.ReadOnly {
		a |= unix.MOUNT_ATTR_RDONLY
	}
	if mt.NoSuid {
		a |= unix.MOUNT_ATTR_NOSUID
	}
	if mt.NoDev {
		a |= unix.MOUNT_ATTR_NODEV
	}
	if mt.NoExec {
		a |= unix.MOUNT_ATTR_NOEXEC
	}
	return a
}

// openSource opens a bind source as the resolving identity: the kernel
// follows symlinks and checks search permission on every directory of the
// path for that identity, so a privileged launcher exposes nothing the
// agent could not have reached by itself.
func openSource(path string) (*os.File, bool, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, abi.Errorf(codeOf(err), "%s: %v", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, false, abi.Errorf(codeOf(err), "%s: %v", path, err)
	}
	return os.NewFile(uintptr(fd), path), st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// root makes the new root: a bind of the spec's root directory, attached
// on top of that very directory (a private mount namespace, so only here)
// so that pivot_root(2), which wants a mount point, can use it. A root of
// "/" is attached on /tmp instead: a mount on top of "/" itself is not
// reachable by a path walk.
func (m *mounter) root(mt Mount) (*os.File, error) {
	src, isDir, err := openSource(mt.Source)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "root %v", err)
	}
	defer src.Close()
	if !isDir {
		return nil, abi.Errorf(abi.ENOTSUP, "root %s is not a directory", mt.Source)
	}
	stage := src
	if mt.Source == "/" {
		fd, err := unix.Open("/tmp", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, abi.Errorf(codeOf(err), "root /: no /tmp to stage it on: %v", err)
		}
		stage = os.NewFile(uintptr(fd), "/tmp")
		defer stage.Close()
	}
	if m.classic {
		return m.classicRoot(mt, src, stage)
	}
	tree, err := cloneTree(mt, src, stage)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "root %s: %v", mt.Source, err)
	}
	return tree, nil
}

// cloneTree clones the mount at src (recursively for an rbind) as a
// detached tree, sets its flags and attaches it onto target. It returns
// the tree's root, attached.
func cloneTree(mt Mount, src, target *os.File) (*os.File, error) {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_EMPTY_PATH)
	if mt.Recursive {
		flags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(int(src.Fd()), "", flags)
	if err != nil {
		if err == unix.EINVAL && !mt.Recursive {
			// A bind that is not recursive would uncover what the mounts
			// beneath the source hide; in a user namespace the kernel locks
			// such mounts and refuses (do_loopback: has_locked_children).
			return nil, abi.Errorf(abi.EINVAL, "bind of %s would reveal what mounts beneath it cover; use rbind: %v", mt.Source, err)
		}
		return nil, abi.Errorf(codeOf(err), "clone %s: %v", mt.Source, err)
	}
	tree := os.NewFile(uintptr(fd), mt.Source)
	if err := setAttrs(tree, attrsOf(mt), mt.Recursive); err != nil {
		tree.Close()
		return nil, err
	}
	if err := unix.MoveMount(fd, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		tree.Close()
		return nil, abi.Errorf(codeOf(err), "attach at %s: %v", mt.Target, err)
	}
	return tree, nil
}

// setAttrs adds flags (and private propagation) to a mount, and to every
// mount beneath it when recursive. mount_setattr(2) only sets what is
// asked and clears nothing, so flags the kernel locked on mounts inherited
// from a more privileged namespace (MNT_LOCK_NOSUID, _NODEV, _RDONLY…)
// stay as they are; a recursive read-only really covers every submount,
// which a mount(2) remount does one mount at a time.
func setAttrs(tree *os.File, attrs uint64, recursive bool) error {
	flags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	attr := unix.MountAttr{Attr_set: attrs, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(int(tree.Fd()), "", flags, &attr); err != nil {
		return abi.Errorf(codeOf(err), "set mount flags: %v", err)
	}
	return nil
}

// bind attaches a clone of the source at the target.
func (m *mounter) bind(root *safefs.Dir, mt Mount) error {
	src, isDir, err := openSource(mt.Source)
	if err != nil {
		return mt.errorf(abi.CodeOf(err), "source %v", err)
	}
	defer src.Close()
	target, err := mountPoint(root, mt, isDir)
	if err != nil {
		return err
	}
	defer target.Close()
	if m.classic {
		return m.classicBind(root, mt, src, target)
	}
	tree, err := cloneTree(mt, src, target)
	if err != nil {
		return mt.errorf(abi.CodeOf(err), "%v", err)
	}
	return tree.Close()
}

// fresh mounts a new filesystem of fstype at the target and returns its
// root (attached).
func (m *mounter) fresh(root *safefs.Dir, mt Mount, fstype string, opts []fsOpt, attrs uint64) (*os.File, error) {
	target, err := mountPoint(root, mt, true)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	if m.classic {
		return m.classicFresh(root, mt, fstype, opts, attrs, target)
	}
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, mt.errorf(codeOf(err), "fsopen %s: %v", fstype, err)
	}
	defer unix.Close(fsfd)
	for _, o := range opts {
		if o.value == "" {
			err = unix.FsconfigSetFlag(fsfd, o.key)
		} else {
			err = unix.FsconfigSetString(fsfd, o.key, o.value)
		}
		if err != nil {
			return nil, mt.errorf(codeOf(err), "%s option %s: %v", fstype, o.key, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, mt.errorf(codeOf(err), "create %s: %v", fstype, err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, int(attrs))
	if err != nil {
		return nil, mt.errorf(codeOf(err), "fsmount %s: %v", fstype, err)
	}
	mnt := os.NewFile(uintptr(mfd), mt.Target)
	if err := unix.MoveMount(mfd, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		mnt.Close()
		return nil, mt.errorf(codeOf(err), "attach %s: %v", fstype, err)
	}
	return mnt, nil
}

// mountPoint opens the target beneath the new root without following a
// symlink (ELOOP: a link inside the root must not steer a mount outside
// it), creating it when missing — a directory, or an empty file for a
// source that is not one — like runc and bubblewrap do. Created parents
// are 0755 and belong to the resolving identity.
func mountPoint(root *safefs.Dir, mt Mount, dir bool) (*os.File, error) {
	rel := strings.TrimPrefix(mt.Target, "/")
	f, err := root.OpenPath(rel)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, mt.errorf(abi.CodeOf(err), "mount point: %v", err)
	}
	parent, base := filepath.Split(rel)
	if parent = strings.TrimSuffix(parent, "/"); parent == "" {
		parent = "."
	}
	pd, err := root.MkdirAll(parent, 0o755, safefs.Keep)
	if err != nil {
		return nil, mt.errorf(abi.CodeOf(err), "create mount point: %v", err)
	}
	defer pd.Close()
	if dir {
		err = unix.Mkdirat(pd.Fd(), base, 0o755)
	} else {
		var fd int
		fd, err = unix.Openat(pd.Fd(), base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
		if err == nil {
			unix.Close(fd)
		}
	}
	if err != nil && err != unix.EEXIST {
		return nil, mt.errorf(codeOf(err), "create mount point: %v", err)
	}
	if f, err = root.OpenPath(rel); err != nil {
		return nil, mt.errorf(abi.CodeOf(err), "mount point: %v", err)
	}
	return f, nil
}
