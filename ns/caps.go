package ns

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// The filesystem capabilities: what lets a process ignore mode bits and
// ownership. Path resolution as another identity must not keep them.
var fsCaps = []uint{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_FSETID}

// resolveAs makes this thread resolve paths as id until the returned
// function is called: supplementary groups (unless the user namespace was
// made with setgroups "deny"), fsgid and fsuid — the ids the kernel's
// permission checks use, and per-thread, so nothing else of the init
// changes — and the filesystem capabilities lowered from the effective
// set. The kernel lowers them itself when fsuid leaves 0 in the initial
// namespace, but not in a user namespace whose uid 0 is unmapped.
func resolveAs(id *Identity, setgroupsDenied bool) (func(), error) {
	if id == nil {
		return func() {}, nil
	}
	// The capability sets before anything changes: a setfsuid away from 0
	// below lowers the filesystem capabilities itself, and restoring must
	// not keep them lowered.
	hdr, saved := capHeader(), [2]unix.CapUserData{}
	if err := unix.Capget(&hdr, &saved[0]); err != nil {
		return nil, abi.Errorf(codeOf(err), "init: capget: %v", err)
	}
	oldGroups, err := unix.Getgroups()
	if err != nil {
		return nil, abi.Errorf(codeOf(err), "init: getgroups: %v", err)
	}
	if !setgroupsDenied {
		groups := id.Groups
		if groups == nil {
			groups = []int{}
		}
		if err := unix.Setgroups(groups); err != nil { // raw syscall: this thread only
			return nil, abi.Errorf(codeOf(err), "init: setgroups %v: %v", id.Groups, err)
		}
	}
	oldGID, _ := unix.SetfsgidRetGid(id.GID)
	oldUID, _ := unix.SetfsuidRetUid(id.UID)
	// setfsuid reports the previous value, never a failure: ask again.
	if cur, _ := unix.SetfsuidRetUid(-1); cur != id.UID {
		return nil, abi.Errorf(abi.EPERM, "init: cannot resolve paths as uid %d", id.UID)
	}
	data := saved
	for _, c := range fsCaps {
		data[c/32].Effective &^= 1 << (c % 32)
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return nil, abi.Errorf(codeOf(err), "init: capset: %v", err)
	}
	return func() {
		_, _ = unix.SetfsuidRetUid(oldUID)
		_, _ = unix.SetfsgidRetGid(oldGID)
		if !setgroupsDenied {
			_ = unix.Setgroups(oldGroups)
		}
		_ = unix.Capset(&hdr, &saved[0])
	}, nil
}

func capHeader() unix.CapUserHeader {
	return unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
}

// harden leaves this thread — and the payload it forks — without any
// privilege:
//
//   - no_new_privs: execve never grants privileges again, so a setuid
//     binary or one with file capabilities runs with the caller's;
//   - the bounding set emptied (needs CAP_SETPCAP, so before anything is
//     dropped): not even an exec of a root-owned setuid file could regain
//     a capability;
//   - the ambient set cleared;
//   - the identity switched, for every thread (the syscall package's
//     setresuid and friends are process-wide), which for a uid leaving 0
//     also empties the permitted and effective sets;
//   - effective, permitted and inheritable emptied with capset (per
//     thread: this one, which forks the payload);
//   - not dumpable: no process of the sandbox may ptrace the init or read
//     its memory and descriptors.
func harden(s *Spec) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return abi.Errorf(codeOf(err), "no_new_privs: %v", err)
	}
	for c := 0; ; c++ {
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil {
			break // EINVAL: past the kernel's last capability
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return abi.Errorf(codeOf(err), "drop capability %d from the bounding set: %v", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return abi.Errorf(codeOf(err), "clear ambient capabilities: %v", err)
	}
	if id := s.Switch; id != nil {
		if !s.SetgroupsDenied {
			if err := syscall.Setgroups(orEmpty(id.Groups)); err != nil {
				return abi.Errorf(codeOf(err), "setgroups %v: %v", id.Groups, err)
			}
		}
		if err := syscall.Setresgid(id.GID, id.GID, id.GID); err != nil {
			return abi.Errorf(codeOf(err), "setresgid %d: %v", id.GID, err)
		}
		if err := syscall.Setresuid(id.UID, id.UID, id.UID); err != nil {
			return abi.Errorf(codeOf(err), "setresuid %d: %v", id.UID, err)
		}
	}
	hdr, data := capHeader(), [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return abi.Errorf(codeOf(err), "drop capabilities: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return abi.Errorf(codeOf(err), "set not dumpable: %v", err)
	}
	return nil
}

func orEmpty(xs []int) []int {
	if xs == nil {
		return []int{}
	}
	return xs
}
