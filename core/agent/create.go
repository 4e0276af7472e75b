package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Spec is everything an agent is created from. Zero fields get the safe
// defaults of Create.
type Spec struct {
	Name   string
	Root   tree.Root
	Runner string   // shebang interpreter; default: the one of the tree's other objects
	Model  []string // provider/model, first is the default; at least one
	Label  string   // default user_u:agent_r:<name>_t:s0
	Tools  []string // tools the policy allows (tool:<name> execute)
	Cwd    string   // inside the sandbox; default "/", the agent's root (.d/root)
	Owner  int
	UID    int
	GID    int
	Groups []int
	Parent string         // "" or "agent:<name> session:<s> run:<r>"
	Life   string         // default owned
	Iso    string         // isolation profile; default shared
	Mounts []policy.Mount // default: see defaultMounts
	Policy *policy.Policy // default: model use + tool execute lines
	Path   []string       // default DefaultPath
	Meta   map[string]any // extra meta.json members
	Env    []abi.KV       // .d/env
	// AllowMissing creates the agent although a model or tool it names
	// does not exist yet (it arrives later); else that is ENOENT.
	AllowMissing bool
}

// DefaultLabel is the label of an agent created without one.
func DefaultLabel(name string) (string, error) {
	t := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name) + "_t"
	if err := policy.ValidType(t); err != nil {
		return "", abi.Errorf(abi.EINVAL, "agent %q: no default label (give --label): %v", name, err)
	}
	return "user_u:agent_r:" + t + ":s0", nil
}

// HomeDirs are the directories of an agent's home
// home/<owner>/agent/<name>/ (seed "Agent Home").
var HomeDirs = []string{"root", "session", "data", "cache", "log"}

// Create writes agent/<name> and agent/<name>.d/ with every control file
// of the seed, the agent's home home/<owner>/agent/<name>/ with HomeDirs,
// and an allow line for the agent's type in the own .d/policy of each tool
// in Spec.Tools (policy v0 is default deny on both sides). The control
// directory is written first and the object file last, so a half-created
// agent never looks runnable. An existing agent is EEXIST. Everything is
// walked from the root's descriptor without following symlinks
// (core/safefs); run by root for another owner, the home is given to the
// agent's uid and gid. A model or tool that cannot be found is ENOENT
// naming it, with nothing written, unless AllowMissing.
func Create(s Spec) (*Agent, error) {
	if err := s.fill(); err != nil {
		return nil, err
	}
	root, err := safefs.OpenRoot(string(s.Root))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	obj := filepath.Join(tree.AgentDir, s.Name)
	if _, err := root.Lstat(obj); err == nil {
		return nil, abi.Errorf(abi.EEXIST, "agent %s already exists", s.Name)
	}
	if !s.AllowMissing {
		if err := missingRefs(s.Root, s.Owner, s.Path, s.Model, s.Tools); err != nil {
			return nil, abi.Errorf(abi.ENOENT, "agent %s: %w (--allow-missing creates it anyway)", s.Name, err)
		}
	}
	agents, err := root.MkdirAll(tree.AgentDir, tree.DirMode, safefs.Keep)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to create %s: %w", tree.AgentDir, err)
	}
	defer agents.Close()
	// Claim the name: mkdir is atomic, so of two concurrent creates of one
	// name exactly one gets past here and nothing is written twice.
	if err := agents.Mkdir(s.Name+abi.CtlSuffix, tree.DirMode, safefs.Keep); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, abi.Errorf(abi.EEXIST, "agent %s already exists (%s.d is in place)", s.Name, s.Name)
		}
		return nil, abi.Errorf(abi.CodeOf(err), "failed to create %s.d: %w", s.Name, err)
	}
	owner := safefs.Keep
	if os.Geteuid() == 0 && (s.UID != 0 || s.GID != 0) {
		owner = safefs.Owner{UID: s.UID, GID: s.GID}
	}
	homeRel := filepath.Join(tree.HomeDir, strconv.Itoa(s.Owner), tree.AgentDir, s.Name)
	for _, d := range HomeDirs {
		hd, err := root.MkdirAll(filepath.Join(homeRel, d), 0o700, owner)
		if err != nil {
			return nil, abi.Errorf(abi.CodeOf(err), "failed to create agent home: %w", err)
		}
		hd.Close()
	}
	home := filepath.Join(string(s.Root), homeRel)
	for name, content := range s.controls(home) {
		if err := agents.WriteFile(filepath.Join(s.Name+abi.CtlSuffix, name), content, tree.ControlMode, safefs.Keep); err != nil {
			return nil, err
		}
	}
	typ, _ := policy.SubjectType(s.Label)
	for _, t := range s.Tools {
		if err := allowInToolPolicy(s.Path, t, typ); err != nil {
			return nil, err
		}
	}
	meta, err := tree.Meta{Runner: s.Runner, Class: abi.ClassAgent, KV: []abi.KV{
		{Key: "name", Value: s.Name}, {Key: "model", Value: s.Model[0]}, {Key: "label", Value: s.Label},
	}}.Format()
	if err != nil {
		return nil, err
	}
	if err := agents.WriteFile(s.Name, meta, tree.ObjectMode, safefs.Keep); err != nil {
		return nil, err
	}
	return Open(filepath.Join(string(s.Root), obj))
}

