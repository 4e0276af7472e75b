package agent

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pidSlack is how much later than .d/pid's mtime its process may seem to
// have started and still be the one that wrote it: file times come from
// the kernel's coarse clock (up to a jiffy behind) and a process's start
// from clock ticks; the agent's process writes its pid milliseconds after
// it starts, so this only absorbs the clocks' granularity.
const pidSlack = 50 * time.Millisecond

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
	return pid, alive(pid) && startedBy(pid, written)
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
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
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

// startedBy reports whether the process with pid started no later than
// written (plus pidSlack). Its start is field 22 of /proc/PID/stat, in
// clock ticks (USER_HZ, 100 on Linux) since boot on the boot-time clock
// (Linux >= 5.5; before that the monotonic clock, which only makes a
// process look older). The boot instant on the wall clock is the
// realtime clock minus the boot-time clock, read together.
func startedBy(pid int, written time.Time) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	ticks, ok := statStartTime(b)
	if !ok {
		return false
	}
	var rt, bt unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME, &rt) != nil || unix.ClockGettime(unix.CLOCK_BOOTTIME, &bt) != nil {
		return false
	}
	boot := time.Unix(rt.Unix()).Add(-time.Duration(bt.Nano()))
	start := boot.Add(time.Duration(ticks) * (time.Second / 100))
	return !start.After(written.Add(pidSlack))
}

// statStartTime returns field 22 (starttime) of a /proc/PID/stat line.
// The command name (field 2) may hold spaces and parentheses, so fields
// are counted from after its last ')'.
func statStartTime(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[19]), 10, 64)
	return n, err == nil
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
	if !alive(pid) || !startedBy(pid, written) {
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
