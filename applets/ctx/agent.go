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
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/tree"
)

func init() {
	groups["agent"] = &cli.Cmd{Name: "agent", Summary: "agent objects", Subs: []*cli.Cmd{
		{Name: "create", Summary: "create agent/NAME with its control files and policy", Run: agentCreate},
		{Name: "ls", Summary: "list agents and their status", Run: agentLs},
		{Name: "show", Summary: "show an agent's control files", Run: agentShow},
	}}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func agentCreate(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx agent create", "ctx agent create NAME --model P/M [--label L] [--tool T]… [--cwd DIR] [--iso PROFILE] [--allow-missing]",
		`Create agent/NAME and agent/NAME.d/ with every control file. The policy
gets exactly: allow <type> model:P/M use, and allow <type> tool:T execute for
each --tool. The type comes from the label (default user_u:agent_r:NAME_t:s0).
A --model that is in no model tier or a --tool that is not on the agent's
CTX_PATH is ENOENT naming it, and nothing is written, unless --allow-missing
(for a model or tool you add afterwards).`)
	c := commonFlags(fs)
	var models, tools multi
	fs.Var(&models, "model", "model provider/model (repeatable; the first is the default)")
	fs.Var(&tools, "tool", "tool the agent may execute (repeatable)")
	label := fs.String("label", "", "agent label user:role:type:level")
	cwd := fs.String("cwd", "", "working directory, bound read-write at the same path in the sandbox (default: the sandbox's root, .d/root)")
	iso := fs.String("iso", "", "isolation profile: shared (default), uid (needs root) or userns")
	allowMissing := fs.Bool("allow-missing", false, "create the agent although a --model or --tool does not exist yet")
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	if *cwd != "" {
		if *cwd, err = filepath.Abs(*cwd); err != nil {
			return out.Fail(err)
		}
	}
	a, err := agent.Create(agent.Spec{Name: pos[0], Root: c.Root(), Model: models, Label: *label, Tools: tools, Cwd: *cwd,
		Owner: os.Getuid(), UID: os.Getuid(), GID: os.Getgid(), Iso: *iso, AllowMissing: *allowMissing})
	if err != nil {
		return out.Fail(err)
	}
	r, err := agent.Inspect(a.Object.Path, os.Geteuid(), os.Getegid())
	if err != nil {
		return out.Fail(err)
	}
	return out.Result(agentView(r), func(w io.Writer) { fmt.Fprintf(w, "created %s\n", a.Object.Path) })
}

// agentSummary is one row of ctx agent ls.
type agentSummary struct {
	Name   string   `json:"name"`
	Path   string   `json:"path"`
	Status string   `json:"status"`
	Label  string   `json:"label"`
	Model  []string `json:"model"`
	PID    int      `json:"pid,omitempty"`
	Error  string   `json:"error,omitempty"`
}

func agentLs(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx agent ls", "ctx agent ls [--json]", "List the agents of the system tier.")
	c := commonFlags(fs)
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	entries, err := tree.List(c.Root(), os.Getuid())
	if err != nil {
		return out.Fail(err)
	}
	rows := []agentSummary{}
	for _, e := range entries {
		if e.Class != "agent" && !(e.Error != "" && strings.Contains(e.Path, "/agent/")) {
			continue
		}
		row := agentSummary{Name: e.Name, Path: e.Path, Status: e.Status, Error: e.Error, Model: []string{}}
		if a, err := agent.Open(e.Path); err == nil {
			row.Label, row.Model = a.Label, a.Models
			if pid, ok := agent.Running(a); ok {
				row.PID = pid // a stale .d/pid is no process of the agent's
			}
			row.Status = a.State()
			if err := a.MissingRefs(); err != nil && row.Error == "" {
				row.Error = err.Error()
			}
		} else if row.Error == "" {
			row.Error = err.Error()
		}
		rows = append(rows, row)
	}
	return out.Result(rows, func(w io.Writer) {
		for _, r := range rows {
			status, why := r.Status, ""
			if r.Error != "" {
				status, why = "broken", "  ("+r.Error+")"
			}
			fmt.Fprintf(w, "%-20s %-8s %-32s %s%s\n", r.Name, status, r.Label, strings.Join(r.Model, ","), why)
		}
	})
}

