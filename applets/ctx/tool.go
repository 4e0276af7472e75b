package ctx

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/toolsrc"
)

func init() {
	groups["tool"] = &cli.Cmd{Name: "tool", Summary: "tool sources (MCP servers, plugins) and their tools", Subs: []*cli.Cmd{
		{Name: "sources", Summary: "list tool sources, their state and their projected tools", Run: toolSources},
		{Name: "refresh", Summary: "re-project the tools of every tool source", Run: toolRefresh},
	}}
}

func toolSources(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx tool sources", "ctx tool sources [--root DIR] [--json]",
		`List the tool sources of the system tier and of your own tier: each MCP
server and plugin, its state (ready, starting, unavailable, failed,
not_served), its process, restarts and last error, and its tools as
projected (tool/mcp.<server>.<tool>, tool/plugin.<plugin>.<tool>) with
their status, or the clash that keeps one from being projected. A tier no
cortexfsd serves is shown from its configuration and what is on disk.`)
	c := commonFlags(fs)
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	tiers := []toolsrc.TierReport{}
	for _, ref := range toolsrc.CallerTiers(c.Root(), os.Getuid()) {
		tiers = append(tiers, tierReport(ctx, ref))
	}
	return out.Result(tiers, func(w io.Writer) { printTiers(w, tiers) })
}

func printTiers(w io.Writer, tiers []toolsrc.TierReport) {
	for _, t := range tiers {
		served := "served by cortexfsd"
		if !t.Served {
			served = "not served (no cortexfsd answers on " + t.Path + "/" + toolsrc.SocketName + ")"
		}
		fmt.Fprintf(w, "%s  %s  %s\n", t.Tier, t.Path, served)
		for _, p := range t.Problems {
			fmt.Fprintf(w, "  PROBLEM %s\n", p)
		}
		if len(t.Sources) == 0 {
			fmt.Fprintln(w, "  (no MCP servers or plugins)")
		}
		for _, s := range t.Sources {
			fmt.Fprintf(w, "  %-7s %-16s %-12s", s.Kind, s.Name, s.State)
			if s.PID != 0 {
				fmt.Fprintf(w, " pid %d", s.PID)
			}
			if s.Restarts > 0 {
				fmt.Fprintf(w, " restarts %d", s.Restarts)
			}
			if s.Error != "" {
				fmt.Fprintf(w, "  %s", s.Error)
			}
			fmt.Fprintln(w)
			for _, tl := range s.Tools {
				if tl.Status == "clash" {
					fmt.Fprintf(w, "      CLASH %s: %s\n", tl.Original, tl.Clash)
					continue
				}
				fmt.Fprintf(w, "      tool/%-40s %s\n", tl.Name, tl.Status)
			}
		}
	}
}

func toolRefresh(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx tool refresh", "ctx tool refresh [--system|--home] [--root DIR] [--json]",
		`Re-read the tool sources' configuration (.mcp.json, plugins/) and rewrite
the projection. With a cortexfsd serving the tier it asks the daemon
(servers start warm); otherwise every source is listed once here and its
MCP and native tools are projected as unavailable. Default: the system
tier when you own it (or are root), and your own tier.`)
	c := commonFlags(fs)
	system := fs.Bool("system", false, "only the system tier")
	home := fs.Bool("home", false, "only your own tier")
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	var refs []toolsrc.TierRef
	if !*home {
		sys := toolsrc.SystemTier(c.Root())
		if *system || toolsrc.MayEdit(sys) {
			refs = append(refs, sys)
		}
	}
	if !*system {
		refs = append(refs, toolsrc.HomeTier(c.Root(), os.Getuid()))
	}
	tiers := []toolsrc.TierReport{}
	var firstErr error
	for _, ref := range refs {
		rep, err := toolsrc.Refresh(ctx, ref)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			rep.Problems = append(rep.Problems, err.Error())
		}
		tiers = append(tiers, rep)
	}
	if firstErr != nil && *c.json {
		return out.Fail(firstErr)
	}
	// The same list as ctx tool sources --json: {"ok":true,"items":[tier…]}.
	err = out.Result(tiers, func(w io.Writer) { printTiers(w, tiers) })
	if err == nil && firstErr != nil {
		return &cli.Reported{Err: firstErr}
	}
	return err
}
