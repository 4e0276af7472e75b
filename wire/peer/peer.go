// Package peer reads the kernel's credentials of the process at the other
// end of a Unix socket (SO_PEERCRED), the identity every daemon checks.
package peer

import (
	"fmt"
	"net"

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
