package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tool"
	"github.com/cortexfs/cortexfs/core/tree"
)

func init() { tool.RegisterAgentOps(toolOps) }

// CreateRequest is the input of the agent.create tool (the seed's example).
type CreateRequest struct {
	Name   string              `json:"name"`
	Label  string              `json:"label,omitempty"`
	Model  []string            `json:"model,omitempty"`
	Tools  []string            `json:"tools,omitempty"`
	Shared map[string][]string `json:"shared,omitempty"`
	Mount  [][]string          `json:"mount,omitempty"` // [view path as the parent sees it, child target, ro|rw]
	Groups []int               `json:"groups,omitempty"`
}

// CreateChild creates a child agent under the parent's policy, enforcing
// attenuation: the parent needs allow <type> agent:<name> create; the
// child's label is a fresh one (named by no policy and no other agent) or
// the parent's own; every permission of the child's policy is one the
// parent effectively has — for a tool, every check of the seed's order
// (execute bit for the parent's identity, the parent's policy, the tool's
// own policy); groups and mounts are within the parent's. Widening is
// EACCES, an invalid name EINVAL. The child gets the seed's defaults: the
// parent's owner, uid and gid, iso=shared, life=owned, a label of its own,
// and by default the parent's mounts read-only. There is no supervisor in
// this build, so nothing grants more.
func CreateChild(parent *Agent, who ToolCaller, req CreateRequest) (*Agent, error) {
	if err := abi.ValidName(req.Name); err != nil {
		return nil, err
	}
	if err := parent.Policy.Check(parent.Type, policy.ClassAgent, req.Name, "create"); err != nil {
		return nil, err
	}
	spec := Spec{Name: req.Name, Root: parent.Root, Runner: parent.Object.Meta.Runner, Label: req.Label,
		Model: req.Model, Tools: req.Tools, Cwd: parent.Cwd, Owner: parent.Owner, UID: parent.UID, GID: parent.GID,
		Groups: req.Groups, Life: LifeOwned, Path: parent.Path, Env: parent.Env, Iso: childIso(parent.Iso),
		Parent: strings.TrimSpace("agent:" + parent.Name + " " + field("session", who.Session) + " " + field("run", who.Run))}
	if len(spec.Model) == 0 {
		spec.Model = parent.Models[:min(1, len(parent.Models))]
	}
	if strings.HasSuffix(spec.Label, "_t") && !strings.Contains(spec.Label, ":") {
		spec.Label = "user_u:agent_r:" + spec.Label + ":s0"
	}
	mounts, err := childMounts(parent, req.Mount)
	if err != nil {
		return nil, err
	}
	if err := policy.AttenuateMounts(parent.Mounts, mounts); err != nil {
		return nil, err
	}
	if err := parent.AuthorizeMounts(); err != nil {
		return nil, err // the parent must effectively hold what the child's view derives from
	}
	spec.Mounts = mounts
	if err := spec.fill(); err != nil {
		return nil, err
	}
	typ, _ := policy.SubjectType(spec.Label)
	if err := parent.freshLabel(typ); err != nil {
		return nil, err
	}
	if err := addShared(spec.Policy, typ, req.Shared); err != nil {
		return nil, err
	}
	// Mount lines are justified by the mount attenuation above (names
	// follow each mount's own target); everything else must be a line,
	// and an effective permission, of the parent.
	var rest []policy.Rule
	for _, r := range spec.Policy.Rules {
		if r.Class != policy.ClassMount {
			rest = append(rest, r)
		}
	}
	others, err := policy.New(rest...)
	if err != nil {
		return nil, err
	}
	if err := policy.AttenuatePolicy(parent.Policy, parent.Type, others, typ); err != nil {
		return nil, err
	}
	if err := parent.effective(others); err != nil {
		return nil, err
	}
	if err := policy.AttenuateGroups(parent.Groups, spec.Groups); err != nil {
		return nil, err
	}
	spec.Cwd = childCwd(parent.Cwd, mounts)
	// What the child names is what the parent holds (attenuation above);
	// whether it exists is the parent's concern, as before.
	spec.AllowMissing = true
	return Create(spec)
}

func field(k, v string) string {
	if v == "" {
		return ""
	}
	return k + ":" + v
}

