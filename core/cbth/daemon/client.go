package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/wire/ipc"
)

// StartTimeout bounds how long a client waits for an auto-started daemon.
const StartTimeout = 20 * time.Second

// Dial connects to a running daemon without starting one.
func Dial(ctx context.Context, h home.Home) (*ipc.Client, error) {
	c, err := ipc.Dial(ctx, h.Socket())
	if err == nil {
		return c, nil
	}
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return nil, abi.Errorf(abi.EACCES, "cannot reach %s: %v", h.Socket(), err)
	default:
		return nil, abi.Errorf(abi.ECONNREFUSED, "no cbth daemon for %s", h.Root)
	}
}

// Connect connects to the daemon, starting it first when it is not
// running. Concurrent first callers serialize on run/start.lock, so exactly
// one of them spawns the daemon; the rest find its socket.
func Connect(ctx context.Context, h home.Home) (*ipc.Client, error) {
	if err := h.CheckSocketPath(); err != nil {
		return nil, err
	}
	c, err := Dial(ctx, h)
	if err == nil || abi.CodeOf(err) == abi.EACCES {
		return c, err
	}
	if err := h.Ensure(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	lock, err := WaitLock(ctx, h.StartLock())
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if c, err := Dial(ctx, h); err == nil {
		return c, nil
	}
	os.Remove(h.StartError())
	exited, err := spawn(h)
	if err != nil {
		return nil, err
	}
	for {
		if c, err := Dial(ctx, h); err == nil {
			return c, nil
		}
		select {
		case err := <-exited:
			return nil, startFailure(h, err)
		case <-ctx.Done():
			return nil, abi.Errorf(abi.ETIMEDOUT, "cbth daemon did not start within %v; see %s", StartTimeout, h.DaemonLog())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// spawn starts `cbth daemon run --home H` detached: its own session, stdin
// from /dev/null, stdout and stderr appended to $CBTH_HOME/log/daemon.log.
func spawn(h home.Home) (<-chan error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "cannot find own binary: %v", err)
	}
	logf, err := os.OpenFile(h.DaemonLog(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "daemon log: %v", err)
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	cmd := &exec.Cmd{Path: exe, Args: []string{"cbth", "daemon", "run", "--home", h.Root},
		Stdin: null, Stdout: logf, Stderr: logf, Dir: "/",
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		return nil, abi.Errorf(abi.EIO, "cannot start daemon: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}

// startFailure says why a spawned daemon exited before serving: its own
// error code and message (run/start-error.json) and the log's last lines.
func startFailure(h home.Home, exit error) error {
	var se StartError
	b, rerr := os.ReadFile(h.StartError())
	if rerr == nil && json.Unmarshal(b, &se) == nil && se.Code.Known() {
		os.Remove(h.StartError())
		return abi.Errorf(se.Code, "cbth daemon could not start: %s (log %s)", se.Message, h.DaemonLog())
	}
	return abi.Errorf(abi.ECONNREFUSED, "cbth daemon exited during start (%v); log %s: %s",
		exit, h.DaemonLog(), logTail(h.DaemonLog()))
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-3, 0):], " | ")
}

// Call connects (starting the daemon if needed), sends one request and
// decodes its result into out.
func Call(ctx context.Context, h home.Home, op string, args, out any) error {
	return CallFiles(ctx, h, op, args, out, nil)
}

// CallFiles is Call handing the daemon open files (see ipc.CallFiles).
// Every call has a deadline (Timeout): a stopped or wedged daemon ends in
// ETIMEDOUT with a hint, never in a client that waits forever.
func CallFiles(ctx context.Context, h home.Home, op string, args, out any, files []*os.File) error {
	ctx, cancel := withDeadline(ctx, op)
	defer cancel()
	for attempt := 0; ; attempt++ {
		c, err := Connect(ctx, h)
		if err != nil {
			return hint(h, op, err)
		}
		err = c.CallFiles(ctx, op, args, out, files)
		c.Close()
		// A daemon that died with our request unread (killed, or exiting
		// idle just as we connected) had no effect: start a new one.
		if errors.Is(err, ipc.ErrNotDelivered) && attempt < 3 {
			waitGone(ctx, h)
			continue
		}
		return hint(h, op, err)
	}
}

// CallIfRunning is Call for read-only views that must not start a daemon:
// with none running it returns false and leaves out untouched.
func CallIfRunning(ctx context.Context, h home.Home, op string, args, out any) (bool, error) {
	ctx, cancel := withDeadline(ctx, op)
	defer cancel()
	c, err := Dial(ctx, h)
	if abi.CodeOf(err) == abi.ECONNREFUSED {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer c.Close()
	err = c.Call(ctx, op, args, out)
	if errors.Is(err, ipc.ErrNotDelivered) {
		return false, nil
	}
	return true, hint(h, op, err)
}

// waitGone waits (bounded by ctx) for an exiting daemon to release its
// single-instance lock, so the next Connect starts a fresh one.
func waitGone(ctx context.Context, h home.Home) {
	for Running(h) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// opTimeouts are the calls that legitimately take long: attach starts and
// probes an app-server, doctor cli probes the codex binary.
var opTimeouts = map[string]time.Duration{"cli.attach": 3 * time.Minute, "cli.doctor": 2 * time.Minute}

// Timeout is the deadline of a call: $CBTH_CLIENT_TIMEOUT seconds when
// set, else the op's own (60s for most).
func Timeout(op string) time.Duration {
	if n, err := strconv.Atoi(os.Getenv("CBTH_CLIENT_TIMEOUT")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if d, ok := opTimeouts[op]; ok {
		return d
	}
	return ipc.DefaultTimeout
}

func withDeadline(ctx context.Context, op string) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, Timeout(op))
}

// hint adds what to do to a timed-out call.
func hint(h home.Home, op string, err error) error {
	if abi.CodeOf(err) != abi.ETIMEDOUT {
		return err
	}
	pid := "?"
	var info PIDInfo
	if b, rerr := os.ReadFile(h.PIDFile()); rerr == nil && json.Unmarshal(b, &info) == nil {
		pid = strconv.Itoa(info.PID)
	}
	return abi.Errorf(abi.ETIMEDOUT, "cbth daemon pid %s did not answer %s within %v: it may be stopped (SIGSTOP; "+
		"resume it with kill -CONT %s) or wedged; check `cbth daemon status` and %s (set CBTH_CLIENT_TIMEOUT=SECONDS "+
		"for a longer wait)", pid, op, Timeout(op), pid, h.DaemonLog())
}

// StopResult is `cbth daemon stop`.
type StopResult struct {
	WasRunning bool `json:"was_running"`
	PID        int  `json:"pid,omitempty"`
	Stopped    bool `json:"stopped"`
}

// Stop asks a running daemon to exit and waits until its socket is gone.
func Stop(ctx context.Context, h home.Home) (*StopResult, error) {
	ctx, cancel := withDeadline(ctx, OpStop)
	defer cancel()
	c, err := Dial(ctx, h)
	if abi.CodeOf(err) == abi.ECONNREFUSED {
		return &StopResult{Stopped: true}, nil
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var r struct {
		PID int `json:"pid"`
	}
	err = c.Call(ctx, OpStop, nil, &r)
	c.Close()
	if err != nil {
		return nil, hint(h, OpStop, err)
	}
	// The daemon's flock on daemon.lock goes away only when it has exited
	// (a zombie waiting for a reaper still answers kill(pid, 0)).
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if !Running(h) {
			return &StopResult{WasRunning: true, PID: r.PID, Stopped: true}, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, abi.Errorf(abi.ETIMEDOUT, "daemon pid %d did not exit", r.PID)
}

// Running reports whether a daemon holds the home's single-instance lock.
func Running(h home.Home) bool {
	l, err := TryLock(h.DaemonLock())
	if err != nil {
		return abi.CodeOf(err) == abi.EBUSY
	}
	l.Unlock()
	return false
}

// StatusOf reports the daemon status without starting it; clientVersion
// is this binary's.
func StatusOf(ctx context.Context, h home.Home, clientVersion string) (*Status, error) {
	s, err := statusOf(ctx, h)
	if s != nil {
		s.ClientVersion = clientVersion
	}
	return s, err
}

func statusOf(ctx context.Context, h home.Home) (*Status, error) {
	if err := h.CheckSocketPath(); err != nil {
		return nil, err
	}
	ctx, cancel := withDeadline(ctx, OpStatus)
	defer cancel()
	c, err := Dial(ctx, h)
	if abi.CodeOf(err) == abi.ECONNREFUSED {
		return &Status{Running: false, Home: h.Root, Socket: h.Socket(), Protocol: ipc.Version}, nil
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var s Status
	if err := c.Call(ctx, OpStatus, nil, &s); err != nil {
		if errors.Is(err, ipc.ErrNotDelivered) {
			// The daemon was exiting as we connected.
			waitGone(ctx, h)
			if !Running(h) {
				return &Status{Running: false, Home: h.Root, Socket: h.Socket(), Protocol: ipc.Version}, nil
			}
		}
		return nil, hint(h, OpStatus, err)
	}
	return &s, nil
}
