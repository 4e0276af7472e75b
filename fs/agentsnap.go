package fs

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/tree"
)

// snapshot is what one agent may see, computed from its control files, its
// policy, its uid/gid/groups and the durable tiers ("Agent View"). It is
// replaced as a whole when any of those change; requests read the current
// one.
type snapshot struct {
	a     *agent.Agent // nil: the agent could not be read, and the view is empty
	err   error        // why a is nil
	cred  policy.Cred
	owner string // home/<owner>: the agent's CTX_HOME tier
	tiers []ctxTier
	// tools are the visible tools by name: the winner of the CTX_PATH
	// lookup that the agent may execute by mode bits and by policy.
	tools map[string]toolHit
	// candidates are the first executable hits, visible or not: their
	// .d/policy decides, so its changes are watched.
	candidates map[string]backing
	shared     map[string]bool // visible shared spaces
}

// ctxTier is one CTX_PATH entry, opened.
type ctxTier struct {
	path  string  // as .d/path names it
	back  backing // valid only when the directory exists
	vpath string  // where the tier shows in the view ("tool", "home/<o>/tool", …), "" when it does not
}

// toolHit is where a visible tool lives.
type toolHit struct {
	dir     backing // the tier directory holding the executable
	hasCtl  bool    // name.d/ exists there
	hasSock bool    // name.sock exists there
}

func (h toolHit) same(o toolHit) bool {
	return h.dir.key() == o.dir.key() && h.hasCtl == o.hasCtl && h.hasSock == o.hasSock
}

// loadSnapshot reads the agent and computes everything but the tools.
func (v *agentView) loadSnapshot() *snapshot {
	s := &snapshot{tools: map[string]toolHit{}, candidates: map[string]backing{}, shared: map[string]bool{}}
	a, err := agent.Open(v.objPath)
	if err != nil {
		s.err = err
		v.m.logf("agent %s cannot be read, its view is empty: %v", v.objPath, err)
		return s
	}
	s.a, s.cred, s.owner = a, a.Cred(), strconv.Itoa(a.Owner)
	root := backing{v.m.root, "."}
	for _, p := range a.Path {
		t := ctxTier{path: p}
		if k, ok := v.tierBacking(p); ok {
			if st, err := k.lstat(); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				t.back = k
			}
		}
		s.tiers = append(s.tiers, t)
	}
	for _, r := range a.Policy.Of(a.Type) {
		if r.Class != policy.ClassShared || s.shared[r.Object] {
			continue
		}
		st, err := root.join(tree.SharedDir, r.Object).lstat()
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && s.cred.Permits(st.Mode&0o7777, st.Uid, st.Gid, true, policy.MayExec) {
			s.shared[r.Object] = true
		}
	}
	for i := range s.tiers {
		s.tiers[i].vpath = s.tierVpath(s.tiers[i].back)
	}
	return s
}

// tierVpath is where a CTX_PATH tier directory shows in the view: the
// tool/ directory of the root, of the agent's home or of a visible shared
// space; "" when it is elsewhere (it still feeds the merged tool/).
func (s *snapshot) tierVpath(k backing) string {
	if !k.valid() || k.b.dir == nil {
		return ""
	}
	parts := strings.Split(k.rel, "/")
	switch {
	case k.rel == tree.ToolDir:
		return tree.ToolDir
	case len(parts) == 3 && parts[0] == tree.HomeDir && parts[1] == s.owner && parts[2] == tree.ToolDir,
		len(parts) == 3 && parts[0] == tree.SharedDir && s.shared[parts[1]] && parts[2] == tree.ToolDir:
		return k.rel
	}
	return ""
}

