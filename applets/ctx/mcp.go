package ctx

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/toolsrc"
)

func init() {
	groups["mcp"] = &cli.Cmd{Name: "mcp", Summary: "MCP servers projected as tools", Subs: []*cli.Cmd{
		{Name: "add", Summary: "add an MCP server (-- COMMAND… over stdio, or --url URL)", Run: mcpAdd},
		{Name: "ls", Summary: "list MCP servers and their state", Run: mcpLs},
		{Name: "rm", Summary: "remove an MCP server and its tools", Run: mcpRm},
	}}
}

// tierFlag is --home: the caller's own tier instead of the system tier.
func tierFlag(c common, home bool) toolsrc.TierRef {
	if home {
		return toolsrc.HomeTier(c.Root(), os.Getuid())
	}
	return toolsrc.SystemTier(c.Root())
}

func keyValues(kvs []string, what string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cli.Usagef("--%s %q: want KEY=VALUE", what, kv)
		}
		m[k] = v
	}
	return m, nil
}

func mcpAdd(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx mcp add", "ctx mcp add NAME [--env K=V]… [--home] -- COMMAND [ARG…] | ctx mcp add NAME --url URL [--header K=V]…",
		`Add an MCP server to <tier>/.mcp.json (the system tier, or with --home
your own), then refresh: its tools appear as tool/mcp.NAME.<tool>, kept
warm by cortexfsd. A stdio server is COMMAND [ARG…] after "--"; a
Streamable HTTP server is --url. --env and --header values may be
credentials: they are kept in .mcp.json (mode 0600) and never shown.`)
	c := commonFlags(fs)
	var envs, headers multi
	fs.Var(&envs, "env", "KEY=VALUE in the server's environment (repeatable)")
	fs.Var(&headers, "header", "KEY=VALUE HTTP header for --url servers (repeatable)")
	url := fs.String("url", "", "Streamable HTTP endpoint instead of a command")
	home := fs.Bool("home", false, "your own tier (home/<uid>) instead of the system tier")
	replace := fs.Bool("replace", false, "replace a server of that name")
	pos, err := cli.Parse(fs, args)
	out := cli.Output{Env: env, JSON: *c.json}
	if err == nil {
		err = cli.NArgs(fs, pos, -1)
	}
	if err != nil {
		return out.Fail(err)
	}
	s := toolsrc.ServerConfig{Name: pos[0]}
	if s.Env, err = keyValues(envs, "env"); err != nil {
		return out.Fail(err)
	}
	if s.Headers, err = keyValues(headers, "header"); err != nil {
		return out.Fail(err)
	}
	switch {
	case *url != "" && len(pos) > 1:
		return out.Fail(cli.Usagef("give --url or a command after --, not both"))
	case *url != "":
		s.Transport, s.URL = toolsrc.TransportHTTP, *url
	case len(pos) < 2:
		return out.Fail(cli.Usagef("ctx mcp add %s: give the server's command after -- (or --url URL)", pos[0]))
	default:
		s.Transport, s.Command, s.Args = toolsrc.TransportStdio, pos[1], pos[2:]
	}
	ref := tierFlag(c, *home)
	if err := toolsrc.AddMCPServer(ref, s, *replace); err != nil {
		return out.Fail(err)
	}
	rep, rerr := toolsrc.Refresh(ctx, ref)
	src := findSource(rep, true, s.Name)
	res := withRefresh(map[string]any{"ok": true, "tier": ref.Name(), "config": ref.ConfigFile(), "server": s.Name, "source": src}, rerr)
	return out.Result(res, func(w io.Writer) {
		fmt.Fprintf(w, "added MCP server %s to %s\n", s.Name, ref.ConfigFile())
		printSourceTools(w, src, rep.Served, rerr)
	})
}

// findSource finds an MCP server (mcp) or a plugin (!mcp) in a report.
func findSource(r toolsrc.TierReport, mcp bool, name string) *toolsrc.SourceReport {
	for i := range r.Sources {
		if r.Sources[i].Name == name && (r.Sources[i].Kind == toolsrc.KindMCP) == mcp {
			return &r.Sources[i]
		}
	}
	return nil
}

func printSourceTools(w io.Writer, s *toolsrc.SourceReport, served bool, rerr error) {
	if rerr != nil {
		fmt.Fprintf(w, "refresh: %s: %v\n", abi.CodeOf(rerr), rerr)
	}
	if s == nil {
		return
	}
	if s.Error != "" {
		fmt.Fprintf(w, "%s: %s\n", s.State, s.Error)
	}
	n := 0
	for _, t := range s.Tools {
		if t.Name != "" {
			n++
		}
	}
	fmt.Fprintf(w, "%d tools:\n", n)
	for _, t := range s.Tools {
		if t.Status == "clash" {
			fmt.Fprintf(w, "  CLASH %s: %s\n", t.Original, t.Clash)
			continue
		}
		fmt.Fprintf(w, "  tool/%s  (%s)\n", t.Name, t.Status)
	}
	if !served && s.Kind != toolsrc.KindProcess {
		fmt.Fprintln(w, "no cortexfsd serves this tier: the tools are projected but unavailable until it runs")
	}
}

