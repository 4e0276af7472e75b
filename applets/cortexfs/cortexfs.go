// Package cortexfs is the multiplexer applet: `cortexfs APPLET ARGS…`,
// `cortexfs --list`, `cortexfs --version` and `cortexfs install DIR`.
package cortexfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/install"
)

// ObjectRunner is the shebang interpreter name; install always links it.
const ObjectRunner = "cortexfs-object-runner"

func init() {
	applets.Register(applets.Applet{
		Name:    applets.Multiplexer,
		Summary: "multiplexer: cortexfs APPLET ARGS…, --list, --version, install DIR",
		Run:     run,
	})
}

const usage = `usage: cortexfs APPLET [ARG…]
       cortexfs --list [--json]
       cortexfs --version [--json]
       cortexfs install [--force] [--json] DIR

One static binary; each applet answers to its own name as argv[0]
(hardlinks made by 'cortexfs install') or as the first argument here.
`

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return &cli.Reported{Err: cli.Usagef("no applet given")}
	}
	if args[0] == "install" {
		return runInstall(env, args[1:])
	}
	if !strings.HasPrefix(args[0], "-") {
		a, ok := applets.Lookup(args[0])
		if !ok || a.Name == applets.Multiplexer {
			fmt.Fprintf(env.Stderr, "cortexfs: unknown applet %q\n\n%s", args[0], usage)
			return &cli.Reported{Err: cli.Usagef("unknown applet %q", args[0])}
		}
		sub := *env
		sub.Name = a.Name
		return a.Run(ctx, &sub, args[1:])
	}
	fs := cli.FlagSet(env, "cortexfs", "cortexfs --list|--version [--json]", usage)
	list := fs.Bool("list", false, "print the registered applet names, one per line")
	version := fs.Bool("version", false, "print the version")
	asJSON := fs.Bool("json", false, "machine-readable output")
	pos, err := cli.Parse(fs, args)
	out := cli.Output{Env: env, JSON: *asJSON}
	if err != nil {
		return out.Fail(err)
	}
	switch {
	case len(pos) > 0:
		return out.Fail(cli.Usagef("unexpected argument %q", pos[0]))
	case *list && *version, !*list && !*version:
		return out.Fail(cli.Usagef("want exactly one of --list or --version"))
	case *version:
		v := Version()
		return out.Result(map[string]string{"version": v, "go": runtime.Version()}, func(w io.Writer) {
			fmt.Fprintf(w, "cortexfs %s\n", v)
		})
	default:
		names := []string{}
		for _, a := range applets.All() {
			names = append(names, a.Name)
		}
		return out.Result(names, func(w io.Writer) {
			for _, n := range names {
				fmt.Fprintln(w, n)
			}
		})
	}
}

func runInstall(env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "install", "cortexfs install [--force] [--json] DIR",
		`Copy this binary to DIR/cortexfs and hardlink every applet name (and
cortexfs-object-runner) next to it. Idempotent; refuses to replace a file that
is not already a link of the same binary unless --force.`)
	force := fs.Bool("force", false, "replace conflicting files")
	asJSON := fs.Bool("json", false, "machine-readable output")
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *asJSON}
	if err != nil {
		return out.Fail(err)
	}
	self, err := os.Executable()
	if err != nil {
		return out.Fail(abi.Errorf(abi.EIO, "cannot find own binary to copy: %v", err))
	}
	names := []string{ObjectRunner}
	for _, a := range applets.All() {
		names = append(names, a.Name)
	}
	actions, err := install.Install(self, pos[0], names, *force)
	if err != nil {
		return out.Fail(err)
	}
	return out.Result(map[string]any{"ok": true, "dir": pos[0], "actions": actions}, func(w io.Writer) {
		for _, a := range actions {
			fmt.Fprintf(w, "%-9s %s\n", a.Action, a.Path)
		}
	})
}

// Version is the binary's version (see applets.CurrentVersion).
func Version() string { return applets.CurrentVersion() }
