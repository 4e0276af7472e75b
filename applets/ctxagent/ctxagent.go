// Package ctxagent is ctx-agent, the agent launcher: it starts and stops
// the agent process that owns agent/<name>.sock (iso=shared: the caller's
// own process context; kernel isolation is a later issue).
package ctxagent

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/ns"
)

func init() {
	applets.Register(applets.Applet{Name: agent.LauncherName, Summary: "agent launcher: start NAME, stop NAME (owns agent/<name>.sock)", Run: run})
}

const usage = `usage: ctx-agent start [--root DIR] NAME   start the agent process (background); prints its pid
       ctx-agent stop  [--root DIR] NAME   stop it; .d/status ends dead
       ctx-agent run   [--root DIR] [--owner-pid PID] NAME   run it in the foreground

NAME is an agent name (agent/<NAME> under the root) or a path to an agent object.
`

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		if len(args) == 0 {
			fmt.Fprint(env.Stderr, usage)
			return &cli.Reported{Err: cli.Usagef("no command given")}
		}
		fmt.Fprint(env.Stdout, usage)
		return nil
	}
	if args[0] == "init" && ns.IsInit(append([]string{agent.LauncherName}, args...)) {
		ns.Init() // the sandbox's pid 1; never returns
	}
	fs := cli.FlagSet(env, "ctx-agent "+args[0], strings.SplitN(usage, "\n", 2)[0], "")
	root := fs.String("root", "", "CortexFS root (default $CTX_ROOT, then /ctx)")
	owner := fs.Int("owner-pid", 0, "run: life=owned child of this process (cancelled when it dies)")
	pos, err := cli.ParseN(fs, args[1:], 1)
	if err != nil {
		return err
	}
	a, err := agent.Open(agentPath(*root, pos[0]))
	if err != nil {
		return err
	}
	switch args[0] {
	case "start":
		pid, err := agent.Start(ctx, a, 0)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, pid)
		return nil
	case "stop":
		return agent.Stop(a, 10*time.Second)
	case "run":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return agent.Serve(ctx, a, agent.ServeOptions{OwnerPID: *owner, Logf: func(f string, v ...any) {
			fmt.Fprintf(env.Stderr, "ctx-agent[%s]: %s\n", strconv.Itoa(os.Getpid()), fmt.Sprintf(f, v...))
		}})
	}
	fmt.Fprint(env.Stderr, usage)
	return &cli.Reported{Err: cli.Usagef("unknown command %q", args[0])}
}

// agentPath turns NAME into <root>/agent/NAME; a path is used as is.
func agentPath(root, name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	if root == "" {
		root = tree.DefaultRoot()
	}
	return filepath.Join(root, tree.AgentDir, name)
}
