// Package ctxagent is ctx-agent, the agent launcher: it starts and stops
// the agent process that owns agent/<name>.sock and runs the agent's
// runtime in its sandbox (namespaces, pivot_root into .d/root, no
// privileges, a seccomp filter; see ns and core/agent.Launch).
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

	// Sandboxes bind each agent's own view of the tree (agent.ViewMounter).
	_ "github.com/cortexfs/cortexfs/fs"
)

func init() {
	applets.Register(applets.Applet{Name: agent.LauncherName, Summary: "agent launcher: start NAME, stop NAME (owns agent/<name>.sock, runs the agent in its sandbox)", Run: run})
}

const usage = `usage: ctx-agent start [--root DIR] NAME   start the agent process (background); prints its pid
       ctx-agent stop  [--root DIR] NAME   stop it; .d/status ends stopped
       ctx-agent run   [--root DIR] [--owner-pid PID] NAME   run it in the foreground

NAME is an agent name (agent/<NAME> under the root) or a path to an agent object.
The agent runs in a sandbox built from agent/NAME.d/ (iso, uid, gid, groups,
root, cwd, mount, env, policy): see ctx agent show NAME. An agent whose sandbox
cannot be built does not start, and the error says why.

Internal (started by ctx-agent itself, never by hand):
       ctx-agent init      the sandbox's pid 1 (reads its spec on fd 3)
       ctx-agent runtime   the agent runtime inside the sandbox (control socket on fd 3)
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
	switch args[0] {
	case "init":
		if ns.IsInit(append([]string{agent.LauncherName}, args...)) {
			ns.Init() // the sandbox's pid 1; never returns
		}
	case "runtime":
		return runtime(ctx)
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
		return agent.Serve(ctx, a, agent.ServeOptions{OwnerPID: *owner, Stderr: env.Stderr, Logf: func(f string, v ...any) {
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
