package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/ids"
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
// it if it does not stop in time. .d/status ends dead either way.
func Stop(a *Agent, timeout time.Duration) error {
	pid, ok := Running(a)
	if !ok {
		if a.Status() != StatusDead {
			(&lifecycle{a: a}).set(StatusDead)
		}
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return abi.Errorf(abi.CodeOf(err), "failed to signal agent %s (pid %d): %w", a.Name, pid, err)
	}
	until := time.Now().Add(timeout)
	for alive(pid) && time.Now().Before(until) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 100 && alive(pid); i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if a.Status() != StatusDead {
		(&lifecycle{a: a}).set(StatusDead)
	}
	return nil
}

// Interactive is `agent/<name>` with no arguments on a terminal: a line
// editor over the agent socket, one turn per line in the session "tty",
// starting the agent process when nothing serves it. EOF (Ctrl-D) ends it.
func Interactive(ctx context.Context, a *Agent, in io.Reader, prompt io.Writer, emit func(abi.Event) error) error {
	c, err := sock.Dial(ctx, a.Object.Sock())
	if err != nil {
		if _, err := Start(ctx, a, 0); err != nil {
			return err
		}
		if c, err = sock.Dial(ctx, a.Object.Sock()); err != nil {
			return err
		}
	}
	defer c.Close()
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for {
		fmt.Fprint(prompt, a.Name+"> ")
		if !lines.Scan() {
			fmt.Fprintln(prompt)
			return lines.Err()
		}
		text := strings.TrimSpace(lines.Text())
		if text == "" {
			continue
		}
		input, _ := json.Marshal(text)
		if err := c.Send(sock.Request{Op: sock.OpSend, ID: ids.New("m"), Session: "tty", Input: input}); err != nil {
			return abi.Errorf(abi.EHOSTDOWN, "agent %s: %v", a.Name, err)
		}
		if err := turnFrames(ctx, c, emit); err != nil {
			return err
		}
	}
}

// turnFrames copies one run's frames up to its done; a cancelled context
// sends cancel for the run.
func turnFrames(ctx context.Context, c *sock.Client, emit func(abi.Event) error) error {
	run := ""
	stop := context.AfterFunc(ctx, func() {
		if run != "" {
			_ = c.Send(sock.Request{Op: sock.OpCancel, ID: run})
		}
	})
	defer stop()
	for {
		e, err := c.Next()
		if err != nil {
			return abi.Errorf(abi.EHOSTDOWN, "connection to the agent lost: %v", err)
		}
		if e.Type == abi.EvError && e.Run == "" {
			return emit(e)
		}
		if run == "" {
			run = e.Run
		}
		if err := emit(e); err != nil {
			return err
		}
		if e.Type == abi.EvDone && e.Run == run {
			return nil
		}
	}
}
