package agent

import (
	"bytes"
	"io"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/proc"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// Running reads .d/pid and reports the live agent process, if any.
//
// The agent's process writes its own pid into .d/pid after it starts, so
// the process holding that pid started no later than the file was
// written. An agent killed with SIGKILL leaves its .d/pid behind, and the
// kernel may since have given the pid to another process: that one started
// after the file was written, and is not the agent's. Such a pid is not
// running as far as the agent goes — ls and show say dead, start starts
// the agent, stop signals nobody (never signal a process you cannot prove
// is yours).
func Running(a *Agent) (int, bool) {
	pid, written, ok := readPid(a)
	if !ok {
		return 0, false
	}
	return pid, proc.StartedBy(pid, written) // a live, non-zombie process that old
}

// readPid reads .d/pid through its control directory's descriptor (no
// symlink followed, a non-regular file refused, the read bounded) and
// returns the pid and when the file was last written.
func readPid(a *Agent) (int, time.Time, bool) {
	d, err := a.Object.CtlDir()
	if err != nil {
		return 0, time.Time{}, false
	}
	defer d.Close()
	f, err := d.Open("pid")
	if err != nil {
		return 0, time.Time{}, false
	}
	defer f.Close()
	st, err := safefs.Fstat(f)
	if err != nil {
		return 0, time.Time{}, false
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, time.Time{}, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 {
		return 0, time.Time{}, false
	}
	return pid, time.Unix(st.Mtim.Unix()), true
}

// signaller signals one process for its lifetime: through a pidfd
// (pidfd_open(2)) where the kernel has them, which refers to the process
// and not to its number, so a signal can never reach a process that got
// the pid after it exited (pidfd_send_signal(2) is ESRCH then). Without
// pidfd (Linux < 5.3) it falls back to kill(2) on the pid.
type signaller struct {
	pid, fd int
}

// openProcess pins the agent process named by .d/pid: the pidfd is opened
// first and the pid checked to be the agent's after, so the descriptor
// cannot refer to a process that was not checked.
func openProcess(a *Agent) (*signaller, bool) {
	pid, written, ok := readPid(a)
	if !ok {
		return nil, false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return nil, false
	}
	if err != nil {
		fd = -1
	}
	if !proc.StartedBy(pid, written) {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, false
	}
	return &signaller{pid: pid, fd: fd}, true
}

func (s *signaller) signal(sig syscall.Signal) error {
	if s.fd < 0 {
		return syscall.Kill(s.pid, sig)
	}
	return unix.PidfdSendSignal(s.fd, sig, nil, 0)
}

// exited waits up to d for the process to exit and reports whether it did.
func (s *signaller) exited(d time.Duration) bool {
	until := time.Now().Add(d)
	for {
		if s.fd >= 0 {
			ms := int(time.Until(until) / time.Millisecond)
			if ms < 0 {
				ms = 0
			}
			fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, ms)
			if n > 0 {
				return true
			}
			if err == unix.EINTR && time.Now().Before(until) {
				continue
			}
			return false
		}
		if !alive(s.pid) {
			return true
		}
		if time.Now().After(until) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *signaller) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
}