func agentShow(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx agent show", "ctx agent show NAME|PATH [--root DIR] [--json]",
		`Show an agent's control files and the sandbox ctx-agent would build for it
when run by you (profile, identity, root, cwd, network, mounts, CTX_PATH), or
why it cannot start (a bad control file, a missing root or mount source, a
profile you may not use).`)
	c := commonFlags(fs)
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	p, err := agentPath(c.Root(), pos[0])
	if err != nil {
		return out.Fail(err)
	}
	r, err := agent.Inspect(p, os.Geteuid(), os.Getegid())
	if err != nil {
		return out.Fail(err)
	}
	v := agentView(r)
	return out.Result(v, func(w io.Writer) {
		fmt.Fprintf(w, "%s\n", r.Object.Path)
		files := v["files"].(map[string]string)
		for _, k := range agent.ControlFiles {
			body := strings.TrimRight(files[k], "\n")
			if strings.Contains(body, "\n") {
				body = "\n    " + strings.ReplaceAll(body, "\n", "\n    ")
			}
			fmt.Fprintf(w, "  %-9s %s\n", k, body)
		}
		if r.Agent != nil {
			if err := r.Agent.MissingRefs(); err != nil {
				fmt.Fprintf(w, "broken: %v\n", err)
			}
		}
		printSandbox(w, r)
	})
}

// printSandbox is the human form of an agent's sandbox.
func printSandbox(w io.Writer, r *agent.Report) {
	fmt.Fprintf(w, "sandbox (as uid %d runs it)\n", os.Geteuid())
	if r.Err != nil {
		fmt.Fprintf(w, "  cannot start: %s %v\n", abi.CodeOf(r.Err), r.Err)
		return
	}
	sb := r.Sandbox
	userns := "no"
	if sb.UserNS {
		userns = "yes"
	}
	network := "no (loopback only)"
	if sb.Network {
		network = "yes (policy allows network:default connect)"
	}
	fmt.Fprintf(w, "  profile   %s (user namespace: %s)\n", sb.Profile, userns)
	fmt.Fprintf(w, "  identity  uid %d gid %d groups %v (outside: uid %d gid %d)\n", sb.UID, sb.GID, sb.Groups, sb.HostUID, sb.HostGID)
	fmt.Fprintf(w, "  root      %s\n  cwd       %s\n  network   %s\n  mounts\n", sb.Root, sb.Cwd, network)
	for _, m := range sb.Mounts {
		from := "(the sandbox's own)"
		if m.Kind == "bind" {
			from = fmt.Sprintf("%s  %s  line %d", m.Source, strings.Join(m.Options, ","), m.Line)
		}
		fmt.Fprintf(w, "    %-6s %-24s %s  %s\n", m.Kind, m.Target, m.Mode, from)
	}
	fmt.Fprintf(w, "  CTX_PATH  %s\n", strings.Join(sb.CtxPath, ":"))
}

// agentView is the JSON shape of one agent: identity, the parsed facts,
// every control file's raw content (log excluded: it grows) and the
// sandbox it would get, or why it cannot start.
func agentView(r *agent.Report) map[string]any {
	files := map[string]string{}
	for _, f := range agent.ControlFiles {
		if f == "log" {
			continue
		}
		b, _ := r.Object.ReadCtl(f)
		files[f] = string(b)
	}
	v := map[string]any{"ok": true, "name": r.Object.Name, "path": r.Object.Path, "files": files}
	if a := r.Agent; a != nil {
		pid, ok := agent.Running(a)
		if !ok {
			pid = 0 // a stale .d/pid is no process of the agent's
		}
		for k, x := range map[string]any{"label": a.Label, "type": a.Type, "model": a.Models, "status": a.State(),
			"pid": pid, "cwd": a.Cwd, "ctx_path": a.Path, "iso": a.Iso,
			"owner": a.Owner, "uid": a.UID, "gid": a.GID, "groups": a.Groups, "home": a.Home()} {
			v[k] = x
		}
	}
	if r.Err != nil {
		v["sandbox"] = map[string]any{"can_start": false, "error": map[string]string{"code": string(abi.CodeOf(r.Err)), "message": r.Err.Error()}}
	} else {
		v["sandbox"] = struct {
			CanStart bool `json:"can_start"`
			*agent.Sandbox
		}{true, r.Sandbox}
	}
	return v
}

// agentPath is agent/NAME under root for a bare NAME, else a path or a
// tree-relative name (agent/NAME, home/UID/agent/NAME), see tree.Locate.
func agentPath(root tree.Root, name string) (string, error) {
	if !strings.Contains(name, "/") {
		return root.Path(tree.AgentDir, name), nil
	}
	return root.Locate(name)
}
