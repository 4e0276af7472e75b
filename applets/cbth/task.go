package cbth

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/tasks"
)

func exitStatus(n int) error { return &cli.ExitStatus{Code: n} }

func printTask(w io.Writer, t *tasks.Task) {
	printKV(w, "task_id", t.TaskID, "job_id", t.JobID, "job_status", t.JobStatus, "state", t.State,
		"argv", t.Argv, "cwd", t.Cwd, "reason", t.Reason, "spool_dir", t.SpoolDir)
	if t.ExitStatus != nil {
		printKV(w, "exit_status", *t.ExitStatus)
	}
}

func taskRun(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "task run", "cbth task run --source-thread-id ID --summary S [--target cli|desktop] "+
		"[delivery flags] [--cwd DIR] [--timeout-seconds N] [--jsonl-events] [--json] -- CMD [ARG…]",
		`Run CMD under the daemon's supervision and return at once with the task and
job ids. CMD gets this command's environment and working directory (or --cwd)
and its arguments byte for byte; it runs in its own session behind a
supervisor that ends its whole process tree with it. stdout/stderr are
spooled under $CBTH_HOME/tasks/<id>/. Exit 0 completes the job; anything else
fails it, with the output tails and exit status as the result.

When CMD speaks the canonical CortexFS event stream (a /ctx object run through
the object runner, detected from its shebang, or --jsonl-events), the job's
summary is the run's final assistant message, a failed run (done with an
error status, or an error frame) fails the job with its code and message, and
the full stream is the artifact.`)
	var r tasks.RunRequest
	var cwd string
	var events bool
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the caller thread")
	c.fs.StringVar(&r.Summary, "summary", "", "one-line summary")
	c.fs.StringVar(&r.Target, "target", "cli", "delivery target: cli or desktop")
	c.fs.StringVar(&cwd, "cwd", "", "working directory (default: the current one)")
	c.fs.Int64Var(&r.TimeoutSeconds, "timeout-seconds", 0, "end the process tree after N seconds (0: none)")
	c.fs.BoolVar(&events, "jsonl-events", false, "CMD writes the canonical event stream on stdout")
	pol := policyFlags(c)
	cli.MarkRequired(c.fs, "source-thread-id", "summary")
	pos, h, err := c.parse(args, -1)
	if err == nil && cwd == "" {
		cwd, err = os.Getwd()
	}
	if err == nil {
		cwd, err = absPath(cwd)
	}
	if err != nil {
		return c.out().Fail(err)
	}
	environ := os.Environ()
	req := tasks.NewRequest(pos, cwd, environ)
	req.SourceThreadID, req.Summary, req.Target, req.TimeoutSeconds = r.SourceThreadID, r.Summary, r.Target, r.TimeoutSeconds
	req.Policy = pol()
	if len(pos) > 0 && (events || tasks.SpeaksEvents(pos[0], os.Getenv("PATH"))) {
		req.Format = tasks.FormatEvents
	}
	var t tasks.Task
	if err := daemon.Call(ctx, h, daemon.OpTaskRun, req, &t); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(t, func(w io.Writer) { printTask(w, &t) })
}

func taskList(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "task list", "cbth task list [--source-thread-id ID] [--limit N] [--json]", "List tasks, newest first.")
	var r daemon.ThreadArgs
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "only this thread")
	c.fs.IntVar(&r.Limit, "limit", 100, "at most N tasks")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var list []tasks.Task
	if err := daemon.Call(ctx, h, daemon.OpTaskList, r, &list); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(list, func(w io.Writer) {
		for _, t := range list {
			fmt.Fprintf(w, "%s %-9s %s %v\n", t.TaskID, t.State, t.JobID, t.Argv)
		}
	})
}

func taskByID(ctx context.Context, env *applets.Env, args []string, name, op, desc string) error {
	c := newCommand(env, "task "+name, "cbth task "+name+" TASK_ID [--json]", desc)
	id := c.fs.String("task-id", "", "the task (or give it as the argument)")
	pos, h, err := c.parse(args, -100)
	if err == nil && *id == "" && len(pos) == 1 {
		*id, pos = pos[0], nil
	}
	if err == nil && (len(pos) > 0 || *id == "") {
		err = cli.Usagef("want one TASK_ID (%s)", cli.Hint(c.fs))
	}
	if err != nil {
		return c.out().Fail(err)
	}
	var t tasks.Task
	if err := daemon.Call(ctx, h, op, daemon.IDArgs{ID: *id}, &t); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(t, func(w io.Writer) {
		printTask(w, &t)
		if t.StdoutTail != "" {
			fmt.Fprintf(w, "--- stdout (tail) ---\n%s\n", t.StdoutTail)
		}
		if t.StderrTail != "" {
			fmt.Fprintf(w, "--- stderr (tail) ---\n%s\n", t.StderrTail)
		}
	})
}

func taskInspect(ctx context.Context, env *applets.Env, args []string) error {
	return taskByID(ctx, env, args, "inspect", daemon.OpTaskInspect, "Show a task, its state, exit status and output tails.")
}

func taskCancel(ctx context.Context, env *applets.Env, args []string) error {
	return taskByID(ctx, env, args, "cancel", daemon.OpTaskCancel, "Kill a running task's process group; its job is cancelled.")
}
