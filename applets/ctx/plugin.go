package ctx

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/toolsrc"
)

func init() {
	groups["plugin"] = &cli.Cmd{Name: "plugin", Summary: "plugins projected as tools", Subs: []*cli.Cmd{
		{Name: "install", Summary: "install the plugin in DIR and project its tools", Run: pluginInstall},
		{Name: "ls", Summary: "list installed plugins", Run: pluginLs},
		{Name: "rm", Summary: "remove a plugin and its tools", Run: pluginRm},
	}}
}

func pluginInstall(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx plugin install", "ctx plugin install DIR [--home] [--replace] [--root DIR] [--json]",
		`Install the plugin in DIR (its manifest.toml and, for a native plugin,
the library it names) into <tier>/plugins/<name>/, then refresh: its tools
appear as tool/plugin.<name>.<tool>. Native plugins are loaded by cortexfsd
in a plugin host process; process plugins run as a child of each caller.`)
	c := commonFlags(fs)
	home := fs.Bool("home", false, "your own tier (home/<uid>) instead of the system tier")
	replace := fs.Bool("replace", false, "replace an installed plugin of that name")
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	ref := tierFlag(c, *home)
	man, err := toolsrc.InstallPlugin(ref, pos[0], *replace)
	if err != nil {
		return out.Fail(err)
	}
	rep, rerr := toolsrc.Refresh(ctx, ref)
	src := findSource(rep, false, man.Name)
	res := withRefresh(map[string]any{"ok": true, "tier": ref.Name(), "plugin": man.Name, "kind": man.Kind(), "source": src}, rerr)
	return out.Result(res, func(w io.Writer) {
		fmt.Fprintf(w, "installed %s plugin %s %s into %s/%s\n", man.Kind(), man.Name, man.Version, ref.PluginsDir(), man.Name)
		printSourceTools(w, src, rep.Served, rerr)
	})
}

func pluginLs(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx plugin ls", "ctx plugin ls [--root DIR] [--json]",
		"List the plugins of the system tier and of your own tier, with their state.")
	c := commonFlags(fs)
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	type row struct {
		toolsrc.PluginEntry
		Kind  string `json:"kind,omitempty"`
		State string `json:"state"`
		Tools int    `json:"tools"`
	}
	rows := []row{}
	for _, ref := range toolsrc.CallerTiers(c.Root(), os.Getuid()) {
		ps, err := toolsrc.ListPlugins(ref)
		if err != nil {
			return out.Fail(err)
		}
		rep := tierReport(ctx, ref)
		for _, p := range ps {
			r := row{PluginEntry: p, State: toolsrc.StateFailed}
			if p.Manifest != nil {
				r.Kind, r.State = p.Manifest.Kind(), toolsrc.StateNotServed
			}
			if src := findSource(rep, false, p.Name); src != nil && p.Error == "" {
				r.State = src.State
				if src.Error != "" {
					r.Error = src.Error
				}
				for _, t := range src.Tools {
					if t.Name != "" {
						r.Tools++
					}
				}
			}
			rows = append(rows, r)
		}
	}
	return out.Result(rows, func(w io.Writer) {
		for _, r := range rows {
			version := ""
			if r.Manifest != nil {
				version = r.Manifest.Version
			}
			fmt.Fprintf(w, "%-10s %-16s %-8s %-8s %-12s %3d tools", r.Tier, r.Name, version, r.Kind, r.State, r.Tools)
			if r.Error != "" {
				fmt.Fprintf(w, "  (%s)", r.Error)
			}
			fmt.Fprintln(w)
		}
	})
}

func pluginRm(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx plugin rm", "ctx plugin rm NAME [--home] [--root DIR] [--json]",
		"Remove <tier>/plugins/NAME and refresh: its tool/plugin.NAME.* objects go away.")
	c := commonFlags(fs)
	home := fs.Bool("home", false, "your own tier instead of the system tier")
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	ref := tierFlag(c, *home)
	if err := toolsrc.RemovePlugin(ref, pos[0]); err != nil {
		return out.Fail(err)
	}
	_, rerr := toolsrc.Refresh(ctx, ref)
	res := withRefresh(map[string]any{"ok": true, "tier": ref.Name(), "plugin": pos[0]}, rerr)
	return out.Result(res, func(w io.Writer) {
		fmt.Fprintf(w, "removed plugin %s from %s\n", pos[0], ref.PluginsDir())
		if rerr != nil {
			fmt.Fprintf(w, "refresh: %s: %v\n", abi.CodeOf(rerr), rerr)
		}
	})
}
