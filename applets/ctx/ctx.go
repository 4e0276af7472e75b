// Package ctx is the CortexFS user/admin CLI: init, ls, status, doctor,
// send (the socket client), models and agents.
package ctx

import (
	"context"
	"flag"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/tree"
)

// command is a top-level command that dispatches by itself; files add
// theirs to commands at init time.
type command struct {
	summary string
	run     func(ctx context.Context, env *applets.Env, args []string) error
}

var (
	commands = map[string]command{}
	// groups are top-level command groups (ctx model …, ctx agent …):
	// their help, did-you-mean and completion come from the table.
	groups = map[string]*cli.Cmd{}
)

const summary = "CortexFS user/admin CLI: init, ls, status, doctor, send, models, agents, MCP servers, plugins, tool sources"

func init() {
	applets.Register(applets.Applet{Name: "ctx", Summary: summary, Run: run})
	cli.RegisterTableFunc("ctx", table)
}

var (
	tableOnce sync.Once
	ctxTable  *cli.Cmd
)

// table is ctx's command table, built once every file's init has added
// its commands and groups.
func table() *cli.Cmd {
	tableOnce.Do(func() {
		ctxTable = &cli.Cmd{Name: "ctx", Summary: summary,
			Globals: []cli.Global{{Name: "root", Value: true}, {Name: "json"}},
			Doc: `Every command takes --root DIR (default $CTX_ROOT, then /ctx) and --help,
also before the command word (ctx --root DIR ls); queries take --json, whose
answer is {"ok":true,…} (lists: {"ok":true,"items":[…]}) and, on failure,
{"ok":false,"error":{"code":…,"message":…}}.`}
		names := make([]string, 0, len(commands)+len(groups))
		for n := range commands {
			names = append(names, n)
		}
		for n := range groups {
			if _, dup := commands[n]; !dup {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			if g := groups[n]; g != nil {
				ctxTable.Add(g)
				continue
			}
			ctxTable.Add(&cli.Cmd{Name: n, Summary: commands[n].summary, Run: commands[n].run})
		}
	})
	return ctxTable
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	return table().Main(ctx, env, args)
}

// common flags: --root and --json.
type common struct {
	root *string
	json *bool
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		root: fs.String("root", "", "CortexFS root `DIR` (default $CTX_ROOT, then /ctx)"),
		json: fs.Bool("json", false, "machine-readable output"),
	}
}

// Root is --root, else $CTX_ROOT, else /ctx, made absolute: paths derived
// from it are written into control files (an agent's .d/mount, .d/path)
// that must not depend on the directory ctx ran in.
func (c common) Root() tree.Root {
	r := tree.DefaultRoot()
	if *c.root != "" {
		r = strings.TrimRight(*c.root, "/")
	}
	if abs, err := filepath.Abs(r); err == nil && r != "" {
		r = abs
	}
	return tree.Root(r)
}
