// Package ctxagent is ctx-agent, the agent launcher: it starts and stops
// the agent process that owns agent/<name>.sock and runs the agent's
// runtime in its sandbox (namespaces, pivot_root into .d/root, no
// privileges, a seccomp filter; see ns and core/agent.Launch).
package ctxagent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/ns"

	// Sandboxes bind each agent's own view of the tree (agent.ViewMounter).
	_ "github.com/cortexfs/cortexfs/fs"
)

func init() {
	applets.Register(applets.Applet{Name: table.Name, Summary: table.Summary, Run: run})
	cli.RegisterTable(table)
}

// table is ctx-agent's command table: help, "did you mean", global flags
// and completion come from it, as for ctx and cbth. init and runtime are
// internal and dispatched before it.
var table = &cli.Cmd{
	Name:    agent.LauncherName,
	Summary: "agent launcher: start NAME, stop NAME (owns agent/<name>.sock, runs the agent in its sandbox)",
	Globals: []cli.Global{{Name: "root", Value: true}, {Name: "json"}},
	Doc: `NAME is an agent name (agent/NAME under the root), a tree-relative name
(agent/NAME, home/UID/agent/NAME) or a path to an agent object. The agent
runs in a sandbox built from agent/NAME.d/ (iso, uid, gid, groups, root, cwd,
mount, env, policy): see ctx agent show NAME. An agent whose sandbox cannot
be built does not start, and the error says why.

Every command takes --root DIR (default $CTX_ROOT, then /ctx), --json and
--help, also before the command word (ctx-agent --root DIR stop NAME).
Errors are "ctx-agent: message (CODE)" on stderr, or with --json
{"ok":false,"error":{"code":…,"message":…}} on stdout.

Internal (started by ctx-agent itself, never by hand): ctx-agent init (the
sandbox's pid 1), ctx-agent runtime (the agent runtime inside the sandbox).`,
	Subs: []*cli.Cmd{
		{Name: "start", Summary: "start the agent process in the background; prints its pid", Run: startCmd},
		{Name: "stop", Summary: "stop the agent process; .d/status ends stopped", Run: stopCmd},
		{Name: "run", Summary: "run the agent process in the foreground", Run: runCmd},
	},
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "init":
			if ns.IsInit(append([]string{agent.LauncherName}, args...)) {
				ns.Init() // the sandbox's pid 1; never returns
			}
		case "runtime":
			return runtime(ctx)
		}
	}
	return table.Main(ctx, env, args)
}

// command is what every ctx-agent command parses: NAME, --root, --json.
type command struct {
	out  cli.Output
	a    *agent.Agent
	name string
}

// parse parses args of one command; more flags may be defined on fs first.
func parse(env *applets.Env, fs *flag.FlagSet, args []string) (*command, error) {
	root := fs.String("root", "", "CortexFS root `DIR` (default $CTX_ROOT, then /ctx)")
	js := fs.Bool("json", false, "machine-readable output")
	pos, err := cli.ParseN(fs, args, 1)
	c := &command{out: cli.Output{Env: env, JSON: *js}}
	if err != nil {
		return nil, c.out.Fail(err)
	}
	p, err := agentPath(*root, pos[0])
	if err == nil {
		c.a, err = agent.Open(p)
	}
	if err != nil {
		return nil, c.out.Fail(err)
	}
	c.name = c.a.Name
	return c, nil
}

func startCmd(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "start", "ctx-agent start [--root DIR] [--json] NAME",
		"Start the agent process in the background (a new session, detached from\nthe terminal) and print its pid once its socket answers. An agent already\nrunning is left as is.")
	c, err := parse(env, fs, args)
	if err != nil {
		return err
	}
	pid, err := agent.Start(ctx, c.a, 0)
	if err != nil {
		return c.out.Fail(err)
	}
	return c.out.Result(map[string]any{"name": c.name, "path": c.a.Object.Path, "pid": pid, "status": c.a.Status()},
		func(w io.Writer) { fmt.Fprintln(w, pid) })
}

func stopCmd(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "stop", "ctx-agent stop [--root DIR] [--json] NAME",
		"Stop the agent process (SIGTERM, then SIGKILL after 10 s); .d/status ends\nstopped. An agent that is not running is not an error.")
	c, err := parse(env, fs, args)
	if err != nil {
		return err
	}
	if err := agent.Stop(c.a, 10*time.Second); err != nil {
		return c.out.Fail(err)
	}
	return c.out.Result(map[string]any{"name": c.name, "path": c.a.Object.Path, "status": c.a.Status()}, nil)
}

func runCmd(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "run", "ctx-agent run [--root DIR] [--owner-pid PID] [--json] NAME",
		"Run the agent process in the foreground until SIGINT or SIGTERM; its log\nlines go to stderr. --json applies to errors only.")
	owner := fs.Int("owner-pid", 0, "life=owned child of this process (cancelled when it dies)")
	c, err := parse(env, fs, args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = agent.Serve(ctx, c.a, agent.ServeOptions{OwnerPID: *owner, Stderr: env.Stderr, Logf: func(f string, v ...any) {
		fmt.Fprintf(env.Stderr, "ctx-agent[%s]: %s\n", strconv.Itoa(os.Getpid()), fmt.Sprintf(f, v...))
	}})
	return c.out.Fail(err)
}

// agentPath turns NAME into <root>/agent/NAME; a tree-relative name or a
// path is found by tree.Locate.
func agentPath(root, name string) (string, error) {
	if root == "" {
		root = tree.DefaultRoot()
	}
	r := tree.Root(strings.TrimRight(root, "/"))
	if !strings.Contains(name, "/") {
		return r.Path(tree.AgentDir, name), nil
	}
	return r.Locate(name)
}

// runtime is the agent runtime inside the sandbox: descriptor 3 is its
// control socket to the launcher. SIGTERM (forwarded by the sandbox's
// init) ends it.
func runtime(ctx context.Context) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(3, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return cli.Usagef("ctx-agent runtime runs only inside an agent sandbox (no control socket on fd 3)")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return agent.ServeRuntime(ctx, os.NewFile(3, "control"))
}
