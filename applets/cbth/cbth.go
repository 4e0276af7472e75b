// Package cbth is the cbth applet: the CLI of cbth's job/delivery core and
// its on-demand per-user daemon. Each command parses flags, makes one call
// into core/cbth (usually through the daemon) and prints the result.
package cbth

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	_ "github.com/cortexfs/cortexfs/core/cbth/cli" // the CLI adapter registers itself with the daemon
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/tasks"
)

func init() {
	applets.Register(applets.Applet{Name: table.Name, Summary: table.Summary, Run: run})
	cli.RegisterTable(table)
}

// table is cbth's command table: dispatch, group help, "did you mean" and
// shell completion all come from it.
var table = &cli.Cmd{
	Name:    "cbth",
	Summary: "cbth CLI and its on-demand per-user daemon: jobs, delivery batches, tasks",
	Globals: []cli.Global{{Name: "home", Value: true}, {Name: "json"}},
	Doc: `Every command takes --home DIR (default $CBTH_HOME, else ~/.cbth), --json
and --help, also before the command word (cbth --home DIR job list). Any
command starts the daemon on demand. Errors are "cbth: message (CODE)" on
stderr, or with --json {"ok":false,"error":{"code":…,"message":…}} on stdout,
with a non-zero exit status; --json results are {"ok":true,…} (lists:
{"ok":true,"items":[…]}).`,
	Subs: []*cli.Cmd{
		{Name: "new", Summary: "run codex on a fresh thread with CLI delivery (cli run --new-thread)", Run: newCmd},
		{Name: "resume", Summary: "run codex on an existing thread with CLI delivery (cli run --bind-thread-id ID)", Run: resumeCmd},
		{Name: "job", Summary: "jobs and their results", Subs: []*cli.Cmd{
			{Name: "submit", Summary: "submit a job for a thread (status running)", Run: jobSubmit},
			{Name: "complete", Summary: "mark a running job ready, with its result file", Run: jobComplete},
			{Name: "fail", Summary: "mark a running job failed", Run: jobFail},
			{Name: "cancel", Summary: "cancel a running job or withdraw a queued one", Run: jobCancel},
			{Name: "query", Summary: "show a job, its batch, its artifact and what blocks its delivery", Run: jobQuery},
			{Name: "list", Summary: "list jobs, newest first", Run: jobList},
		}},
		{Name: "batch", Summary: "delivery batches (operator)", Subs: []*cli.Cmd{
			{Name: "inspect-head", Summary: "show a thread's head batch and what blocks its delivery", Run: batchInspectHead},
			{Name: "inspect", Summary: "show any batch by id, closed ones included", Run: batchInspect},
			{Name: "close-head", Summary: "close a thread's head batch as an operator", Run: batchCloseHead},
		}},
		{Name: "task", Summary: "commands run under the daemon's supervision", Subs: []*cli.Cmd{
			{Name: "run", Summary: "run a command for a thread; its result becomes a job", Run: taskRun},
			{Name: "list", Summary: "list tasks, newest first", Run: taskList},
			{Name: "inspect", Summary: "show a task, its exit status and output tails", Run: taskInspect},
			{Name: "cancel", Summary: "kill a running task's process tree; its job is cancelled", Run: taskCancel},
		}},
		{Name: "artifact", Summary: "artifacts (operator retention)", Subs: []*cli.Cmd{
			{Name: "pin", Summary: "set or clear an artifact's operator_pin_until", Run: artifactPin},
		}},
		{Name: "audit", Summary: "the audit log", Subs: []*cli.Cmd{
			{Name: "list", Summary: "show the newest audit rows", Run: auditList},
		}},
		{Name: "cli", Summary: "Codex CLI integration (managed sessions)", Subs: []*cli.Cmd{
			{Name: "run", Summary: "run the Codex TUI against a daemon-owned app-server", Run: cliRun},
			{Name: "app-servers", Summary: "list the daemon-owned Codex app-servers", Run: cliAppServers},
			{Name: "session", Summary: "managed CLI sessions", Subs: []*cli.Cmd{
				{Name: "list", Summary: "list managed sessions, their bound threads and blocking reasons", Run: cliSessionList},
				{Name: "inspect", Summary: "show a managed session and why delivery fails closed", Run: cliSessionInspect},
				{Name: "forget", Summary: "retire a session that never started or has ended", Run: cliSessionForget},
			}},
		}},
		{Name: "daemon", Summary: "the on-demand per-user daemon", Subs: []*cli.Cmd{
			{Name: "run", Summary: "run the daemon in the foreground", Run: daemonRun},
			{Name: "ensure", Summary: "start the daemon unless it runs, then print its status", Run: daemonEnsure},
			{Name: "status", Summary: "print the daemon's status without starting it", Run: daemonStatus},
			{Name: "ping", Summary: "round-trip one request, starting the daemon if needed", Run: daemonPing},
			{Name: "stop", Summary: "ask the daemon to exit and wait for it", Run: daemonStop},
			{Name: "config", Summary: "check config.ini and list every key, its value, default and meaning", Run: daemonConfig},
		}},
		{Name: "doctor", Summary: "check home modes, store, daemon, socket and Desktop state", Run: doctor, Subs: []*cli.Cmd{
			{Name: "cli", Summary: "probe codex for what CLI delivery needs; sessions that fail closed", Run: doctorCLI},
		}},
	},
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) >= 3 && args[0] == tasks.ShimArgs[0] && args[1] == tasks.ShimArgs[1] && args[2] == tasks.ShimArgs[2] {
		// Internal: the supervisor the daemon puts between itself and a
		// task's command (see tasks.RunShim). Not a user command.
		if code := tasks.RunShim(args[3:]); code != 0 {
			return &cli.ExitStatus{Code: code}
		}
		return nil
	}
	return table.Main(ctx, env, args)
}

