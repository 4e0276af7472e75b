// Package cbth is the cbth applet: the CLI of cbth's job/delivery core and
// its on-demand per-user daemon. Each command parses flags, makes one call
// into core/cbth (usually through the daemon) and prints the result.
package cbth

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	_ "github.com/cortexfs/cortexfs/core/cbth/cli" // the CLI adapter registers itself with the daemon
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/tasks"
)

func init() {
	applets.Register(applets.Applet{
		Name:    "cbth",
		Summary: "cbth CLI and its on-demand per-user daemon: jobs, delivery batches, tasks",
		Run:     run,
	})
}

const usage = `usage: cbth COMMAND [SUBCOMMAND] [FLAGS]

commands:
  daemon run|ensure|status|ping|stop    the on-demand per-user daemon
  job submit|complete|fail|cancel|query|list  jobs and their results
  batch inspect-head|inspect|close-head  delivery batches (operator)
  task run|list|inspect|cancel           supervised commands
  artifact pin                           set or clear an artifact's operator_pin_until
  audit list                             the audit log
  cli run|app-servers                    Codex CLI integration (managed sessions)
  cli session list|inspect               managed CLI sessions
  desktop …                              Desktop path: installation-state, binding, bridge-preflight,
                                         bridge read helpers, note-* writeback, relay (cbth desktop --help)
  new | resume ID                        short for cli run --new-thread | --bind-thread-id ID
  doctor [cli]                           check home modes, store, daemon, socket, Desktop state [codex capabilities]

Every command takes --home DIR (default $CBTH_HOME, else ~/.cbth), --json
and --help. Errors in --json mode are {"ok":false,"error":{"code":…}} on
stdout with a non-zero exit status.
`

type command func(ctx context.Context, env *applets.Env, args []string) error

var groups = map[string]map[string]command{
	"daemon": {"run": daemonRun, "ensure": daemonEnsure, "status": daemonStatus, "ping": daemonPing, "stop": daemonStop},
	"job": {"submit": jobSubmit, "complete": jobComplete, "fail": jobFail, "cancel": jobCancel, "query": jobQuery,
		"list": jobList},
	"batch":    {"inspect-head": batchInspectHead, "inspect": batchInspect, "close-head": batchCloseHead},
	"task":     {"run": taskRun, "list": taskList, "inspect": taskInspect, "cancel": taskCancel},
	"audit":    {"list": auditList},
	"artifact": {"pin": artifactPin},
	"cli":      {"run": cliRun, "app-servers": cliAppServers, "session": cliSession},
}

// top are the commands without a subcommand.
var top = map[string]command{"new": newCmd, "resume": resumeCmd}

func cliSession(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) > 0 && args[0] == "list" {
		return cliSessionList(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "inspect" {
		return cliSessionInspect(ctx, env, args[1:])
	}
	return fail(env, args, cli.Usagef("usage: cbth cli session list|inspect"))
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(env.Stdout, usage)
		if len(args) == 0 {
			return &cli.Reported{Err: cli.Usagef("no command given")}
		}
		return nil
	}
	if len(args) >= 3 && args[0] == tasks.ShimArgs[0] && args[1] == tasks.ShimArgs[1] && args[2] == tasks.ShimArgs[2] {
		// Internal: the supervisor the daemon puts between itself and a
		// task's command (see tasks.RunShim). Not a user command.
		if code := tasks.RunShim(args[3:]); code != 0 {
			return &cli.ExitStatus{Code: code}
		}
		return nil
	}
	if args[0] == "doctor" {
		if len(args) > 1 && args[1] == "cli" {
			return doctorCLI(ctx, env, args[2:])
		}
		return doctor(ctx, env, args[1:])
	}
	if c, ok := top[args[0]]; ok {
		return c(ctx, env, args[1:])
	}
	g, ok := groups[args[0]]
	if !ok {
		return fail(env, args, cli.Usagef("unknown command %q (see cbth --help)", args[0]))
	}
	if len(args) < 2 || args[1] == "--help" || args[1] == "-h" {
		fmt.Fprintf(env.Stdout, "usage: cbth %s SUBCOMMAND [FLAGS]\n\nsubcommands:", args[0])
		for _, name := range slices.Sorted(maps.Keys(g)) {
			fmt.Fprintf(env.Stdout, " %s", name)
		}
		fmt.Fprintln(env.Stdout)
		if len(args) < 2 {
			return &cli.Reported{Err: cli.Usagef("cbth %s: no subcommand given", args[0])}
		}
		return nil
	}
	c, ok := g[args[1]]
	if !ok {
		return fail(env, args, cli.Usagef("unknown command %q %q (see cbth %s --help)", args[0], args[1], args[0]))
	}
	return c(ctx, env, args[2:])
}

// usagef is a bad-usage error (EINVAL, exit 2).
func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

// fail reports err honouring a --json anywhere in args.
func fail(env *applets.Env, args []string, err error) error {
	asJSON := false
	for _, a := range args {
		asJSON = asJSON || a == "--json" || a == "-json"
	}
	return cli.Output{Env: env, JSON: asJSON}.Fail(err)
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
		for _, a := range args {
			*c.json = *c.json || a == "--json" || a == "-json"
		}
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
