package ns

import (
	"bufio"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// The classic path: mount(2) with MS_BIND, then a remount for the flags.
// Sources and targets are named by their descriptors' /proc/self/fd links
// (resolved by the kernel to exactly the file the descriptor holds), and a
// freshly made mount is reopened by walking to it again beneath the root
// and checked to be the same file.

func fdPath(f interface{ Fd() uintptr }) string { return "/proc/self/fd/" + itoa(int(f.Fd())) }

// mntLockable are the flags the kernel may have locked on a mount this
// namespace inherited from a more privileged one (MNT_LOCK_READONLY,
// _NODEV, _NOSUID, _NOEXEC, _ATIME): a remount that does not repeat them
// is refused with EPERM.
const mntLockable = unix.MS_RDONLY | unix.MS_NODEV | unix.MS_NOSUID | unix.MS_NOEXEC |
	unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME

// mountFlags turns statfs(2) f_flags (ST_*) into the MS_* flags a remount
// takes (see calculate_f_flags in fs/statfs.c).
func mountFlags(st *unix.Statfs_t) uintptr {
	var flags uintptr
	for _, f := range [][2]uintptr{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f[0] != 0 {
			flags |= f[1]
		}
	}
	return flags
}

func msFlags(attrs uint64) uintptr {
	var f uintptr
	for _, x := range [][2]uint64{{unix.MOUNT_ATTR_RDONLY, unix.MS_RDONLY}, {unix.MOUNT_ATTR_NOSUID, unix.MS_NOSUID},
		{unix.MOUNT_ATTR_NODEV, unix.MS_NODEV}, {unix.MOUNT_ATTR_NOEXEC, unix.MS_NOEXEC}} {
		if attrs&x[0] != 0 {
			f |= uintptr(x[1])
		}
	}
	return f
}

// remount applies flags to the mount mnt is the root of. MS_BIND|MS_REMOUNT
// changes only the per-mount flags, but it replaces all of them: the flags
// the mount already has are read back with statfs and OR-ed in, so a
// source that is nosuid, or any mount inherited into a user namespace,
// keeps the flags the kernel locked (runc and bubblewrap do the same).
func remount(mnt *os.File, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(mnt.Fd()), &st); err != nil {
		return err
	}
	have := mountFlags(&st)
	if have&flags == flags {
		return nil
	}
	return unix.Mount("", fdPath(mnt), "", unix.MS_BIND|unix.MS_REMOUNT|have&mntLockable|flags, "")
}

// reopen walks to rel beneath root again — through the mount just made on
// it — and checks that it is the file want (same device and inode).
func reopen(root *safefs.Dir, rel string, want *os.File) (*os.File, error) {
	f, err := root.OpenPath(rel)
	if err != nil {
		return nil, err
	}
	if !sameFile(f, want) {
		f.Close()
		return nil, abi.Errorf(abi.EBUSY, "%s changed while it was being mounted", rel)
	}
	return f, nil
}

func sameFile(a, b *os.File) bool {
	var x, y unix.Stat_t
	return unix.Fstat(int(a.Fd()), &x) == nil && unix.Fstat(int(b.Fd()), &y) == nil && x.Dev == y.Dev && x.Ino == y.Ino
}

func (m *mounter) classicRoot(mt Mount, src, stage *os.File) (*os.File, error) {
	if err := bindPaths(fdPath(src), fdPath(stage), mt.Recursive); err != nil {
		return nil, abi.Errorf(codeOf(err), "root %s: bind: %v", mt.Source, err)
	}
	stagePath, err := os.Readlink(fdPath(stage))
	if err != nil {
		return nil, abi.Errorf(codeOf(err), "root %s: %v", mt.Source, err)
	}
	fd, err := unix.Open(stagePath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, abi.Errorf(codeOf(err), "root %s: reopen: %v", mt.Source, err)
	}
	rootFile := os.NewFile(uintptr(fd), mt.Source)
	if !sameFile(rootFile, src) {
		rootFile.Close()
		return nil, abi.Errorf(abi.EBUSY, "root %s changed while it was being mounted", mt.Source)
	}
	if err := finishClassic(rootFile, mt, stagePath); err != nil {
		rootFile.Close()
		return nil, abi.Errorf(abi.CodeOf(err), "root %s: %v", mt.Source, err)
	}
	return rootFile, nil
}