// tierBacking opens a CTX_PATH entry: beneath the root when it lies there,
// else as a base of its own (opened without following symlinks). Relative
// entries are refused: a lookup relative to some directory is not one the
// view can reproduce.
func (v *agentView) tierBacking(p string) (backing, bool) {
	if !filepath.IsAbs(p) {
		return backing{}, false
	}
	p = filepath.Clean(p)
	if rel, ok := strings.CutPrefix(p, v.m.root.path+"/"); ok {
		return backing{v.m.root, rel}, true
	}
	if p == v.m.root.path {
		return backing{v.m.root, "."}, true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if b := v.bases[p]; b != nil {
		return backing{b, "."}, true
	}
	d, err := openTier(p)
	if err != nil {
		return backing{}, false
	}
	b := &base{dir: d, path: p}
	v.bases[p] = b
	return backing{b, "."}, true
}

// computeTools evaluates every name on CTX_PATH.
func (v *agentView) computeTools(s *snapshot) {
	names := map[string]bool{}
	for _, t := range s.tiers {
		if !t.back.valid() {
			continue
		}
		es, err := t.back.readDir()
		if err != nil {
			continue
		}
		for _, e := range es {
			if toolName(e.Name) && e.Type == unix.S_IFREG {
				names[e.Name] = true
			}
		}
	}
	for n := range names {
		v.evalTool(s, n)
	}
}

// evalTool decides one tool name, in the order of the seed's tool lookup
// and permission checks: the first regular file on CTX_PATH that the
// agent's uid/gid/groups may execute wins (a non-executable file is not a
// hit; the tier directory must be searchable too), then the agent's policy
// and the tool's own .d/policy — from the winner's directory — must allow
// it (Agent.ToolPolicyAllows, the same decision the agent loop applies).
func (v *agentView) evalTool(s *snapshot, name string) {
	delete(s.tools, name)
	delete(s.candidates, name)
	if s.a == nil || !toolName(name) {
		return
	}
	for _, t := range s.tiers {
		if !t.back.valid() {
			continue
		}
		dst, err := t.back.lstat()
		if err != nil || !s.cred.Permits(dst.Mode&0o7777, dst.Uid, dst.Gid, true, policy.MayExec) {
			continue
		}
		st, err := t.back.join(name).lstat()
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if !s.cred.Permits(st.Mode&0o7777, st.Uid, st.Gid, false, policy.MayExec) {
			continue
		}
		s.candidates[name] = t.back
		own, err := t.back.b.dir.ReadFile(path.Join(t.back.rel, name+abi.CtlSuffix, "policy"), abi.MaxControlFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return // unreadable own policy: refused, as the loop refuses it
		}
		if s.a.ToolPolicyAllows(name, own) != nil {
			return
		}
		h := toolHit{dir: t.back}
		if cst, err := t.back.join(name + abi.CtlSuffix).lstat(); err == nil && cst.Mode&unix.S_IFMT == unix.S_IFDIR {
			h.hasCtl = true
		}
		if sst, err := t.back.join(name + abi.SockSuffix).lstat(); err == nil && sst.Mode&unix.S_IFMT == unix.S_IFSOCK {
			h.hasSock = true
		}
		s.tools[name] = h
		return
	}
}

// toolName reports whether a directory entry can be a tool object.
func toolName(n string) bool {
	return !strings.HasSuffix(n, abi.CtlSuffix) && !strings.HasSuffix(n, abi.SockSuffix) && abi.ValidName(n) == nil
}

// splitObject splits an entry name into its object name and the suffix
// of the object triple: "", ".d" or ".sock".
func splitObject(n string) (string, string) {
	for _, suf := range []string{abi.CtlSuffix, abi.SockSuffix} {
		if o, ok := strings.CutSuffix(n, suf); ok && o != "" {
			return o, suf
		}
	}
	return n, ""
}

// modelAllowed is the model half of the view: allow <type> model:<id> use.
func (s *snapshot) modelAllowed(id string) bool {
	return s.a != nil && abi.ValidModelID(id) == nil && s.a.Policy.Allowed(s.a.Type, policy.ClassModel, id, "use")
}

// providerAllowed reports whether any allowed model lies under provider.
func (s *snapshot) providerAllowed(provider string) bool {
	if s.a == nil {
		return false
	}
	for _, r := range s.a.Policy.Of(s.a.Type) {
		if r.Class == policy.ClassModel && r.Perm == "use" && strings.HasPrefix(r.Object, provider+"/") {
			return true
		}
	}
	return false
}

// agentVisible: the agent itself and the agents it may read.
func (s *snapshot) agentVisible(name string) bool {
	return s.a != nil && abi.ValidName(name) == nil &&
		(name == s.a.Name || s.a.Policy.Allowed(s.a.Type, policy.ClassAgent, name, "read"))
}

// metaKey summarizes what the non-tool part of the view depends on; two
// snapshots with the same key show the same models, agents, homes and
// shared spaces.
func (s *snapshot) metaKey() string {
	if s.a == nil {
		return "none"
	}
	var b strings.Builder
	b.WriteString(s.owner + "|" + s.a.Name + "|" + s.a.Type + "|")
	var rules []string
	for _, r := range s.a.Policy.Of(s.a.Type) {
		if r.Class != policy.ClassTool {
			rules = append(rules, r.String())
		}
	}
	var shared []string
	for n := range s.shared {
		shared = append(shared, n)
	}
	sort.Strings(rules)
	sort.Strings(shared)
	b.WriteString(strings.Join(rules, ";") + "|" + strings.Join(shared, ";"))
	return b.String()
}