// allowInToolPolicy adds "allow <typ> tool:<name> execute" to the own
// .d/policy of the tool name would find first on path (any execute bit).
// A tool not installed yet is skipped: its owner allows the type when it
// arrives. The policy file is appended to without following symlinks,
// and created with the default header when missing (with its .d/, for a
// plain program that has none).
func allowInToolPolicy(path []string, name, typ string) error {
	rule := policy.Rule{Subject: typ, Class: policy.ClassTool, Object: name, Perm: "execute"}
	for _, dir := range path {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		td, err := safefs.OpenRoot(dir)
		if err != nil {
			return abi.Errorf(abi.CodeOf(err), "tool %s: cannot allow %s in its own policy: %w", name, typ, err)
		}
		defer td.Close()
		d, err := td.MkdirAll(name+abi.CtlSuffix, tree.DirMode, safefs.Keep) // a plain program may have no .d/ yet
		if err != nil {
			return abi.Errorf(abi.CodeOf(err), "tool %s: cannot allow %s in its own policy: %w", name, typ, err)
		}
		defer d.Close()
		cur, err := d.ReadFile("policy", abi.MaxControlFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return abi.Errorf(abi.CodeOf(err), "tool %s: cannot allow %s in its own policy: %w", name, typ, err)
		}
		own, err := policy.Parse(cur)
		if err != nil {
			return abi.Errorf(abi.EINVAL, "tool %s: its own .d/policy is invalid: %v", name, err)
		}
		if own.Allowed(typ, rule.Class, name, rule.Perm) {
			return nil
		}
		f, err := d.OpenFile("policy", os.O_WRONLY|os.O_APPEND|os.O_CREATE, tree.ControlMode)
		if err != nil {
			return abi.Errorf(abi.CodeOf(err), "tool %s: cannot allow %s in its own policy: %w", name, typ, err)
		}
		line := rule.String() + "\n"
		if len(cur) == 0 {
			line = tree.ToolPolicyHeader + line
		} else if cur[len(cur)-1] != '\n' {
			line = "\n" + line
		}
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return abi.Errorf(abi.CodeOf(err), "tool %s: failed to write its own policy: %w", name, err)
		}
		return nil
	}
	return nil
}

