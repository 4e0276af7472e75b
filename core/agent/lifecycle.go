package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/sock"
)

// LauncherName is the applet that runs an agent process (`ctx-agent run`).
const LauncherName = "ctx-agent"

// StartTimeout bounds how long Start waits for the process to be ready.
const StartTimeout = 10 * time.Second

// Start launches the agent process in the background (a new session,
// detached from the caller's terminal) by re-executing this binary as
// `ctx-agent run`, and waits until its socket answers. ownerPID > 0 makes
// it a life=owned child of that process. An agent already running is
// returned as is.
func Start(ctx context.Context, a *Agent, ownerPID int) (int, error) {
	if pid, ok := Running(a); ok {
		return pid, nil
	}
	if ownerPID == 0 {
		// A child declared owned in its files is owned however it starts.
		pid, err := ownerProcess(a)
		if err != nil {
			return 0, err
		}
		ownerPID = pid
	}
	args := []string{"run"}
	if ownerPID > 0 {
		args = append(args, "--owner-pid", strconv.Itoa(ownerPID))
	}
	cmd := exec.Command("/proc/self/exe", append(args, a.Object.Path)...)
	cmd.Args[0] = LauncherName
	cmd.Env = append(os.Environ(), "CTX_ROOT="+string(a.Root))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The early stderr goes to a file, never a pipe: a pipe would outlive
	// this process and break (SIGPIPE) the agent's later writes.
	errOut, err := os.CreateTemp("", "ctx-agent-start-*")
	if err != nil {
		return 0, abi.Errorf(abi.EIO, "failed to start agent %s: %w", a.Name, err)
	}
	defer os.Remove(errOut.Name())
	defer errOut.Close()
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		return 0, abi.Errorf(abi.EIO, "failed to start agent %s: %w", a.Name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			msg, _ := os.ReadFile(errOut.Name())
			return 0, abi.Errorf(abi.EIO, "agent %s exited while starting (%v): %s", a.Name, err, strings.TrimSpace(string(msg[:min(len(msg), 4096)])))
		case <-deadline.C:
			_ = cmd.Process.Kill()
			return 0, abi.Errorf(abi.ETIMEDOUT, "agent %s not ready within %v", a.Name, StartTimeout)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return 0, abi.Errorf(abi.ECANCELED, "start of agent %s cancelled", a.Name)
		case <-tick.C:
			if a.Status() != StatusReady && a.Status() != StatusIdle && a.Status() != StatusBusy {
				continue
			}
			if c, err := sock.Dial(ctx, a.Object.Sock()); err == nil {
				c.Close()
				return cmd.Process.Pid, nil
			}
		}
	}
}

// Stop asks the agent process to stop (SIGTERM), waits for it, and kills
// it if it does not stop in time; .d/status ends stopped. An agent with no
// process keeps stopped or dead, and one whose status still says it runs
// (its process was killed, say) is marked dead.
//
// The pid comes from .d/pid. Root signals only the pid of an agent whose
// files no other user controls (the rule for starting one, CheckLauncher):
// otherwise the agent's owner could write any pid there — cortexfsd's,
// init's — and have root kill it. An unprivileged caller is bounded by
// the kernel: it can only signal its own processes.
func Stop(a *Agent, timeout time.Duration) error {
	if err := a.CheckLauncher(os.Geteuid()); err != nil {
		return abi.Errorf(abi.EACCES, "agent %s: root does not signal the pid in a .d/pid another user controls (%v); "+
			"its owner stops it with ctx-agent stop", a.Name, err)
	}
	p, ok := openProcess(a)
	if !ok {
		if s := a.Status(); s != StatusDead && s != StatusStopped {
			(&lifecycle{a: a}).set(StatusDead)
		}
		return nil
	}
	defer p.close()
	if err := p.signal(syscall.SIGTERM); err != nil && err != syscall.ESRCH {
		return abi.Errorf(abi.CodeOf(err), "failed to signal agent %s (pid %d): %w", a.Name, p.pid, err)
	}
	if !p.exited(timeout) {
		_ = p.signal(syscall.SIGKILL)
		p.exited(time.Second)
	}
	if a.Status() != StatusStopped {
		(&lifecycle{a: a}).set(StatusStopped) // asked to stop: stopped, however it ended
	}
	return nil
}

