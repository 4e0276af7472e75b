package ctx

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

func init() {
	commands["init"] = command{"create a CortexFS tree (idempotent; keeps user edits)", runInit}
}

func runInit(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx init", "ctx init [--root DIR] [--runner PATH] [--no-bin] [--verbose] [--json]",
		`Create the tree: bin/ (this binary and its applet links), model/debug/echo
with model/main and model/helper aliases, the built-in tools, agent/,
home/<uid>/{model,agent,tool} and shared/. Running it again changes nothing;
files a user changed are left alone and reported.`)
	c := commonFlags(fs)
	runnerPath := fs.String("runner", tree.DefaultRunner, "interpreter path written into every object's #! line")
	noBin := fs.Bool("no-bin", false, "do not populate bin/")
	verbose := fs.Bool("verbose", false, "list every path, not only changes")
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	opts := tree.InitOptions{Root: c.Root(), Runner: *runnerPath, UID: os.Getuid()}
	if !*noBin {
		if opts.Binary, err = os.Executable(); err != nil {
			return out.Fail(abi.Errorf(abi.EIO, "cannot find own binary for bin/: %v", err))
		}
		opts.Applets = appletNames()
	}
	changes, err := tree.Init(opts)
	if err != nil {
		return out.Fail(err)
	}
	counts := map[string]int{}
	for _, ch := range changes {
		counts[ch.Action]++
	}
	return out.Result(map[string]any{"ok": true, "root": opts.Root, "counts": counts, "changes": changes}, func(w io.Writer) {
		for _, ch := range changes {
			if *verbose || ch.Action != "unchanged" {
				line := fmt.Sprintf("%-10s %s", ch.Action, ch.Path)
				if ch.Reason != "" {
					line += "  (" + ch.Reason + ")"
				}
				fmt.Fprintln(w, line)
			}
		}
		fmt.Fprintf(w, "ctx init %s: %d created, %d unchanged, %d left alone\n", opts.Root, counts["created"], counts["unchanged"], counts["left_alone"])
	})
}

func appletNames() []string {
	names := []string{"cortexfs-object-runner"}
	for _, a := range applets.All() {
		names = append(names, a.Name)
	}
	return names
}