func (s *Spec) fill() error {
	if err := abi.ValidName(s.Name); err != nil {
		return err
	}
	if len(s.Model) == 0 {
		return abi.Errorf(abi.EINVAL, "agent %s: a model (provider/model) is required", s.Name)
	}
	for _, m := range s.Model {
		if err := abi.ValidModelID(m); err != nil {
			return err
		}
	}
	for _, t := range s.Tools {
		if err := abi.ValidName(t); err != nil {
			return err
		}
	}
	var err error
	if s.Label == "" {
		if s.Label, err = DefaultLabel(s.Name); err != nil {
			return err
		}
	}
	typ, err := policy.SubjectType(s.Label)
	if err != nil {
		return err
	}
	if s.Runner == "" {
		s.Runner = treeRunner(s.Root)
	}
	if s.Life == "" {
		s.Life = LifeOwned
	}
	switch s.Iso {
	case "":
		s.Iso = IsoShared
	case IsoShared, IsoUID, IsoUserNS:
	default:
		return abi.Errorf(abi.EINVAL, "agent %s: iso %q: want shared, uid or userns", s.Name, s.Iso)
	}
	if s.Cwd == "" {
		s.Cwd = "/" // .d/cwd is where the runtime starts inside the sandbox: its root
	}
	if !filepath.IsAbs(s.Cwd) || strings.ContainsAny(s.Cwd, "\n\t\x00") {
		return abi.Errorf(abi.EINVAL, "cwd %q must be an absolute path", s.Cwd)
	}
	if s.Path == nil {
		s.Path = DefaultPath(s.Root, s.Owner)
	}
	if s.Mounts == nil {
		s.Mounts = defaultMounts(s.Root, s.Owner, s.Name, s.Cwd)
	}
	if s.Policy == nil {
		var rules []policy.Rule
		for _, m := range s.Model {
			rules = append(rules, policy.Rule{Subject: typ, Class: policy.ClassModel, Object: m, Perm: "use"})
		}
		for _, t := range s.Tools {
			rules = append(rules, policy.Rule{Subject: typ, Class: policy.ClassTool, Object: t, Perm: "execute"})
		}
		// Each mount of .d/mount is checked at run time (AuthorizeMounts).
		rules = append(rules, policy.MountRules(typ, s.Mounts)...)
		if s.Policy, err = policy.New(rules...); err != nil {
			return err
		}
	}
	return nil
}

// defaultMounts follows the seed's example: the tree read-only, the
// agent's home read-write at /home/agent, and its cwd read-write at the
// same path inside (a cwd of "/" is the root itself).
func defaultMounts(r tree.Root, owner int, name, cwd string) []policy.Mount {
	opts := []string{"rbind", "nosuid", "nodev"}
	home := filepath.Join(r.Home(owner), tree.AgentDir, name)
	ms := []policy.Mount{
		{Source: filepath.Clean(string(r)), Target: "/ctx", Mode: policy.ModeRO, Options: opts},
		{Source: home, Target: "/home/agent", Mode: policy.ModeRW, Options: opts},
	}
	if cwd != "/" && cwd != filepath.Join(home, "root") {
		ms = append(ms, policy.Mount{Source: filepath.Clean(cwd), Target: filepath.Clean(cwd), Mode: policy.ModeRW, Options: opts})
	}
	return ms
}

func (s *Spec) controls(home string) map[string][]byte {
	nl := func(v string) []byte {
		if v == "" {
			return nil
		}
		return []byte(v + "\n")
	}
	groups := ""
	for _, g := range s.Groups {
		groups += strconv.Itoa(g) + "\n"
	}
	env, _ := abi.FormatKV(s.Env)
	meta := map[string]any{"name": s.Name, "created_at": time.Now().UTC().Format(time.RFC3339)}
	for k, v := range s.Meta {
		meta[k] = v
	}
	mj, _ := json.MarshalIndent(meta, "", "  ")
	return map[string][]byte{
		"owner": nl(strconv.Itoa(s.Owner)), "uid": nl(strconv.Itoa(s.UID)), "gid": nl(strconv.Itoa(s.GID)),
		"groups": []byte(groups), "label": nl(s.Label), "iso": nl(s.Iso), "parent": nl(s.Parent),
		"life": nl(s.Life), "root": nl(filepath.Join(home, "root")), "cwd": nl(s.Cwd), "env": env,
		"path": nl(strings.Join(s.Path, ":")), "mount": policy.FormatMountFile(s.Mounts),
		"model": []byte(strings.Join(s.Model, "\n") + "\n"), "policy": s.Policy.Format(),
		"status": nl(StatusStopped), "pid": nil, "log": nil, "meta.json": append(mj, '\n'),
	}
}

// treeRunner is the shebang interpreter the tree's objects already use.
func treeRunner(r tree.Root) string {
	for _, p := range []string{r.ModelPath(tree.EchoModel.ID), r.ToolPath("fs.read")} {
		if o, err := tree.Resolve(p); err == nil {
			return o.Meta.Runner
		}
	}
	return tree.DefaultRunner
}

// Exists reports whether agent/<name> exists under r.
func Exists(r tree.Root, name string) bool {
	_, err := os.Lstat(r.Path(tree.AgentDir, name))
	return !errors.Is(err, fs.ErrNotExist)
}