func (m *mounter) classicBind(root *safefs.Dir, mt Mount, src, target *os.File) error {
	if err := bindPaths(fdPath(src), fdPath(target), mt.Recursive); err != nil {
		return mt.errorf(codeOf(err), "bind: %v", err)
	}
	rel := strings.TrimPrefix(mt.Target, "/")
	mnt, err := reopen(root, rel, src)
	if err != nil {
		return mt.errorf(abi.CodeOf(err), "reopen: %v", err)
	}
	defer mnt.Close()
	path, err := os.Readlink(fdPath(mnt))
	if err != nil {
		return mt.errorf(codeOf(err), "%v", err)
	}
	if err := finishClassic(mnt, mt, path); err != nil {
		return mt.errorf(abi.CodeOf(err), "%v", err)
	}
	return nil
}

func bindPaths(src, dst string, recursive bool) error {
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(src, dst, "", flags, ""); err != nil {
		if err == unix.EINVAL && !recursive {
			return abi.Errorf(abi.EINVAL, "a bind that is not recursive would reveal what mounts beneath the source cover; use rbind: %v", err)
		}
		return err
	}
	return nil
}

// finishClassic makes the new mount (and those beneath it) private and
// applies the flags. A bind never takes flags from its mount(2) call, and
// MS_REMOUNT acts on one mount: for an rbind every submount is remounted
// too, found in /proc/self/mountinfo below the mount's path.
func finishClassic(mnt *os.File, mt Mount, path string) error {
	if err := unix.Mount("", fdPath(mnt), "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return err
	}
	flags := msFlags(attrsOf(mt))
	if flags == 0 {
		return nil
	}
	if err := remount(mnt, flags); err != nil {
		return abi.Errorf(codeOf(err), "remount %s: %v", path, err)
	}
	if !mt.Recursive {
		return nil
	}
	subs, err := submounts(path)
	if err != nil {
		return err
	}
	for _, p := range subs {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return abi.Errorf(codeOf(err), "submount %s: %v", p, err)
		}
		sub := os.NewFile(uintptr(fd), p)
		err = remount(sub, flags)
		sub.Close()
		if err != nil && err != unix.EACCES {
			return abi.Errorf(codeOf(err), "remount submount %s: %v", p, err)
		}
	}
	return nil
}

// submounts lists the mount points strictly below path, parents first.
func submounts(path string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if path == "/" && mp != "/" || strings.HasPrefix(mp, path+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for a space, …) of
// /proc/self/mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func (m *mounter) classicFresh(root *safefs.Dir, mt Mount, fstype string, opts []fsOpt, attrs uint64, target *os.File) (*os.File, error) {
	var data []string
	for _, o := range opts {
		if o.value == "" {
			data = append(data, o.key)
		} else {
			data = append(data, o.key+"="+o.value)
		}
	}
	if err := unix.Mount(fstype, fdPath(target), fstype, msFlags(attrs), strings.Join(data, ",")); err != nil {
		return nil, mt.errorf(codeOf(err), "mount %s: %v", fstype, err)
	}
	f, err := root.OpenPath(strings.TrimPrefix(mt.Target, "/"))
	if err != nil {
		return nil, mt.errorf(abi.CodeOf(err), "reopen: %v", err)
	}
	return f, nil
}

func (m *mounter) classicReadOnly(mt Mount, mnt interface{ Fd() uintptr }) error {
	f, ok := mnt.(*os.File)
	if !ok {
		return mt.errorf(abi.EIO, "not a file")
	}
	if err := remount(f, unix.MS_RDONLY); err != nil {
		return mt.errorf(codeOf(err), "make read-only: %v", err)
	}
	return nil
}
