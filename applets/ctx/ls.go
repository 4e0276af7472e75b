package ctx

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/tree"
)

func init() {
	commands["ls"] = command{"list objects with class and status", runLs}
}

func runLs(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx ls", "ctx ls [--root DIR] [--json] [PATH]",
		`List models, tools and agents of the system tiers and your home tier, with
their .d/status, or "broken: REASON" for one that cannot run as it is (not
executable, its runner missing, an agent naming a model or tool that does
not exist): what ctx doctor reports.
PATH (absolute, or relative to the root, e.g. "model" or "tool/fs.read")
restricts the listing to that subtree.`)
	c := commonFlags(fs)
	pos, err := cli.Parse(fs, args)
	out := cli.Output{Env: env, JSON: *c.json}
	if err == nil && len(pos) > 1 {
		err = cli.Usagef("at most one PATH (%s)", cli.Hint(fs))
	}
	if err != nil {
		return out.Fail(err)
	}
	root := c.Root()
	entries, err := tree.List(root, os.Getuid())
	if err != nil {
		return out.Fail(err)
	}
	agent.CheckEntries(entries)
	if len(pos) == 1 {
		prefix := pos[0]
		if !filepath.IsAbs(prefix) {
			prefix = root.Path(prefix)
		}
		prefix = filepath.Clean(prefix)
		kept := entries[:0]
		for _, e := range entries {
			if e.Path == prefix || strings.HasPrefix(e.Path, prefix+"/") {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	if entries == nil {
		entries = []tree.Entry{}
	}
	return out.Result(entries, func(w io.Writer) {
		for _, e := range entries {
			rel, _ := filepath.Rel(string(root), e.Path)
			status := e.Status
			if e.Error != "" {
				status = "broken: " + e.Error
			}
			alias := ""
			if e.AliasOf != "" {
				alias = " -> " + e.AliasOf
			}
			sock := ""
			if e.Session == "socket" {
				sock = " [socket]"
			}
			fmt.Fprintf(w, "%-6s %-32s %s%s%s\n", e.Class, rel+alias, status, sock, "")
		}
	})
}
