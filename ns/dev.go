package ns

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// devNodes are the device files a sandbox's /dev holds, each a bind of the
// host's node (a user namespace may not mknod, and a bind needs no
// CAP_MKNOD anywhere): the set bubblewrap's --dev gives.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are the usual symlinks of /dev.
var devLinks = [][2]string{
	{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
	{"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"},
}

// dev mounts a minimal /dev: a small tmpfs (nosuid, nodev, noexec) with
// the device nodes bound from the host, the usual links, a private devpts
// instance at pts and a tmpfs at shm; then the tmpfs itself is made
// read-only, so the sandbox cannot add entries to its /dev.
func (m *mounter) dev(root *safefs.Dir, mt Mount) error {
	mnt, err := m.fresh(root, mt, "tmpfs", []fsOpt{{"mode", "0755"}, {"size", "64k"}, {"nr_inodes", "64"}}, devAttrs)
	if err != nil {
		return err
	}
	defer mnt.Close()
	rel := strings.TrimPrefix(mt.Target, "/")
	d, err := root.OpenDir(rel)
	if err != nil {
		return mt.errorf(abi.CodeOf(err), "open %s: %v", mt.Target, err)
	}
	defer d.Close()
	for _, n := range devNodes {
		node := Mount{Kind: KindBind, Source: "/dev/" + n, Target: mt.Target + "/" + n, NoSuid: true, NoExec: true}
		if err := m.bind(root, node); err != nil {
			return err
		}
	}
	for _, l := range devLinks {
		if err := unix.Symlinkat(l[1], d.Fd(), l[0]); err != nil {
			return mt.errorf(codeOf(err), "symlink %s: %v", l[0], err)
		}
	}
	pts := Mount{Kind: "devpts", Target: mt.Target + "/pts"}
	ptsMnt, err := m.fresh(root, pts, "devpts", []fsOpt{{"newinstance", ""}, {"ptmxmode", "0666"}, {"mode", "0620"}},
		unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	ptsMnt.Close()
	shm := Mount{Kind: KindTmpfs, Target: mt.Target + "/shm"}
	shmMnt, err := m.fresh(root, shm, "tmpfs", []fsOpt{{"mode", "1777"}, {"size", "64m"}}, devAttrs)
	if err != nil {
		return err
	}
	shmMnt.Close()
	return m.readOnly(mt, mnt)
}

// readOnly makes one mount (not those beneath it) read-only.
func (m *mounter) readOnly(mt Mount, mnt interface{ Fd() uintptr }) error {
	if m.classic {
		return m.classicReadOnly(mt, mnt)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(int(mnt.Fd()), "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return mt.errorf(codeOf(err), "make read-only: %v", err)
	}
	return nil
}
