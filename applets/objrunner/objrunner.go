// Package objrunner is cortexfs-object-runner, the shebang interpreter of
// every /ctx object file: `#!/usr/bin/cortexfs-object-runner` makes the
// kernel run `cortexfs-object-runner OBJECT [ARG…]`.
package objrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/runner"
	"github.com/cortexfs/cortexfs/core/tool"
	"github.com/cortexfs/cortexfs/core/toolsrc"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/jsonl"

	// Sandboxes bind each agent's own view of the tree (agent.ViewMounter).
	_ "github.com/cortexfs/cortexfs/fs"
)

// Name is the applet name shebangs point at.
const Name = "cortexfs-object-runner"

func init() {
	applets.Register(applets.Applet{Name: Name, Summary: "shebang interpreter of /ctx objects: one-shot model/tool/agent exec", Run: run})
}

const usage = `usage: OBJECT [--text|--jsonl] [--dry-run] [--] [INPUT…]
       cortexfs-object-runner OBJECT [--text|--jsonl] [--dry-run] [--] [INPUT…]

Runs a CortexFS object once. Input is the arguments joined by spaces, else
stdin: text, or JSON ({"messages":[…]} for models, the tool's arguments for
tools). Output is canonical JSONL (start, delta…, message, usage, done);
--text (the default when stdout is a terminal) prints it for humans.
--dry-run asks a tool that declares one (.d/effects dry_run) to preview
its effect instead of committing it; other tools refuse with ENOTSUP.
Exit: 0 ok, 1 error (EREMOTEIO: the tool reported an error result),
2 bad input, 13 EACCES, 69 unavailable, 70 internal.
`

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		if len(args) == 0 {
			fmt.Fprint(env.Stderr, usage)
			return &cli.Reported{Err: cli.Usagef("no object given")}
		}
		fmt.Fprint(env.Stdout, usage)
		return nil
	}
	path, rest := args[0], args[1:]
	text, jsonOut, dryRun := false, false, false
	for len(rest) > 0 {
		switch rest[0] {
		case "--dry-run":
			dryRun = true
		case "--text":
			text = true
		case "--jsonl":
			jsonOut = true
		case "--":
			rest = rest[1:]
			goto parsed
		default:
			goto parsed
		}
		rest = rest[1:]
	}
parsed:
	obj, err := tree.Resolve(path)
	if err == nil {
		err = tree.CheckExec(obj.Path)
	}
	if err != nil {
		return err
	}
	if !jsonOut && cli.IsTTY(env.Stdout) {
		text = true
	}
	interactive := len(rest) == 0 && cli.IsTTY(env.Stdin)
	switch {
	case interactive && obj.Class == abi.ClassTool:
		return toolUsage(env, obj)
	case interactive && obj.Class == abi.ClassModel:
		return repl(ctx, env, obj, text) // owns its signals: Ctrl-C cancels a turn, not the session
	}
	// SIGHUP too: a closed terminal cancels the run, which still writes
	// its done frame (to whoever reads stdout), instead of killing it.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	finished := make(chan struct{})
	defer close(finished)
	go watchdog(ctx, finished, env)
	out := emitter(env, text)
	err = runner.Exec{Object: obj, Args: rest, Stdin: env.Stdin, Emit: out.emit, Cwd: cwd(), DryRun: dryRun}.Run(ctx)
	if out.err != nil {
		return out.err // stdout failed: the stream cannot say it, stderr does
	}
	if err != nil {
		return &cli.Reported{Err: err} // already in the stream
	}
	return nil
}

// stopGrace is how long a signalled run may take to write its done frame
// before the runner gives up on it.
const stopGrace = 5 * time.Second

// watchdog ends the process when a signal cancelled the run and the run
// did not finish within stopGrace (stuck in a call that cannot be
// interrupted): a runner must never need SIGKILL.
func watchdog(ctx context.Context, finished <-chan struct{}, env *applets.Env) {
	select {
	case <-finished:
		return
	case <-ctx.Done():
	}
	select {
	case <-finished:
	case <-time.After(stopGrace):
		fmt.Fprintln(env.Stderr, cli.HumanError(Name, abi.Errorf(abi.ECANCELED, "signalled; the run did not stop within %v, exiting", stopGrace)))
		os.Exit(abi.ECANCELED.Exit())
	}
}

// output writes the run's frames to stdout and remembers the first write
// failure (a full disk, /dev/full, a closed pipe) with its stable code.
type output struct {
	write func(abi.Event) error
	err   error
}

func (o *output) emit(e abi.Event) error {
	if o.err != nil {
		return o.err
	}
	if err := o.write(e); err != nil {
		o.err = abi.Errorf(abi.CodeOf(err), "cannot write the stream to stdout: %w", err)
		return o.err
	}
	return nil
}

func emitter(env *applets.Env, text bool) *output {
	if text {
		r := &cli.TextRenderer{Out: env.Stdout, Err: env.Stderr}
		return &output{write: r.Emit}
	}
	w := jsonl.NewWriter(env.Stdout)
	return &output{write: func(e abi.Event) error { return w.Encode(e) }}
}

// toolUsage is what a tool prints when run bare on a terminal.
func toolUsage(env *applets.Env, obj tree.Object) error {
	name, _ := obj.CtlString("name")
	desc, _ := obj.CtlString("description")
	fmt.Fprintf(env.Stdout, "%s — %s\nusage: %s '{JSON arguments}'   or   echo '{…}' | %s\n", obj.Name, desc, obj.Called, obj.Called)
	if b, ok := tool.Lookup(name); ok && !toolsrc.IsProjected(obj) {
		fmt.Fprintf(env.Stdout, "input schema: %s\n", tool.InputSchema(b))
	} else if raw, err := obj.ReadCtl("schema"); err == nil {
		var doc struct {
			Input json.RawMessage `json:"input"`
		}
		if json.Unmarshal(raw, &doc) == nil && len(doc.Input) > 0 {
			var c bytes.Buffer
			_ = json.Compact(&c, doc.Input)
			fmt.Fprintf(env.Stdout, "input schema: %s\n", c.String())
		}
	}
	return nil
}

func cwd() string {
	d, _ := os.Getwd()
	return d
}
