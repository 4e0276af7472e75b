package tool

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

var shellExecInput = lit(`{
	"type": "object",
	"properties": {
		"cmd":     {"type": "string", "minLength": 1, "description": "command line for /bin/sh -c"},
		"cwd":     {"type": "string", "minLength": 1, "description": "working directory; relative paths resolve against the caller's cwd; default the caller's cwd"},
		"timeout": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "seconds before the whole process group is killed; default 60"},
		"stdin":   {"type": "string", "description": "text fed to the command's standard input; default empty (/dev/null)"}
	},
	"required": ["cmd"],
	"additionalProperties": false
}`)

var shellExecOutput = lit(`{
	"type": "object",
	"properties": {
		"exit_code":   {"type": "integer", "description": "exit status; 128+N when killed by signal N; -1 on timeout"},
		"stdout":      {"type": "string", "description": "head of standard output, UTF-8 (invalid bytes become U+FFFD)"},
		"stderr":      {"type": "string", "description": "head of standard error, UTF-8 (invalid bytes become U+FFFD)"},
		"truncated":   {"type": "boolean", "description": "stdout or stderr exceeded the output limit and was cut"},
		"timed_out":   {"type": "boolean", "description": "the timeout killed the command"},
		"duration_ms": {"type": "integer", "minimum": 0}
	},
	"required": ["exit_code", "stdout", "stderr", "truncated", "timed_out", "duration_ms"],
	"additionalProperties": false
}`)

func shellExec() Builtin {
	return Builtin{
		Name:        "shell.exec",
		Description: "Run a command line with /bin/sh -c and return its exit code and output.",
		Schema:      mustSchema(shellExecInput.JSON(), shellExecOutput.JSON()),
		Caps:        []string{"exec"},
		Run:         runShellExec,
	}
}

type shellExecArgs struct {
	Cmd     string   `json:"cmd"`
	Cwd     *string  `json:"cwd"`
	Timeout *jsonInt `json:"timeout"`
	Stdin   *string  `json:"stdin"`
}

type shellExecResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	TimedOut   bool   `json:"timed_out"`
	DurationMS int64  `json:"duration_ms"`
}

const defaultShellTimeout = 60 * time.Second

// pipeGrace bounds how long we wait for output after the process group is
// gone: only a process that left the group (setsid) can still hold our
// pipes, and it must not stall the call.
const pipeGrace = time.Second

// runShellExec treats a non-zero exit and a timeout as results, not
// errors: the command ran, and the model needs its output to react.
func runShellExec(ctx context.Context, env Env, args json.RawMessage) (json.RawMessage, error) {
	const name = "shell.exec"
	var a shellExecArgs
	if err := decodeArgs(shellExecInput.JSON(), args, &a); err != nil {
		return nil, toolErr(name, err)
	}
	timeout := defaultShellTimeout
	if a.Timeout != nil {
		timeout = time.Duration(*a.Timeout) * time.Second
	}
	dir := env.Cwd
	if a.Cwd != nil {
		dir = env.resolve(*a.Cwd)
	}
	if dir != "" {
		// Checked here so a missing directory is ENOENT naming it, not a
		// failure to start /bin/sh.
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, toolErr(name, err)
		}
		if !fi.IsDir() {
			return nil, abi.Errorf(abi.EINVAL, "%s: cwd %s is not a directory", name, dir)
		}
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx, name)
	}
	res, err := runShell(ctx, a.Cmd, dir, a.Stdin, timeout, env.maxOutput())
	if err != nil {
		return nil, toolErr(name, err)
	}
	return encodeResult(res)
}

// runShell runs /bin/sh -c cmd as the leader of a new process group, so
// one kill(-pgid) reaches everything it started that did not leave the
// group. When sh ends (by itself, timeout or cancel) the rest of the group
// is killed too: nothing a call starts outlives it, and background jobs
// cannot keep the output pipes open. A process that calls setsid escapes;
// the agent sandbox, not this function, is the boundary for that.
func runShell(ctx context.Context, cmdline, dir string, stdin *string, timeout time.Duration, maxOut int) (shellExecResult, error) {
	start := time.Now()
	r, err := startShell(cmdline, dir, stdin, maxOut)
	if err != nil {
		return shellExecResult{}, err
	}
	waited := make(chan error, 1)
	go func() { waited <- r.cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut, cancelled bool
	select {
	case err = <-waited:
	case <-timer.C:
		timedOut = true
		killGroup(r.pgid)
		err = <-waited
	case <-ctx.Done():
		cancelled = true
		killGroup(r.pgid)
		err = <-waited
	}
	r.finish()
	duration := time.Since(start)

	if cancelled {
		return shellExecResult{}, abi.Errorf(abi.CodeOf(ctx.Err()), "killed: %w", ctx.Err())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return shellExecResult{}, abi.Errorf(abi.EIO, "wait: %w", err)
	}
	res := shellExecResult{
		ExitCode:   exitCode(r.cmd.ProcessState),
		Stdout:     r.stdout.text(),
		Stderr:     r.stderr.text(),
		Truncated:  r.stdout.truncated() || r.stderr.truncated(),
		TimedOut:   timedOut,
		DurationMS: duration.Milliseconds(),
	}
	if timedOut {
		res.ExitCode = -1
	}
	return res, nil
}

// shellRun is a started sh and the goroutines feeding and draining it.
type shellRun struct {
	cmd            *exec.Cmd
	pgid           int
	outR, errR     *os.File
	stdout, stderr *headBuffer
	drains         sync.WaitGroup
	closeIn        func()
}

// startShell starts sh with our own *os.File pipes, not exec's: with
// exec's, Cmd.Wait would wait for its copying goroutines, that is for
// every holder of the pipes to exit.
func startShell(cmdline, dir string, stdin *string, maxOut int) (*shellRun, error) {
	cmd := exec.Command("/bin/sh", "-c", cmdline)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var files []*os.File // ours to close on failure
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inR, inW *os.File
	if stdin != nil {
		if inR, inW, err = pipe(); err != nil {
			closeAll()
			return nil, err
		}
		cmd.Stdin = inR
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its copies; ours must go so EOF comes when it is done.
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
	}

	r := &shellRun{cmd: cmd, pgid: cmd.Process.Pid, outR: outR, errR: errR,
		stdout: &headBuffer{max: maxOut}, stderr: &headBuffer{max: maxOut}, closeIn: func() {}}
	r.drains.Go(func() { io.Copy(r.stdout, outR) })
	r.drains.Go(func() { io.Copy(r.stderr, errR) })
	if inW != nil {
		r.closeIn = sync.OnceFunc(func() { inW.Close() })
		// A child that never reads stdin makes this write fail with EPIPE
		// once the child is gone, or stop when finish closes inW.
		go func() {
			io.WriteString(inW, *stdin)
			r.closeIn()
		}()
	}
	return r, nil
}

// finish runs once sh has been reaped: it kills what is left of the group
// and collects the output.
func (r *shellRun) finish() {
	// A group id is not reused while any member lives; with none left the
	// kill finds nothing (ESRCH).
	killGroup(r.pgid)
	r.closeIn()
	drained := make(chan struct{})
	go func() { r.drains.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeGrace):
		// Only a process that left the group still holds the pipes.
		// Closing our ends stops the copies; what it writes later is lost.
		r.outR.Close()
		r.errR.Close()
		<-drained
	}
	r.outR.Close()
	r.errR.Close()
}

// exitCode follows the shell convention: 128+N for death by signal N,
// which os.ProcessState.ExitCode reports as -1.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// killGroup SIGKILLs the process group; ESRCH (already empty) is fine.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
