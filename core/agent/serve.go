package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/proc"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/sockstore"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/sock"
)

// ServeOptions tunes the agent process.
type ServeOptions struct {
	// OwnerPID, when set, is the parent agent process of a life=owned
	// child: when it dies the child is cancelled (its sessions stay).
	OwnerPID int
	Logf     func(format string, args ...any)
	// Stderr receives the sandboxed runtime's diagnostics.
	Stderr io.Writer
}

// Serve is the agent process, the launcher of its sandbox: it builds the
// sandbox and starts the runtime in it (Launch: an agent whose sandbox
// cannot be built does not start, and says why), owns agent/<name>.sock
// (the object socket protocol, one session per peer uid and name,
// multi-turn through the session's conversation) and runs each turn in the
// sandbox, and walks .d/status through start, ready, busy/idle, stopping
// and stopped, with .d/pid set while it lives. It returns when ctx is done,
// the owner process died or the sandbox ended; the sandbox never outlives
// it. A run that ends with an error (the sandbox could not be built or
// ended on its own) leaves dead instead of stopped.
func Serve(ctx context.Context, a *Agent, o ServeOptions) (err error) {
	if pid, ok := Running(a); ok && pid != os.Getpid() {
		return abi.Errorf(abi.EBUSY, "agent %s is already running (pid %d)", a.Name, pid)
	}
	// Root refuses an agent another user could steer before it writes a
	// byte: .d/pid and .d/status are written in that user's directories.
	if err := a.CheckLauncher(os.Geteuid()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &lifecycle{a: a}
	st.set(StatusStart)
	if err := a.writeCtl("pid", []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		st.set(StatusDead)
		return err
	}
	defer func() {
		_ = a.writeCtl("pid", nil)
		if err != nil {
			st.set(StatusDead)
		} else {
			st.set(StatusStopped)
		}
		a.logEvent("stop", nil)
	}()
	rt, err := Launch(ctx, a, LaunchOptions{Stderr: o.Stderr})
	if err != nil {
		a.logEvent("start", err)
		return err
	}
	defer rt.Close()
	// 0600: the agent acts with its owner's rights, so only the owner may
	// talk to it.
	ln, err := sock.Listen(a.Object.Sock(), 0o600)
	if err != nil {
		return err
	}
	defer sock.Unlink(a.Object.Sock())
	if o.OwnerPID > 0 {
		go watchOwner(ctx, o.OwnerPID, cancel)
	}
	lost := make(chan error, 1)
	go func() {
		select {
		case <-rt.Done():
			lost <- abi.Errorf(abi.EIO, "agent %s: its sandbox ended (status %d)", a.Name, rt.proc.Wait())
			cancel()
		case <-ctx.Done():
		}
	}()
	srv := &sock.Server{Runner: &turnRunner{obj: a.Object, st: st, rt: rt}, Store: sockstore.DirStore{Root: string(a.Root), Dir: func(k sockstore.SessionKey) string {
		return filepath.Join(a.SessionDir(int(k.UID), "", k.Name), "sock")
	}}, Logf: o.Logf, ShutdownTimeout: 3 * time.Second}
	st.set(StatusReady)
	a.logEvent("start", nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		st.set(StatusStopping)
		err = <-done
	}
	select {
	case e := <-lost:
		if err == nil {
			err = e
		}
	default:
	}
	return err
}

// watchOwner cancels the agent when the owner process is gone. It holds a
// pidfd (pidfd_open(2)): the descriptor refers to that process, not to its
// number, and becomes readable when it exits, so a reused pid can never
// keep the child alive. Without pidfd (Linux < 5.3) it polls the pid.
func watchOwner(ctx context.Context, pid int, cancel func()) {
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		defer unix.Close(fd)
		for ctx.Err() == nil {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(fds, 100); n > 0 || (err != nil && err != unix.EINTR) {
				cancel()
				return
			}
		}
		return
	} else if err == unix.ESRCH {
		cancel()
		return
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !alive(pid) {
				cancel()
				return
			}
		}
	}
}

// alive reports a live process under pid: one /proc knows that is not
// a zombie (a zombie still answers kill(pid, 0)).
func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != "Z"
}

// lifecycle writes .d/status: busy while any turn runs, idle after.
type lifecycle struct {
	a      *Agent
	mu     sync.Mutex
	active int
}

func (l *lifecycle) set(s string) {
	_ = l.a.writeCtl("status", []byte(s+"\n"))
}

// writeCtl replaces the agent's control file name with data through the
// control directory's descriptor (core/safefs): the directory is opened
// without following a symlink anywhere on its path, and the temporary
// file is created in it and renamed within it. A user who swaps a
// directory on the way for a symlink gets ELOOP, never a file created or
// replaced elsewhere.
func (a *Agent) writeCtl(name string, data []byte) error {
	d, err := a.Object.CtlDir()
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteFile(name, data, tree.ControlMode, safefs.Keep)
}

func (l *lifecycle) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active++
	l.set(StatusBusy)
}

func (l *lifecycle) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active--; l.active == 0 {
		l.set(StatusIdle)
	}
}

// turnRunner runs one socket turn through the agent loop. The agent is
// reloaded per turn so policy edits apply at once.
type turnRunner struct {
	obj tree.Object
	st  *lifecycle
	rt  *Runtime
}

func (r *turnRunner) Run(ctx context.Context, t sock.Turn, emit func(abi.Event) error) (err error) {
	r.st.begin()
	defer r.st.end()
	start := time.Now()
	defer func() {
		line := tree.LogLine{Time: start, Run: t.Run, UID: int(t.Peer.UID), Status: statusOf(err), Duration: time.Since(start),
			Extra: "session=" + t.Session.Name}
		if err != nil {
			line.Code = string(abi.CodeOf(err))
		}
		_ = r.obj.AppendLog(line)
	}()
	a, err := Load(r.obj)
	if err != nil {
		return err
	}
	first := abi.Event{Type: abi.EvStart, Run: t.Run, Agent: a.Name}
	if len(a.Models) > 0 {
		first.Model = a.Models[0]
	}
	if err := emit(first); err != nil {
		return err
	}
	msgs, err := ParseTask(t.Input)
	if err != nil {
		return err
	}
	sess, err := a.OpenSession(int(t.Peer.UID), "", t.Session.Name)
	if err != nil {
		return err
	}
	defer sess.Close()
	return r.rt.Turn(ctx, a, sess, t.Run, msgs, emit)
}

func (a *Agent) logEvent(event string, err error) {
	line := tree.LogLine{Time: time.Now(), Run: "-", UID: os.Getuid(), Status: statusOf(err),
		Extra: "event=" + event + " pid=" + strconv.Itoa(os.Getpid())}
	_ = a.Object.AppendLog(line)
}