// Interactive is `agent/<name>` with no arguments on a terminal: a line
// editor over the agent socket, one turn per line in the session "tty",
// starting the agent process when nothing serves it. While it runs it owns
// SIGINT and SIGTERM: Ctrl-C during a turn sends cancel for that turn (it
// ends cancelled, the prompt comes back and the session takes the next
// line); a second Ctrl-C in the same turn leaves at once. Ctrl-C at the
// prompt or EOF (Ctrl-D) ends the session cleanly; SIGTERM ends it with
// ECANCELED. Once connected, ctx's own cancellation is ignored: on a
// terminal it is the caller's SIGINT, which here means "cancel the turn",
// not "end the session".
//
// An agent process this session started keeps running after it (other
// clients may use agent/<name>.sock, and its sessions stay warm), so the
// session says so on prompt when it starts it and again when it ends,
// with the command that stops it.
func Interactive(ctx context.Context, a *Agent, in io.Reader, prompt io.Writer, emit func(abi.Event) error) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	c, err := sock.Dial(ctx, a.Object.Sock())
	if err != nil {
		pid, err := Start(ctx, a, 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(prompt, "started agent %s in the background (pid %d); it keeps running after this session: %s stops it\n",
			a.Name, pid, StopCommand(a))
		defer fmt.Fprintf(prompt, "agent %s is still running in the background: %s stops it\n", a.Name, StopCommand(a))
		if c, err = sock.Dial(ctx, a.Object.Sock()); err != nil {
			return err
		}
	}
	defer c.Close()
	for len(sigs) > 0 { // a Ctrl-C while starting was ctx's (it would have failed above)
		<-sigs
	}
	lines, readErr := readLines(in)
	for {
		fmt.Fprint(prompt, a.Name+"> ")
		var text string
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(prompt)
				return <-readErr
			}
			text = strings.TrimSpace(l)
		case s := <-sigs:
			fmt.Fprintln(prompt)
			if s == syscall.SIGTERM {
				return abi.Errorf(abi.ECANCELED, "interactive session of agent %s ended by SIGTERM", a.Name)
			}
			return nil // Ctrl-C at the prompt leaves, like Ctrl-D
		}
		if text == "" {
			continue
		}
		input, _ := json.Marshal(text)
		if err := c.Send(sock.Request{Op: sock.OpSend, ID: ids.New("m"), Session: "tty", Input: input}); err != nil {
			return abi.Errorf(abi.EHOSTDOWN, "agent %s: %v", a.Name, err)
		}
		quit, err := turnFrames(c, emit, sigs, prompt)
		if err != nil {
			return err
		}
		if quit {
			return abi.Errorf(abi.ECANCELED, "interactive session of agent %s left during a turn", a.Name)
		}
	}
}

// StopCommand is the command line that stops the agent's process, as a
// user would type it: the bare name when the agent lives in the default
// root's agent/, else with --root or the object's path.
func StopCommand(a *Agent) string {
	if a.Object.Path != a.Root.Path(tree.AgentDir, a.Name) {
		return LauncherName + " stop " + a.Object.Path
	}
	if string(a.Root) != tree.DefaultRoot() {
		return LauncherName + " --root " + string(a.Root) + " stop " + a.Name
	}
	return LauncherName + " stop " + a.Name
}

// readLines delivers the lines of in on a channel (closed at EOF, then the
// read error on the other), so the prompt can wait for a line or a signal.
func readLines(in io.Reader) (<-chan string, <-chan error) {
	lines, errc := make(chan string), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		errc <- sc.Err()
		close(lines)
	}()
	return lines, errc
}

// turnFrames copies one run's frames up to its done. The first SIGINT
// sends cancel for the run (at once, or as soon as its start frame names
// it); a second SIGINT, or SIGTERM, sends cancel and reports quit.
func turnFrames(c *sock.Client, emit func(abi.Event) error, sigs <-chan os.Signal, prompt io.Writer) (quit bool, err error) {
	type frame struct {
		e   abi.Event
		err error
	}
	frames, stop := make(chan frame), make(chan struct{})
	defer close(stop)
	go func() {
		run := ""
		for {
			e, err := c.Next()
			select {
			case frames <- frame{e, err}:
			case <-stop:
				return
			}
			if err != nil || e.Type == abi.EvError && e.Run == "" {
				return
			}
			if run == "" {
				run = e.Run
			}
			if e.Type == abi.EvDone && e.Run == run {
				return
			}
		}
	}()
	run, interrupts := "", 0
	cancel := func() {
		if run != "" {
			_ = c.Send(sock.Request{Op: sock.OpCancel, ID: run})
		}
	}
	for {
		select {
		case f := <-frames:
			if f.err != nil {
				return false, abi.Errorf(abi.EHOSTDOWN, "connection to the agent lost: %v", f.err)
			}
			e := f.e
			if e.Type == abi.EvError && e.Run == "" {
				return false, emit(e)
			}
			if run == "" && e.Run != "" {
				run = e.Run
				if interrupts > 0 {
					cancel()
				}
			}
			if err := emit(e); err != nil {
				return false, err
			}
			if e.Type == abi.EvDone && e.Run == run {
				if e.Status == abi.StatusCancelled {
					fmt.Fprintln(prompt, "(turn cancelled)")
				}
				return false, nil
			}
		case s := <-sigs:
			interrupts++
			cancel()
			if s == syscall.SIGTERM || interrupts > 1 {
				return true, nil
			}
			fmt.Fprintln(prompt, "\ncancelling the turn (Ctrl-C again to leave)")
		}
	}
}
