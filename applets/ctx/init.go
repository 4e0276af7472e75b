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
files a user changed are left alone and reported. Objects point their #!
line at --runner, by default the runner the tree already uses, else the
cortexfs-object-runner beside this binary, else
/usr/bin/cortexfs-object-runner; with none of them it refuses (ENOENT). An
object init wrote with another runner is updated to the new one. It prints
a summary and what it left alone; --verbose lists every path.`)
	c := commonFlags(fs)
	runnerPath := fs.String("runner", "", "interpreter `PATH` written into every object's #! line (default: see above)")
	noBin := fs.Bool("no-bin", false, "do not populate bin/")
	verbose := fs.Bool("verbose", false, "list every path, not only what was left alone")
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	opts := tree.InitOptions{Root: c.Root(), Runner: *runnerPath, UID: os.Getuid()}
	// Our own file, to copy into bin/ and to find the runner beside it;
	// never used to pick the applet (that is argv[0]).
	self, selfErr := os.Executable()
	if opts.Runner == "" {
		if opts.Runner, err = initRunner(opts.Root, self); err != nil {
			return out.Fail(err)
		}
	}
	if !*noBin {
		if selfErr != nil {
			return out.Fail(abi.Errorf(abi.EIO, "cannot find own binary for bin/: %v", selfErr))
		}
		opts.Binary = self
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
			if *verbose || ch.Action == "left_alone" || ch.Action == "updated" {
				line := fmt.Sprintf("%-10s %s", ch.Action, ch.Path)
				if ch.Reason != "" {
					line += "  (" + ch.Reason + ")"
				}
				fmt.Fprintln(w, line)
			}
		}
		fmt.Fprintf(w, "ctx init %s: %d created, %d updated, %d unchanged, %d left alone (runner %s)\n",
			opts.Root, counts["created"], counts["updated"], counts["unchanged"], counts["left_alone"], opts.Runner)
	})
}

// initRunner is the runner of a ctx init without --runner: the one the
// tree already uses while it still runs (a second init changes nothing),
// else the one tree.FindRunner finds beside self.
func initRunner(root tree.Root, self string) (string, error) {
	if cur := tree.CurrentRunner(root); cur != "" && tree.RunnerProblem(cur) == nil {
		return cur, nil
	}
	return tree.FindRunner(self)
}

func appletNames() []string {
	names := []string{"cortexfs-object-runner"}
	for _, a := range applets.All() {
		names = append(names, a.Name)
	}
	return names
}