// usagef is a bad-usage error (EINVAL, exit 2).
func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

// fail reports err honouring a --json anywhere in args.
func fail(env *applets.Env, args []string, err error) error {
	return cli.Output{Env: env, JSON: cli.WantsJSON(args)}.Fail(err)
}

// common holds the flags every command has.
type common struct {
	fs   *flag.FlagSet
	env  *applets.Env
	home *string
	json *bool
}

func newCommand(env *applets.Env, name, synopsis, description string) *common {
	fs := cli.FlagSet(env, name, synopsis, description)
	return &common{fs: fs, env: env,
		home: fs.String("home", "", "cbth state directory (default $CBTH_HOME, else ~/.cbth)"),
		json: fs.Bool("json", false, "machine-readable output")}
}

func (c *common) out() cli.Output { return cli.Output{Env: c.env, JSON: *c.json} }

// parse parses args, resolves the home and checks the positional count
// (n as for cli.NArgs; n == -100 means any).
func (c *common) parse(args []string, n int) ([]string, home.Home, error) {
	pos, err := cli.Parse(c.fs, args)
	if err != nil {
		// A bad flag stops parsing before --json is seen; honour it anyway.
		*c.json = *c.json || cli.WantsJSON(args)
		return nil, home.Home{}, err
	}
	if n != -100 {
		if err := cli.NArgs(c.fs, pos, n); err != nil {
			return nil, home.Home{}, err
		}
	}
	h, err := home.Resolve(*c.home)
	return pos, h, err
}

// optBool is a --flag true|false whose absence is distinguishable.
type optBool struct{ v *bool }

func (o *optBool) String() string {
	if o == nil || o.v == nil {
		return ""
	}
	return strconv.FormatBool(*o.v)
}

func (o *optBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	o.v = &b
	return nil
}

func printKV(w io.Writer, kv ...any) {
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		switch p := v.(type) {
		case *string:
			if p == nil {
				v = "-"
			} else {
				v = *p
			}
		}
		fmt.Fprintf(w, "%-26s %v\n", kv[i], v)
	}
}
