// Package runner executes an object once (object-abi "Exec Protocol"):
// input from argv or stdin, the canonical stream from start to done, error
// frames once the stream has started, and one line in the object's .d/log.
package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/tool"
	"github.com/cortexfs/cortexfs/core/toolsrc"
	"github.com/cortexfs/cortexfs/core/tree"
)

// MaxInput bounds stdin input; more is EMSGSIZE.
const MaxInput = 16 << 20

// Exec is one invocation of an object file.
type Exec struct {
	Object tree.Object
	Args   []string  // argv after the object path: joined as text input
	Stdin  io.Reader // read when Args is empty
	Emit   func(abi.Event) error
	Cwd    string
	DryRun bool // tools: preview the effect instead of committing it (ENOTSUP unless the tool declares a dry run)
}

// Run executes the object and returns nil or an error carrying the stable
// code of the failure. Every failure after the object was resolved is also
// reported in the stream (error frame, then done status error).
func (x Exec) Run(ctx context.Context) error {
	if x.Object.Class == abi.ClassAgent {
		return x.runAgent(ctx) // the agent runtime owns its whole stream (core/runner/agent.go)
	}
	start := time.Now()
	run := ids.New("r")
	first := abi.Event{Type: abi.EvStart, Run: run}
	switch x.Object.Class {
	case abi.ClassModel:
		first.Model = x.Object.Name
	case abi.ClassTool:
		first.Tool = x.Object.Name
	case abi.ClassAgent:
		first.Agent = x.Object.Name
	}
	extra, logged := "", false
	err := x.Emit(first)
	if err == nil {
		extra, logged, err = x.body(ctx, run)
	}
	status := abi.StatusOK
	if err != nil {
		status = abi.StatusError
		if abi.CodeOf(err) == abi.ECANCELED {
			status = abi.StatusCancelled
		}
		if status == abi.StatusError {
			_ = x.Emit(abi.ErrorEvent(run, err))
		}
	}
	_ = x.Emit(abi.DoneEvent(run, status))
	line := tree.LogLine{Time: start, Run: run, UID: os.Getuid(), Status: status, Duration: time.Since(start), Extra: extra}
	if err != nil {
		line.Code = string(abi.CodeOf(err))
	}
	if !logged { // cortexfsd logs the calls it serves itself
		_ = x.Object.AppendLog(line) // best effort: callers may lack write access to .d/log
	}
	return err
}

func (x Exec) body(ctx context.Context, run string) (extra string, logged bool, err error) {
	input, err := x.input(ctx)
	if err != nil {
		return "", false, err
	}
	stamp := func(e abi.Event) error {
		e.Run = run
		return x.Emit(e)
	}
	switch x.Object.Class {
	case abi.ClassModel:
		extra, err = runModel(ctx, x.Object, input, stamp)
		return extra, false, err
	case abi.ClassTool:
		if toolsrc.IsProjected(x.Object) {
			return runProjected(ctx, x.Object, input, run, x.DryRun, stamp)
		}
		if x.DryRun {
			return "", false, abi.Errorf(abi.ENOTSUP, "tool %s: built-in tools have no dry run", x.Object.Name)
		}
		return "", false, runTool(ctx, x.Object, input, x.Cwd, stamp)
	default:
		return "", false, abi.Errorf(abi.ENOTSUP, "%s: the agent runtime is not available in this build", x.Object.Called)
	}
}

// input is argv joined by spaces, else all of stdin (bounded). Reading
// stdin gives way to ctx: a run waiting on input that never comes (a pipe
// nobody writes) is cancelled by a signal like any other run, and ends with
// its done frame. The reader goroutine is left to the exiting process.
func (x Exec) input(ctx context.Context) ([]byte, error) {
	if len(x.Args) > 0 {
		return []byte(strings.Join(x.Args, " ")), nil
	}
	if x.Stdin == nil {
		return nil, nil
	}
	type res struct {
		b   []byte
		err error
	}
	got := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(x.Stdin, MaxInput+1))
		got <- res{b, err}
	}()
	var r res
	select {
	case r = <-got:
	case <-ctx.Done():
		return nil, abi.Errorf(abi.ECANCELED, "cancelled while reading stdin")
	}
	if r.err != nil {
		return nil, abi.Errorf(abi.EIO, "failed to read stdin: %w", r.err)
	}
	if len(r.b) > MaxInput {
		return nil, abi.Errorf(abi.EMSGSIZE, "stdin input larger than %d bytes", MaxInput)
	}
	return r.b, nil
}

// looksJSON reports whether stdin was meant as a JSON object.
func looksJSON(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{'
}

func runModel(ctx context.Context, o tree.Object, input []byte, emit func(abi.Event) error) (string, error) {
	// The run uses this process's credentials and sends them where the
	// model's .d/default points: another user's model must be steered
	// only by files nobody else can change (the rule cortexfsd applies).
	if err := tree.CheckSteering(o, os.Geteuid()); err != nil {
		return "", err
	}
	m, err := model.Open(o)
	if err != nil {
		return "", err
	}
	var in model.Input
	if looksJSON(input) {
		if in, err = model.ParseInput(input); err != nil {
			return "", err
		}
	} else {
		in = model.TextInput(strings.TrimRight(string(input), "\r\n"))
	}
	tried, err := m.Stream(ctx, abi.RouteExec, m.Request(in), emit)
	return model.Attempts(tried), err
}

func runTool(ctx context.Context, o tree.Object, input []byte, cwd string, emit func(abi.Event) error) error {
	name, err := o.CtlString("name")
	if err != nil {
		return err
	}
	if name == "" {
		name = o.Name
	}
	if _, ok := tool.Lookup(name); !ok {
		return abi.Errorf(abi.ENOTSUP, "tool %s: no runtime for %q in this build", o.Name, name)
	}
	args := bytes.TrimSpace(input)
	if len(args) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		return abi.Errorf(abi.EINVAL, "tool %s: input is not valid JSON", o.Name)
	}
	out, err := tool.Call(ctx, name, tool.Env{Cwd: cwd}, args)
	if err != nil {
		return err
	}
	e := abi.TextMessage("", "tool", string(out))
	e.Name = o.Name
	return emit(e)
}
