// Package peer reads the kernel's credentials of the process at the other
// end of a Unix socket (SO_PEERCRED), the identity every daemon checks.
package peer

import (
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Cred is the peer's pid, uid and gid as the kernel recorded them at
// connect(2) time; they cannot be forged by the peer.
type Cred struct {
	PID int32  `json:"pid"`
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Of returns the credentials of c's peer. Any failure is EACCES: a daemon
// that cannot prove who is calling must refuse (fail closed).
func Of(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, abi.Errorf(abi.EACCES, "peer credentials unavailable: %v", err)
	}
	var uc *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		uc, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, abi.Errorf(abi.EACCES, "peer credentials unavailable: %v", err)
	}
	if serr != nil {
		return Cred{}, abi.Errorf(abi.EACCES, "peer credentials unavailable: %v", serr)
	}
	return Cred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}

func (c Cred) String() string { return fmt.Sprintf("uid=%d gid=%d pid=%d", c.UID, c.GID, c.PID) }

// Groups returns the peer's supplementary groups as the kernel recorded
// them at connect(2) time (SO_PEERGROUPS, Linux 4.13+), for a daemon that
// checks group permission bits on the peer's behalf.
func Groups(c *net.UnixConn) ([]uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, abi.Errorf(abi.EACCES, "peer groups unavailable: %v", err)
	}
	var out []uint32
	var serr error
	if err := raw.Control(func(fd uintptr) {
		buf := make([]uint32, 64)
		for {
			n := uint32(len(buf) * 4)
			_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_PEERGROUPS,
				uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
			if e == unix.ERANGE && int(n/4) > len(buf) && n < 1<<20 {
				buf = make([]uint32, n/4)
				continue
			}
			if e != 0 {
				serr = e
				return
			}
			out = append([]uint32(nil), buf[:n/4]...)
			return
		}
	}); err != nil {
		return nil, abi.Errorf(abi.EACCES, "peer groups unavailable: %v", err)
	}
	if serr != nil {
		return nil, abi.Errorf(abi.EACCES, "peer groups unavailable: %v", serr)
	}
	return out, nil
}