func addShared(p *policy.Policy, typ string, shared map[string][]string) error {
	names := make([]string, 0, len(shared))
	for n := range shared {
		names = append(names, n)
	}
	sort.Strings(names)
	rules := p.Rules
	for _, n := range names {
		for _, perm := range shared[n] {
			rules = append(rules, policy.Rule{Subject: typ, Class: policy.ClassShared, Object: n, Perm: perm})
		}
	}
	q, err := policy.New(rules...)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

func childMounts(parent *Agent, req [][]string) ([]policy.Mount, error) {
	if req == nil {
		out := make([]policy.Mount, 0, len(parent.Mounts))
		for _, m := range parent.Mounts {
			m.Mode, m.Line = policy.ModeRO, 0
			out = append(out, m)
		}
		return out, nil
	}
	out := []policy.Mount{}
	for i, m := range req {
		if len(m) != 3 {
			return nil, abi.Errorf(abi.EINVAL, "mount[%d]: want [view, target, ro|rw]", i)
		}
		d, err := policy.DeriveMount(parent.Mounts, m[0], m[1], m[2])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// child opens a child of parent for start/stop: the parent needs allow
// <type> agent:<name> <perm>, and the child's .d/parent must name it.
func child(parent *Agent, name, perm string) (*Agent, error) {
	if err := abi.ValidName(name); err != nil {
		return nil, err
	}
	if err := parent.Policy.Check(parent.Type, policy.ClassAgent, name, perm); err != nil {
		return nil, err
	}
	c, err := Open(parent.Root.Path(tree.AgentDir, name))
	if err != nil {
		return nil, err
	}
	if f := strings.Fields(c.Parent); len(f) == 0 || f[0] != "agent:"+parent.Name {
		return nil, abi.Errorf(abi.EACCES, "agent %s is not a child of %s", name, parent.Name)
	}
	return c, nil
}

// childCwd is the child's .d/cwd: the parent's, when one of the child's
// mounts shows it inside the child's sandbox, else the child's root ("/")
// — a cwd outside every mount would keep the child from starting.
func childCwd(parent string, mounts []policy.Mount) string {
	for _, m := range mounts {
		if _, ok := below(parent, m.Target); ok {
			return parent
		}
	}
	return "/"
}

// childIso is a child's isolation profile. The seed's default is shared,
// which runs the child as whoever launches it: under a root launcher that
// is root, a wider identity than a parent confined to its own uid. A child
// therefore keeps its parent's profile when that is uid or userns.
func childIso(parent string) string {
	if parent == IsoUID || parent == IsoUserNS {
		return parent
	}
	return IsoShared
}

// agentOp runs agent.create, agent.start or agent.stop with a as the
// parent, for the run who. It runs in the launcher, outside the sandbox,
// with the parent as the tree holds it: the tool inside only relays the
// request (relay.go), so nothing the agent controls decides.
func (a *Agent) agentOp(ctx context.Context, who ToolCaller, op string, args json.RawMessage) (any, error) {
	if op == ToolCallOp {
		return a.toolCall(ctx, who, args)
	}
	var req CreateRequest
	if err := json.Unmarshal(args, &req); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "agent.%s: %v", op, err)
	}
	switch op {
	case "create":
		c, err := CreateChild(a, who, req)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": c.Name, "path": c.Object.Path, "label": c.Label, "parent": c.Parent, "status": c.Status()}, nil
	case "start":
		c, err := child(a, req.Name, "start")
		if err != nil {
			return nil, err
		}
		owner := 0
		if c.Life == LifeOwned {
			owner = who.PID
		}
		pid, err := Start(ctx, c, owner)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": c.Name, "pid": pid, "status": c.Status()}, nil
	case "stop":
		c, err := child(a, req.Name, "stop")
		if err != nil {
			return nil, err
		}
		if err := Stop(c, 10*time.Second); err != nil {
			return nil, err
		}
		return map[string]any{"name": c.Name, "status": c.Status()}, nil
	}
	return nil, abi.Errorf(abi.EINVAL, "unknown agent op %q", op)
}

// freshLabel accepts the parent's own type, or a type nothing yet refers
// to: no agent of the tree is labelled with it and no policy an agent's
// checks read (an agent's .d/policy, a tool's own .d/policy on the
// parent's CTX_PATH or in the tree's tool/) names it. A label that is
// already in use carries whatever those files grant it, so a child taking
// it would gain authority its parent does not have.
func (a *Agent) freshLabel(typ string) error {
	if typ == a.Type {
		return nil
	}
	if where := a.typeUsed(typ); where != "" {
		return abi.Errorf(abi.EACCES, "attenuation: label type %s is not fresh (%s); a child takes a fresh label or its parent's own", typ, where)
	}
	return nil
}

func (a *Agent) typeUsed(typ string) string {
	agentDirs := []string{a.Root.Path(tree.AgentDir), filepath.Join(a.Root.Home(a.Owner), tree.AgentDir)}
	for _, dir := range agentDirs {
		for _, ctl := range ctlDirs(dir) {
			if t, err := policy.SubjectType(string(readSmall(ctl, "label"))); err == nil && t == typ {
				return "agent " + strings.TrimSuffix(filepath.Base(ctl), abi.CtlSuffix) + " has it"
			}
			if policyNames(readSmall(ctl, "policy"), typ) {
				return "agent " + strings.TrimSuffix(filepath.Base(ctl), abi.CtlSuffix) + "'s policy names it"
			}
		}
	}
	toolDirs := append([]string{a.Root.Path(tree.ToolDir)}, a.Path...)
	for _, dir := range toolDirs {
		for _, ctl := range ctlDirs(dir) {
			if policyNames(readSmall(ctl, "policy"), typ) {
				return "tool " + strings.TrimSuffix(filepath.Base(ctl), abi.CtlSuffix) + "'s own policy names it"
			}
		}
	}
	return ""
}

// ctlDirs lists the name.d/ directories in dir.
func ctlDirs(dir string) []string {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if e.IsDir() && strings.HasSuffix(e.Name(), abi.CtlSuffix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// readSmall reads ctl/file as a control file (no symlinks, bounded);
// anything unreadable is empty.
func readSmall(ctl, file string) []byte {
	b, err := safefs.ReadFile(filepath.Join(ctl, file), abi.MaxControlFile)
	if err != nil {
		return nil
	}
	return b
}

// policyNames reports whether a policy file has a rule for subject typ;
// an unparsable one is treated as naming it (fail closed).
func policyNames(b []byte, typ string) bool {
	if len(b) == 0 {
		return false
	}
	p, err := policy.Parse(b)
	if err != nil {
		return true
	}
	return len(p.Of(typ)) > 0
}

// effective checks that the parent really has each permission of a child
// policy, not only an allow line for it: a tool must pass every check of
// AuthorizeTool for the parent, a model AuthorizeModel, a shared space
// must exist and be usable by the parent's identity.
func (a *Agent) effective(child *policy.Policy) error {
	for _, r := range child.Rules {
		var err error
		switch r.Class {
		case policy.ClassTool:
			_, err = a.AuthorizeTool(r.Object)
		case policy.ClassModel:
			err = a.AuthorizeModel(r.Object)
		case policy.ClassShared:
			err = a.sharedUsable(r.Object, r.Perm)
		}
		if err != nil {
			return abi.Errorf(abi.EACCES, "attenuation: the parent cannot %s %s:%s itself: %v", r.Perm, r.Class, r.Object, err)
		}
	}
	return nil
}

// sharedUsable checks a shared space exists and the parent's identity may
// read (and for write, write) it by its mode bits.
func (a *Agent) sharedUsable(space, perm string) error {
	p := a.Root.Path(tree.SharedDir, space)
	want := uint32(5)
	if perm == "write" {
		want = 7
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.IsDir() {
		return abi.Errorf(abi.ENOENT, "shared space %s does not exist", space)
	}
	if !a.modeAllows(p, want) {
		return abi.Errorf(abi.EACCES, "shared space %s: mode bits refuse uid %d", space, a.UID)
	}
	return nil
}

// ownerProcess is the process a life=owned child started on its own
// (ctx-agent start) is tied to: the running process of the agent its
// .d/parent names ("agent:<name> …"). A child whose parent is not running
// is not started (EHOSTDOWN): it would be cancelled at once. 0 means the
// agent is not an owned child of an agent.
func ownerProcess(a *Agent) (int, error) {
	if a.Life != LifeOwned {
		return 0, nil
	}
	f := strings.Fields(a.Parent)
	if len(f) == 0 || !strings.HasPrefix(f[0], "agent:") {
		return 0, nil
	}
	name := strings.TrimPrefix(f[0], "agent:")
	if err := abi.ValidName(name); err != nil {
		return 0, abi.Errorf(abi.EINVAL, "agent %s: .d/parent names an invalid agent %q", a.Name, name)
	}
	p, err := Open(a.Root.Path(tree.AgentDir, name))
	if err != nil {
		return 0, abi.Errorf(abi.CodeOf(err), "agent %s: its parent %s: %w", a.Name, name, err)
	}
	pid, ok := Running(p)
	if !ok {
		return 0, abi.Errorf(abi.EHOSTDOWN, "agent %s is an owned child of %s, which is not running", a.Name, name)
	}
	return pid, nil
}
