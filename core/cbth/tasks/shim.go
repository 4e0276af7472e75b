package tasks

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	procfs "github.com/cortexfs/cortexfs/core/proc"
)

// ShimArgs are the arguments after which `cbth daemon task-shim` takes the
// command: the daemon re-executes its own binary with them.
var ShimArgs = []string{"daemon", "task-shim", "--"}

// Gate bytes the daemon writes on the shim's control pipe (fd 3).
const (
	gateGo   = 'g' // the task's identity is durable: run the command
	gateStop = 'k' // cancel: end the command and everything it started
)

// shimGrace is how long the command gets between SIGTERM and SIGKILL.
const shimGrace = 2 * time.Second

// RunShim is the task supervisor between the daemon and the command. The
// daemon starts it as a session leader and records its pid and start
// time durably; only then does it write the go byte on fd 3, so the
// command never runs before the store knows who it is. The shim is a child
// subreaper: whatever the command leaves behind is reparented to it and
// ended with it. It ends the command's whole tree when the daemon says stop,
// on SIGTERM, or when fd 3 reaches EOF (the daemon died), so no task
// outlives its supervision. It exits as the command did (the same code, or
// the same signal).
func RunShim(argv []string) int {
	ctl := os.NewFile(3, "cbth-task-control")
	unix.CloseOnExec(3)
	var b [1]byte
	if n, _ := ctl.Read(b[:]); n != 1 || b[0] != gateGo {
		// The daemon died (or cancelled) before the task's identity was
		// durable: the command never runs.
		fmt.Fprintln(os.Stderr, "cbth task-shim: no go from the daemon; the command was not started")
		return 125
	}
	if len(argv) == 0 {
		return 127
	}
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cbth task-shim: %v\n", err)
		return 127
	}
	// The command runs in its own process group, so ending it never
	// signals the shim.
	cmd := &exec.Cmd{Path: path, Args: argv, Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "cbth task-shim: %v\n", err)
		return 126
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	stop := make(chan struct{})
	go func() {
		for {
			if n, err := ctl.Read(b[:]); n == 0 || err != nil || b[0] == gateStop {
				close(stop)
				return
			}
		}
	}()
	var werr error
	select {
	case werr = <-waited:
	case <-sigs:
		werr = endTree(cmd.Process.Pid, waited)
	case <-stop:
		werr = endTree(cmd.Process.Pid, waited)
	}
	// The leader is gone; nothing it started may outlive it.
	killDescendants(syscall.SIGKILL)
	return mirror(cmd, werr)
}

// endTree asks the command's group to stop, then kills it and every other
// descendant after the grace period.
func endTree(pgid int, waited chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-waited:
		return err
	case <-time.After(shimGrace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	killDescendants(syscall.SIGKILL)
	return <-waited
}

// killDescendants signals every child of the shim (a subreaper, so the
// command's orphans are its children too) until none is left, reaping them.
func killDescendants(sig syscall.Signal) {
	self := os.Getpid()
	for range 50 {
		kids := childrenOf(self)
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			// A child of ours cannot be replaced by a stranger until we reap
			// it, so its pid is proof enough here.
			_ = syscall.Kill(pid, sig)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childrenOf lists the pids whose parent is ppid, from /proc.
func childrenOf(ppid int) []int {
	// /proc/PID/task/TID/children is cheaper but needs every thread.
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procfs.ReadStat(pid)
		if err == nil && st.PPID == ppid && st.State != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// mirror makes the shim end as the command did.
func mirror(cmd *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 126
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return 126
	}
	if ws.Signaled() {
		sig := ws.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second)
		return 128 + int(sig)
	}
	return ws.ExitStatus()
}

// Identity is what the store records of a supervised process.
type Identity struct {
	PID       int
	StartTime uint64
	BootID    string
}

// Alive reports whether the recorded identity still names a live process:
// same boot, same pid, same start time. Only then may it be signalled.
func (id Identity) Alive() bool {
	if id.PID <= 0 || id.BootID == "" || id.BootID != procfs.BootID() {
		return false
	}
	st, err := procfs.ReadStat(id.PID)
	return err == nil && st.StartTime == id.StartTime && st.State != "Z"
}
