// Package cortexfs is the multiplexer applet: `cortexfs APPLET ARGS…`,
// `cortexfs --list`, `cortexfs --version`, `cortexfs install DIR` and
// `cortexfs completion SHELL`.
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

var table = &cli.Cmd{
	Name:    applets.Multiplexer,
	Summary: "multiplexer: cortexfs APPLET ARGS…, --list, --version, install DIR, completion SHELL",
	Run:     runFlags,
	Subs: []*cli.Cmd{
		{Name: "install", Summary: "copy this binary to DIR and hardlink every applet name next to it", Run: runInstall},
		{Name: "completion", Summary: "print the bash, zsh or fish completion script of every applet", Run: runCompletion},
	},
}

func init() {
	applets.Register(applets.Applet{Name: table.Name, Summary: table.Summary, Run: run})
	cli.RegisterTable(table)
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && table.Sub(args[0]) == nil {
		a, ok := applets.Lookup(args[0])
		if !ok || a.Name == applets.Multiplexer {
			var names []string
			for _, a := range applets.All() {
				names = append(names, a.Name)
			}
			msg := fmt.Sprintf("unknown applet %q (see cortexfs --help)", args[0])
			if m := cli.Suggest(args[0], names); m != "" {
				msg = fmt.Sprintf("unknown applet %q (did you mean %s?)", args[0], m)
			}
			return cli.Output{Env: env, JSON: cli.WantsJSON(args)}.Fail(cli.Usagef("%s", msg))
		}
		// The applet reports its own errors under its own name.
		sub := *env
		sub.Name = a.Name
		err := a.Run(ctx, &sub, args[1:])
		return cli.Output{Env: &sub}.Fail(err)
	}
	return table.Main(ctx, env, args)
}

// description is the multiplexer's --help: every applet once, with its
// one-line summary.
func description() string {
	var b strings.Builder
	b.WriteString(`One static binary; each applet answers to its own name as argv[0] (hardlinks
made by 'cortexfs install') or as the first argument here ('cortexfs ctx ls').

applets:
`)
	for _, a := range applets.All() {
		if a.Name != applets.Multiplexer {
			fmt.Fprintf(&b, "  %-24s %s\n", a.Name, a.Summary)
		}
	}
	b.WriteString(`
commands:
  install [--force] DIR    copy this binary to DIR and hardlink every applet name
  completion SHELL         print the bash, zsh or fish completion script

'cortexfs APPLET --help' shows an applet's commands.`)
	return b.String()
}

func runFlags(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "cortexfs", "cortexfs APPLET [ARG…] | --list | --version | install DIR | completion SHELL", description())
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
		return out.Fail(cli.Usagef("unexpected argument %q (see cortexfs --help)", pos[0]))
	case !*list && !*version:
		// Bare `cortexfs`: what it is and what it holds.
		fs.Usage()
		return nil
	case *list && *version:
		return out.Fail(cli.Usagef("want one of --list or --version (see cortexfs --help)"))
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

func runInstall(ctx context.Context, env *applets.Env, args []string) error {
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
	return out.Result(map[string]any{"dir": pos[0], "actions": actions}, func(w io.Writer) {
		for _, a := range actions {
			fmt.Fprintf(w, "%-9s %s\n", a.Action, a.Path)
		}
	})
}

func runCompletion(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "completion", "cortexfs completion bash|zsh|fish",
		`Print the shell completion script of every applet (commands, subcommands
with their one-line descriptions, and flags), generated from the same
command tables that dispatch and print --help. make install installs them;
by hand:

  bash:  cortexfs completion bash > /usr/share/bash-completion/completions/cortexfs
         (or: source <(cortexfs completion bash))
  zsh:   cortexfs completion zsh > "${fpath[1]}/_cortexfs"
  fish:  cortexfs completion fish > ~/.config/fish/completions/cortexfs.fish`)
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env}
	if err != nil {
		return out.Fail(err)
	}
	if err := cli.Completion(env.Stdout, pos[0], applets.Multiplexer, completionRoots()); err != nil {
		return out.Fail(err)
	}
	return nil
}

// completionRoots is every applet's table; an applet without one completes
// its name and --help only.
func completionRoots() []*cli.Cmd {
	tables := map[string]*cli.Cmd{}
	for _, t := range cli.Tables() {
		tables[t.Name] = t
	}
	var roots []*cli.Cmd
	for _, a := range applets.All() {
		t := tables[a.Name]
		if t == nil {
			t = &cli.Cmd{Name: a.Name, Summary: a.Summary}
		}
		roots = append(roots, t)
	}
	return roots
}

// Version is the binary's version (see applets.CurrentVersion).
func Version() string { return applets.CurrentVersion() }
