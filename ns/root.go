package ns

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// pivot makes root the sandbox's "/" and detaches the host's tree from the
// mount namespace, so no path and no ".." leads back to it.
//
// pivot_root(".", ".") with the new root as the working directory stacks
// the old root on top of the new one at "/" (the trick LXC and runc use:
// no put_old directory has to be created inside the root); unmounting "."
// with MNT_DETACH then takes the old root and every mount beneath it out
// of this namespace. Unlike chroot(2), nothing of the host stays reachable
// through the namespace's mount tree, a leaked directory descriptor aside
// — and the init holds none when the payload starts.
//
// pivot_root fails with EINVAL when the current root is the kernel's
// initramfs (rootfs cannot be unmounted); there the root is moved over "/"
// with MS_MOVE and entered with chroot(2), runc's no-pivot fallback. The
// old root then stays underneath, out of reach without CAP_SYS_CHROOT,
// which the payload never has, and chroot is refused by the seccomp filter.
func pivot(root *os.File) error {
	defer root.Close()
	oldroot, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return abi.Errorf(codeOf(err), "pivot: open /: %v", err)
	}
	defer unix.Close(oldroot)
	if err := unix.Fchdir(int(root.Fd())); err != nil {
		return abi.Errorf(codeOf(err), "pivot: chdir into the root: %v", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		if err != unix.EINVAL {
			return abi.Errorf(codeOf(err), "pivot_root: %v", err)
		}
		return moveRoot()
	}
	// "." is now the old root (stacked on the new one); the kernel makes
	// no promise about the working directory after pivot_root, so enter
	// the old root by its descriptor before detaching it.
	if err := unix.Fchdir(oldroot); err != nil {
		return abi.Errorf(codeOf(err), "pivot: %v", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return abi.Errorf(codeOf(err), "pivot: detach the old root: %v", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return abi.Errorf(codeOf(err), "pivot: %v", err)
	}
	return nil
}

func moveRoot() error {
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return abi.Errorf(codeOf(err), "move the root over /: %v", err)
	}
	if err := unix.Chroot("."); err != nil {
		return abi.Errorf(codeOf(err), "chroot: %v", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return abi.Errorf(codeOf(err), "chroot: %v", err)
	}
	return nil
}
