package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/model/provider"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Tool is a tool found on CTX_PATH: the executable file and the .d/ of the
// directory that held it.
type Tool struct {
	Name string
	File string // the executable that won the lookup: absolute, symlinks resolved, what runs
	Ctl  string // the .d/ beside the name found on CTX_PATH
}

// ReadCtl reads a small control file of the tool; missing, unreadable,
// oversized or anything but a regular file reached without a symlink is
// empty (and an empty policy denies).
func (t Tool) ReadCtl(f string) []byte {
	d, err := safefs.OpenRoot(t.Ctl)
	if err != nil {
		return nil
	}
	defer d.Close()
	b, err := d.ReadFile(f, abi.MaxControlFile)
	if err != nil {
		return nil
	}
	return b
}

// LookupTool searches CTX_PATH left to right for the first file called
// name that the agent's identity (.d/uid, .d/gid, .d/groups) may execute by
// its mode bits; files it may not execute are not hits. Nothing found is
// ENOENT, only non-executable files found is EACCES (the execute bit
// refused). The result names the resolved file, so what runs is what was
// checked.
func (a *Agent) LookupTool(name string) (Tool, error) {
	if err := abi.ValidName(name); err != nil {
		return Tool{}, err
	}
	sawFile := false
	for _, dir := range a.Path {
		if !filepath.IsAbs(dir) {
			continue // refused at load; never resolved against a cwd
		}
		p := filepath.Join(dir, name)
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(real, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		sawFile = true
		if !a.allows(&st, 1) || unix.Access(real, unix.X_OK) != nil {
			continue // the agent's identity, and this process, must both be able to run it
		}
		return Tool{Name: name, File: real, Ctl: abi.CtlDir(p)}, nil
	}
	if sawFile {
		return Tool{}, abi.Errorf(abi.EACCES, "tool %s: not executable for this agent", name)
	}
	return Tool{}, abi.Errorf(abi.ENOENT, "tool %s: not found on CTX_PATH", name)
}

// AuthorizeTool applies the seed's checks in order after the lookup (the
// execute bit for the agent's identity): the agent's policy must have
// allow <type> tool:<name> execute, and so must the tool's own .d/policy
// (default deny: an empty or unreadable one allows nobody). Any refusal is
// EACCES. Prompt text and model output play no part: only files decide.
func (a *Agent) AuthorizeTool(name string) (Tool, error) {
	t, err := a.LookupTool(name)
	if err != nil {
		return Tool{}, err
	}
	if err := a.ToolPolicyAllows(name, t.ReadCtl("policy")); err != nil {
		return Tool{}, err
	}
	return t, nil
}

// ToolPolicyAllows is the policy half of AuthorizeTool (steps 5 and 6 of
// the seed's check order), given the bytes of the tool's own .d/policy as
// the caller read them: the agent's policy must have allow <type>
// tool:<name> execute, and so must the tool's own policy (default deny:
// an empty or unreadable one allows nobody). Any refusal is EACCES. The per-agent
// view of fs/ decides visibility with this same function, so what an agent
// sees under tool/ is what it may run.
func (a *Agent) ToolPolicyAllows(name string, ownPolicy []byte) error {
	if err := a.Policy.Check(a.Type, policy.ClassTool, name, "execute"); err != nil {
		return abi.Errorf(abi.EACCES, "tool %s refused by agent %s's policy: %v", name, a.Name, err)
	}
	own, err := policy.Parse(ownPolicy)
	if err != nil {
		return abi.Errorf(abi.EACCES, "tool %s: its own .d/policy is invalid, refusing: %v", name, err)
	}
	if !own.Allowed(a.Type, policy.ClassTool, name, "execute") {
		return abi.Errorf(abi.EACCES, "tool %s refused by the tool's own .d/policy for %s", name, a.Type)
	}
	return nil
}

// Cred is the agent's runtime identity for mode-bit checks: .d/uid,
// .d/gid and .d/groups.
func (a *Agent) Cred() policy.Cred {
	c := policy.Cred{UID: uint32(a.UID), GID: uint32(a.GID)}
	for _, g := range a.Groups {
		c.Groups = append(c.Groups, uint32(g))
	}
	return c
}

// AuthorizeMounts checks every line of .d/mount against the agent's
// policy: allow <type> mount:<name> read for an ro mount, write for an rw
// one (name: policy.Mount.PolicyName, the last component of the target).
// The runtime refuses to run an agent whose view its policy does not
// allow; the sandbox (ns/) applies the same check where it mounts.
func (a *Agent) AuthorizeMounts() error {
	for _, m := range a.Mounts {
		if err := a.Policy.Check(a.Type, policy.ClassMount, m.PolicyName(), m.PolicyPerm()); err != nil {
			return abi.Errorf(abi.EACCES, "agent %s: mount %s (%s): %v", a.Name, m.Target, m.Mode, err)
		}
	}
	return nil
}

// AuthorizeModel checks allow <type> model:<id> use.
func (a *Agent) AuthorizeModel(id string) error {
	if err := a.Policy.Check(a.Type, policy.ClassModel, id, "use"); err != nil {
		return abi.Errorf(abi.EACCES, "model %s refused by agent %s's policy: %v", id, a.Name, err)
	}
	return nil
}

// VisibleTools lists the names on CTX_PATH (first executable wins) that
// this agent may execute, sorted.
func (a *Agent) VisibleTools() []Tool {
	seen := map[string]bool{}
	var out []Tool
	for _, dir := range a.Path {
		es, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range es {
			n := e.Name()
			if seen[n] || strings.HasSuffix(n, abi.CtlSuffix) || strings.HasSuffix(n, abi.SockSuffix) || abi.ValidName(n) != nil {
				continue
			}
			t, err := a.AuthorizeTool(n)
			if abi.CodeOf(err) == abi.ENOENT {
				continue
			}
			seen[n] = true
			if err == nil {
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ToolSpecs describes the visible, allowed tools for the model: name,
// .d/description and the "input" member of .d/schema.
func (a *Agent) ToolSpecs() []model.ToolSpec {
	var out []model.ToolSpec
	for _, t := range a.VisibleTools() {
		spec := model.ToolSpec{Name: t.Name, Description: strings.TrimSpace(string(t.ReadCtl("description")))}
		var doc map[string]json.RawMessage
		if json.Unmarshal(t.ReadCtl("schema"), &doc) == nil && len(doc["input"]) > 0 {
			spec.Parameters = doc["input"]
		} else {
			spec.Parameters = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, spec)
	}
	return out
}

// ModelObject resolves a model id in the system tier, else the owner's.
func (a *Agent) ModelObject(id string) (tree.Object, error) {
	for _, p := range []string{a.Root.ModelPath(id), filepath.Join(a.Root.Home(a.Owner), tree.ModelDir, filepath.FromSlash(id))} {
		o, err := tree.Resolve(p)
		if err == nil {
			return o, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && abi.CodeOf(err) != abi.ENOENT {
			return tree.Object{}, err
		}
	}
	return tree.Object{}, abi.Errorf(abi.ENOENT, "model %s not found", id)
}

// refuseUnoffered is the refusal of a tool call for a tool that was not
// offered to the model: always EACCES (seed: without allow … execute,
// return EACCES), naming the reason the tool was not offered when there
// is one. Nothing is executed.
func (a *Agent) refuseUnoffered(name string) error {
	if err := abi.ValidName(name); err != nil {
		return abi.Errorf(abi.EACCES, "tool call refused: %q is not a tool name offered to this agent", trunc(name))
	}
	if _, err := a.AuthorizeTool(name); err != nil {
		return abi.Errorf(abi.EACCES, "tool %s was not offered to this agent: %v", name, err)
	}
	return abi.Errorf(abi.EACCES, "tool %s was not offered to this agent in this run", name)
}

// DecodeToolName maps a tool-call name back to a CortexFS tool name. An
// offered name is kept. Otherwise, when exactly one known tool name — on
// CTX_PATH (executable or not), in the agent's policy, or offered — has
// that provider encoding (provider.WireToolName, "shell.exec" →
// "shell_exec") and no tool is called by the name itself, that tool's
// name is returned; anything else is kept as is.
func (a *Agent) DecodeToolName(name string, offered map[string]bool) string {
	if offered[name] || name == "" {
		return name
	}
	known := map[string]bool{}
	for n := range offered {
		known[n] = true
	}
	for _, r := range a.Policy.Of(a.Type) {
		if r.Class == policy.ClassTool {
			known[r.Object] = true
		}
	}
	for _, dir := range a.Path {
		es, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range es {
			if n := e.Name(); !strings.HasSuffix(n, abi.CtlSuffix) && !strings.HasSuffix(n, abi.SockSuffix) && abi.ValidName(n) == nil {
				known[n] = true
			}
		}
	}
	if known[name] {
		return name // a tool really has this name: never second-guess it
	}
	found := ""
	for n := range known {
		if provider.WireToolName(n) == name {
			if found != "" {
				return name // ambiguous
			}
			found = n
		}
	}
	if found == "" {
		return name
	}
	return found
}

// toolObject is the events.jsonl object of a tool call; a name that is
// not a valid tool name is not copied into the log.
func toolObject(name string) string {
	if abi.ValidName(name) != nil {
		return "tool/?"
	}
	return "tool/" + name
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
