package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Bounds of one tool execution.
const (
	DefaultToolTimeout = 120 * time.Second
	MaxToolOutput      = 1 << 20 // bytes of the tool's stdout kept; past it the run is killed
)

// ToolCaller identifies the agent run a tool executes for; the session
// and run reach the tool as CTX_AGENT_SESSION and CTX_AGENT_RUN. Model
// output never sets them.
type ToolCaller struct {
	Session string
	Run     string
	// PID is the launcher: a life=owned child started by this run is
	// cancelled when it dies.
	PID int
	// Ops answers the agent.* tools of this run (relay.go); nil gives
	// them nothing to relay to.
	Ops func(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error)
}

// ObjectRunner is the applet that interprets CortexFS object files.
const ObjectRunner = "cortexfs-object-runner"

// ExecTool runs the tool's file as a subprocess with args on stdin and
// --jsonl, in the agent's cwd and environment, bounded by timeout and
// MaxToolOutput. It returns the tool's result text (the content of its
// role "tool" message), or its error frame as an error with the stable code.
func (a *Agent) ExecTool(ctx context.Context, t Tool, args json.RawMessage, who ToolCaller, timeout time.Duration) (string, error) {
	return a.execTool(ctx, t, args, who, timeout, false)
}

// execTool is ExecTool, optionally as the tool's dry run (--dry-run).
func (a *Agent) execTool(ctx context.Context, t Tool, args json.RawMessage, who ToolCaller, timeout time.Duration, dryRun bool) (string, error) {
	if timeout <= 0 {
		timeout = DefaultToolTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := []string{"--jsonl"}
	if dryRun {
		argv = append(argv, "--dry-run")
	}
	cmd := exec.CommandContext(ctx, t.File, argv...)
	if isObject(t.File) {
		// A CortexFS object: run it with this very binary as its runner,
		// as the kernel would run its shebang — inside a sandbox the
		// shebang's path (the host's install prefix) need not exist.
		cmd = exec.CommandContext(ctx, "/proc/self/exe", append([]string{t.File}, argv...)...)
		cmd.Args[0] = ObjectRunner
	}
	cmd.Stdin = bytes.NewReader(args)
	cmd.Dir = a.Cwd
	cmd.Env = append(a.Environ(), "CTX_AGENT="+a.Name, "CTX_AGENT_SESSION="+who.Session, "CTX_AGENT_RUN="+who.Run)
	if who.Ops != nil && wantsRelay(t) {
		relay, err := startRelay(ctx, who.Ops)
		if err != nil {
			return "", err
		}
		defer relay.Close()
		cmd.ExtraFiles = []*os.File{relay.theirs}
		cmd.Env = append(cmd.Env, envAgentFD+"=3")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out := &capped{max: MaxToolOutput, kill: cancel}
	var stderr capped
	stderr.max = 4 << 10
	cmd.Stdout, cmd.Stderr = out, &stderr
	err := cmd.Run()
	switch {
	case out.over:
		return "", abi.Errorf(abi.EMSGSIZE, "tool %s: output larger than %d bytes", t.Name, MaxToolOutput)
	case ctx.Err() == context.DeadlineExceeded:
		return "", abi.Errorf(abi.ETIMEDOUT, "tool %s: no result within %v", t.Name, timeout)
	case ctx.Err() != nil:
		return "", abi.Errorf(abi.ECANCELED, "tool %s: cancelled", t.Name)
	}
	text, frames, ferr := parseToolOutput(out.b.Bytes())
	if ferr != nil {
		// A tool that ran and reported an error (EREMOTEIO) still has a
		// result: it is what the model should see.
		return text, ferr
	}
	if err != nil {
		if frames == 0 {
			return "", abi.Errorf(abi.EIO, "tool %s failed: %v: %s", t.Name, err, strings.TrimSpace(stderr.b.String()))
		}
		return "", abi.Errorf(abi.EIO, "tool %s failed without an error frame: %v", t.Name, err)
	}
	if frames == 0 {
		return out.b.String(), nil // a plain program: its stdout is the result
	}
	return text, nil
}

// isObject reports whether file is a CortexFS object interpreted by the
// object runner (its shebang names cortexfs-object-runner).
func isObject(file string) bool {
	o, err := tree.Resolve(file)
	return err == nil && filepath.Base(o.Meta.Runner) == ObjectRunner
}

// parseToolOutput reads the tool's canonical JSONL: the content of its
// role "tool" message is the result, an error frame is the error.
func parseToolOutput(b []byte) (text string, frames int, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), MaxToolOutput+1)
	for sc.Scan() {
		var e abi.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type == "" {
			return "", 0, nil // not JSONL: the caller takes stdout as text
		}
		frames++
		switch {
		case e.Type == abi.EvMessage && e.Role == "tool":
			text += e.MessageText()
		case e.Type == abi.EvError:
			code := e.Code
			if !code.Known() {
				code = abi.EIO
			}
			err = abi.Errorf(code, "%s", e.Message)
		}
	}
	return text, frames, err
}

// capped keeps up to max bytes and reports when more arrived.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
	kill func()
}

func (c *capped) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		c.b.Write(p[:c.max-c.b.Len()])
		if !c.over && c.kill != nil {
			c.over = true
			c.kill()
		}
		c.over = true
		return len(p), nil
	}
	return c.b.Write(p)
}
