// Package ctx is the CortexFS user/admin CLI: init, ls, status, doctor and
// send (the socket client).
package ctx

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/tree"
)

type command struct {
	summary string
	run     func(ctx context.Context, env *applets.Env, args []string) error
}

var commands = map[string]command{}

func init() {
	applets.Register(applets.Applet{Name: "ctx", Summary: "CortexFS user/admin CLI: init, ls, status, doctor, send, model, agent, mcp, plugin, tool", Run: run})
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		w := env.Stdout
		if len(args) == 0 {
			w = env.Stderr
		}
		fmt.Fprintln(w, "usage: ctx COMMAND [ARG…]   (ctx COMMAND --help for details)\n\ncommands:")
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
		}
		if len(args) == 0 {
			return &cli.Reported{Err: cli.Usagef("no command given")}
		}
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "ctx: unknown command %q (see ctx --help)\n", args[0])
		return &cli.Reported{Err: cli.Usagef("unknown command %q", args[0])}
	}
	return c.run(ctx, env, args[1:])
}

// common flags: --root and --json.
type common struct {
	root *string
	json *bool
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		root: fs.String("root", "", "CortexFS root (default $CTX_ROOT, then /ctx)"),
		json: fs.Bool("json", false, "machine-readable output"),
	}
}

func (c common) Root() tree.Root {
	if *c.root != "" {
		return tree.Root(strings.TrimRight(*c.root, "/"))
	}
	return tree.Root(tree.DefaultRoot())
}

// subcommand is one verb of a ctx command group (ctx mcp add, …).
type subcommand func(ctx context.Context, env *applets.Env, args []string) error

// dispatch runs the verb args[0] of a command group; no verb prints usage
// to stderr (exit 2), --help to stdout.
func dispatch(ctx context.Context, env *applets.Env, group, usage string, subs map[string]subcommand, args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		w := env.Stdout
		if len(args) == 0 {
			w = env.Stderr
		}
		fmt.Fprintln(w, usage)
		if len(args) == 0 {
			return &cli.Reported{Err: cli.Usagef("%s: no subcommand", group)}
		}
		return nil
	}
	if f, ok := subs[args[0]]; ok {
		return f(ctx, env, args[1:])
	}
	fmt.Fprintln(env.Stderr, usage)
	return &cli.Reported{Err: cli.Usagef("%s: unknown subcommand %q", group, args[0])}
}
