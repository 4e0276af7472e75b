package ns

import (
	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// loopbackUp brings up "lo", the only interface a new network namespace
// has (it starts down): the sandbox can talk to itself over 127.0.0.1 and
// ::1, and to nothing else.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return abi.Errorf(codeOf(err), "loopback: socket: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return abi.Errorf(abi.EIO, "loopback: %v", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return abi.Errorf(codeOf(err), "loopback: get flags: %v", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return abi.Errorf(codeOf(err), "loopback: bring up: %v", err)
	}
	return nil
}
