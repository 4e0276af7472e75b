package agent

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
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

// Caller is the agent run a child-agent tool executes for, read from the
// environment the agent runtime gave the tool (ExecTool).
func Caller() (*Agent, ToolCaller, error) {
	p := os.Getenv("CTX_AGENT_OBJECT")
	if p == "" {
		return nil, ToolCaller{}, abi.Errorf(abi.EACCES, "agent tools only run inside an agent (no CTX_AGENT_OBJECT)")
	}
	a, err := Open(p)
	if err != nil {
		return nil, ToolCaller{}, err
	}
	pid, _ := strconv.Atoi(os.Getenv("CTX_AGENT_PID"))
	return a, ToolCaller{Session: os.Getenv("CTX_AGENT_SESSION"), Run: os.Getenv("CTX_AGENT_RUN"), PID: pid}, nil
}

// CreateChild creates a child agent under the parent's policy, enforcing
// attenuation: the parent needs allow <type> agent:<name> create; the
// child's policy (model use, tool execute, shared access), groups and
// mounts must each be within the parent's. Widening is EACCES, an invalid
// name EINVAL. The child gets the seed's defaults: the parent's owner, uid
// and gid, iso=shared, life=owned, a label of its own, and by default the
// parent's mounts read-only.
func CreateChild(parent *Agent, who ToolCaller, req CreateRequest) (*Agent, error) {
	if err := abi.ValidName(req.Name); err != nil {
		return nil, err
	}
	if err := parent.Policy.Check(parent.Type, policy.ClassAgent, req.Name, "create"); err != nil {
		return nil, err
	}
	spec := Spec{Name: req.Name, Root: parent.Root, Runner: parent.Object.Meta.Runner, Label: req.Label,
		Model: req.Model, Tools: req.Tools, Cwd: parent.Cwd, Owner: parent.Owner, UID: parent.UID, GID: parent.GID,
		Groups: req.Groups, Life: LifeOwned, Path: parent.Path, Env: parent.Env,
		Parent: strings.TrimSpace("agent:" + parent.Name + " " + field("session", who.Session) + " " + field("run", who.Run))}
	if len(spec.Model) == 0 {
		spec.Model = parent.Models[:min(1, len(parent.Models))]
	}
	if strings.HasSuffix(spec.Label, "_t") && !strings.Contains(spec.Label, ":") {
		spec.Label = "user_u:agent_r:" + spec.Label + ":s0"
	}
	if err := spec.fill(); err != nil {
		return nil, err
	}
	typ, _ := policy.SubjectType(spec.Label)
	if err := addShared(spec.Policy, typ, req.Shared); err != nil {
		return nil, err
	}
	if err := policy.AttenuatePolicy(parent.Policy, parent.Type, spec.Policy, typ); err != nil {
		return nil, err
	}
	if err := policy.AttenuateGroups(parent.Groups, spec.Groups); err != nil {
		return nil, err
	}
	mounts, err := childMounts(parent, req.Mount)
	if err != nil {
		return nil, err
	}
	spec.Mounts = mounts
	if err := policy.AttenuateMounts(parent.Mounts, spec.Mounts); err != nil {
		return nil, err
	}
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

// toolOps serves the agent.create, agent.start and agent.stop tools.
func toolOps(ctx context.Context, op string, args json.RawMessage) (any, error) {
	parent, who, err := Caller()
	if err != nil {
		return nil, err
	}
	var req CreateRequest
	if err := json.Unmarshal(args, &req); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "%s: %v", op, err)
	}
	switch op {
	case "create":
		c, err := CreateChild(parent, who, req)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": c.Name, "path": c.Object.Path, "label": c.Label, "parent": c.Parent, "status": c.Status()}, nil
	case "start":
		c, err := child(parent, req.Name, "start")
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
		c, err := child(parent, req.Name, "stop")
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
