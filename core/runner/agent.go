package runner

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/core/tree"
)

// runAgent is one-shot exec of an agent object: `agent/<name> [--session
// NAME] [--shared SPACE] TASK…` or stdin {"task":…,"session":…,"shared":…}.
// With no arguments on a terminal it enters an interactive session over
// agent/<name>.sock, starting the agent process when nothing serves it.
func (x Exec) runAgent(ctx context.Context) error {
	if len(x.Args) == 0 && isTerminal(x.Stdin) {
		a, err := agent.Load(x.Object)
		if err != nil {
			return err
		}
		if err := a.CheckLauncher(os.Geteuid()); err != nil {
			return err
		}
		return agent.Interactive(ctx, a, x.Stdin, os.Stderr, x.Emit)
	}
	start := time.Now()
	run := ids.New("r")
	a, err := agent.Load(x.Object)
	first := abi.Event{Type: abi.EvStart, Run: run, Agent: x.Object.Name}
	if err == nil && len(a.Models) > 0 {
		first.Model = a.Models[0]
	}
	if err == nil {
		// Root refuses an agent another user could steer before it
		// creates a session directory or builds a sandbox for it.
		err = a.CheckLauncher(os.Geteuid())
	}
	session := ""
	if e := x.Emit(first); err == nil {
		err = e // a broken agent is reported in the stream like any failure
	}
	if err == nil {
		session, err = x.agentBody(ctx, a, run)
	}
	status := abi.StatusOK
	if err != nil {
		status = abi.StatusError
		if abi.CodeOf(err) == abi.ECANCELED {
			status = abi.StatusCancelled
		} else {
			_ = x.Emit(abi.ErrorEvent(run, err))
		}
	}
	_ = x.Emit(abi.DoneEvent(run, status))
	line := tree.LogLine{Time: start, Run: run, UID: os.Getuid(), Status: status, Duration: time.Since(start), Extra: "session=" + session}
	if err != nil {
		line.Code = string(abi.CodeOf(err))
	}
	_ = x.Object.AppendLog(line)
	return err
}

func (x Exec) agentBody(ctx context.Context, a *agent.Agent, run string) (string, error) {
	session, shared, words, err := agentFlags(x.Args)
	if err != nil {
		return "", err
	}
	var input []byte
	if len(words) > 0 {
		b, _ := json.Marshal(strings.Join(words, " "))
		input = b
	} else if input, err = x.input(ctx); err != nil {
		return "", err
	}
	if looksJSON(input) {
		var sel struct{ Session, Shared string }
		if json.Unmarshal(input, &sel) == nil {
			session, shared = orElse(sel.Session, session), orElse(sel.Shared, shared)
		}
	}
	msgs, err := agent.ParseTask(input)
	if err != nil {
		return "", err
	}
	sess, err := a.OpenSession(os.Getuid(), shared, session)
	if err != nil {
		return "", err
	}
	defer sess.Close()
	emit := func(e abi.Event) error {
		e.Run = run
		return x.Emit(e)
	}
	var approve agent.Approver
	if len(x.Args) > 0 && isTerminal(x.Stdin) {
		// A person at the terminal that started this run answers tools
		// that need confirmation; with no terminal nobody can (EACCES).
		approve = agent.TerminalApprover(x.Stdin, os.Stderr)
	}
	return sess.Name, agent.RunOnce(ctx, a, sess, run, msgs, emit, approve)
}

// agentFlags takes leading --session NAME and --shared SPACE off argv.
func agentFlags(args []string) (session, shared string, rest []string, err error) {
	for len(args) > 0 {
		switch args[0] {
		case "--session", "--shared":
			if len(args) < 2 {
				return "", "", nil, abi.Errorf(abi.EINVAL, "%s needs a value", args[0])
			}
			if args[0] == "--session" {
				session = args[1]
			} else {
				shared = args[1]
			}
			args = args[2:]
		case "--":
			return session, shared, args[1:], nil
		default:
			return session, shared, args, nil
		}
	}
	return session, shared, nil, nil
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