// mcpRow is one server of ctx mcp ls: never env or header values.
type mcpRow struct {
	Tier       string   `json:"tier"`
	Name       string   `json:"name"`
	Type       string   `json:"type"`
	Command    string   `json:"command,omitempty"`
	Args       []string `json:"args,omitempty"`
	URL        string   `json:"url,omitempty"`
	EnvKeys    []string `json:"env_keys,omitempty"`
	HeaderKeys []string `json:"header_keys,omitempty"`
	State      string   `json:"state"`
	Error      string   `json:"error,omitempty"`
	Tools      int      `json:"tools"`
}

func mcpLs(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx mcp ls", "ctx mcp ls [--root DIR] [--json]",
		"List the MCP servers of the system tier and of your own tier, with their state.")
	c := commonFlags(fs)
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	rows := []mcpRow{}
	for _, ref := range toolsrc.CallerTiers(c.Root(), os.Getuid()) {
		cfg, err := toolsrc.ReadMCPConfig(ref)
		rep := tierReport(ctx, ref)
		if abi.CodeOf(err) == abi.EACCES {
			// .mcp.json is its owner's (0600: it may hold credentials);
			// what the daemon serves is still everyone's to see.
			for _, s := range rep.Sources {
				if s.Kind == toolsrc.KindMCP {
					rows = append(rows, mcpRow{Tier: ref.Name(), Name: s.Name, Type: s.Transport, State: s.State, Error: s.Error, Tools: len(s.Tools)})
				}
			}
			continue
		}
		if err != nil {
			rows = append(rows, mcpRow{Tier: ref.Name(), Name: "?", State: toolsrc.StateFailed, Error: err.Error()})
			continue
		}
		for _, s := range cfg.Servers {
			row := mcpRow{Tier: ref.Name(), Name: s.Name, Type: s.Transport, Command: s.Command, Args: s.Args, URL: s.URL,
				EnvKeys: s.EnvKeys(), HeaderKeys: s.HeaderKeys(), State: toolsrc.StateNotServed}
			if src := findSource(rep, true, s.Name); src != nil {
				row.State, row.Error = src.State, src.Error
				for _, t := range src.Tools {
					if t.Name != "" {
						row.Tools++
					}
				}
			}
			if s.Err != nil {
				row.State, row.Error = toolsrc.StateFailed, s.Err.Error()
			}
			rows = append(rows, row)
		}
	}
	return out.Result(rows, func(w io.Writer) {
		for _, r := range rows {
			what := r.URL
			if r.Type == toolsrc.TransportStdio {
				what = strings.Join(append([]string{r.Command}, r.Args...), " ")
			}
			fmt.Fprintf(w, "%-10s %-16s %-5s %-12s %3d tools  %s", r.Tier, r.Name, r.Type, r.State, r.Tools, what)
			if len(r.EnvKeys) > 0 {
				fmt.Fprintf(w, "  env: %s", strings.Join(r.EnvKeys, ","))
			}
			if r.Error != "" {
				fmt.Fprintf(w, "  (%s)", r.Error)
			}
			fmt.Fprintln(w)
		}
	})
}

// tierReport is the daemon's report when one serves the tier, else what
// the configuration and the projection on disk say.
func tierReport(ctx context.Context, ref toolsrc.TierRef) toolsrc.TierReport {
	if rep, err := toolsrc.Sources(ctx, ref); err == nil {
		return rep
	}
	return toolsrc.Inspect(ref)
}

func mcpRm(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx mcp rm", "ctx mcp rm NAME [--home] [--root DIR] [--json]",
		"Remove an MCP server from .mcp.json and refresh: its tool/mcp.NAME.* objects go away.")
	c := commonFlags(fs)
	home := fs.Bool("home", false, "your own tier instead of the system tier")
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	ref := tierFlag(c, *home)
	if err := toolsrc.RemoveMCPServer(ref, pos[0]); err != nil {
		return out.Fail(err)
	}
	_, rerr := toolsrc.Refresh(ctx, ref)
	res := withRefresh(map[string]any{"ok": true, "tier": ref.Name(), "server": pos[0]}, rerr)
	return out.Result(res, func(w io.Writer) {
		fmt.Fprintf(w, "removed MCP server %s from %s\n", pos[0], ref.ConfigFile())
		if rerr != nil {
			fmt.Fprintf(w, "refresh: %s: %v\n", abi.CodeOf(rerr), rerr)
		}
	})
}

// withRefresh adds a refresh that failed after a successful edit to the
// result (the edit stands; the tools may lag until the next refresh).
func withRefresh(res map[string]any, rerr error) map[string]any {
	if rerr != nil {
		res["refresh_error"] = map[string]string{"code": string(abi.CodeOf(rerr)), "message": rerr.Error()}
	}
	return res
}
