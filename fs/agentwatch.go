package fs

import (
	"path"
	"path/filepath"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

// What a structural watch's events make the view recompute.
type scope uint8

const (
	scopeNone  scope = iota
	scopeNames       // the tools named in the events
	scopeMeta        // everything but the tools
	scopeAll         // the agent and everything
)

// structWatch is one durable directory the agent view depends on.
type structWatch struct {
	back  backing
	role  role
	vpath string // where the directory shows in the view, "" if it does not
}

type role uint8

const (
	roleRoot       role = iota // the tree's root: its tier directories
	roleAgentDir               // the directory holding the agent object
	roleAgentCtl               // the agent's .d/
	roleToolTier               // a CTX_PATH tier
	roleToolCtl                // a candidate tool's .d/: its own policy
	roleClassDir               // a tier's model/, model/<provider>/ or agent/
	roleTierDir                // home/, shared/, home/<owner>, shared/<name>
	roleTierParent             // the parent of a CTX_PATH tier that does not exist yet
)

// agentCtlFiles are the control files the view is computed from.
var agentCtlFiles = map[string]bool{"owner": true, "uid": true, "gid": true, "groups": true, "label": true, "path": true, "policy": true}

// desiredWatches lists every directory the snapshot depends on.
func (v *agentView) desiredWatches(s *snapshot) map[string]structWatch {
	out := map[string]structWatch{}
	add := func(k backing, r role, vpath string) {
		if k.valid() {
			if _, dup := out[k.key()]; !dup || r == roleToolTier {
				out[k.key()] = structWatch{k, r, vpath}
			}
		}
	}
	root := backing{v.m.root, "."}
	add(root, roleRoot, "")
	if rel, ok := v.objRel(); ok {
		add(backing{v.m.root, path.Dir(rel)}, roleAgentDir, "")
		add(backing{v.m.root, rel + abi.CtlSuffix}, roleAgentCtl, "")
	}
	if s.a == nil {
		return out
	}
	tiers := []tier{v.rootTier(), {tree.HomeDir + "/" + s.owner, root.join(tree.HomeDir, s.owner)}}
	for n := range s.shared {
		tiers = append(tiers, tier{tree.SharedDir + "/" + n, root.join(tree.SharedDir, n)})
	}
	add(root.join(tree.HomeDir), roleTierDir, tree.HomeDir)
	add(root.join(tree.SharedDir), roleTierDir, tree.SharedDir)
	for _, t := range tiers {
		if t.vpath != "" {
			add(t.back, roleTierDir, t.vpath)
		}
		add(t.back.join(tree.AgentDir), roleClassDir, joinV(t.vpath, tree.AgentDir))
		models := t.back.join(tree.ModelDir)
		add(models, roleClassDir, joinV(t.vpath, tree.ModelDir))
		if es, err := models.readDir(); err == nil {
			for _, e := range es {
				if e.Type == 0o040000 && abi.ValidName(e.Name) == nil {
					add(models.join(e.Name), roleClassDir, joinV(t.vpath, tree.ModelDir+"/"+e.Name))
				}
			}
		}
	}
	for _, t := range s.tiers {
		if t.back.valid() {
			add(t.back, roleToolTier, t.vpath)
		} else if k, ok := v.tierBacking(filepath.Dir(t.path)); ok {
			add(k, roleTierParent, "")
		}
	}
	for name, dir := range s.candidates {
		add(dir.join(name+abi.CtlSuffix), roleToolCtl, "")
	}
	return out
}

// objRel is the agent object's path beneath the root.
func (v *agentView) objRel() (string, bool) {
	p, err := filepath.Abs(v.objPath)
	if err != nil {
		return "", false
	}
	rel, ok := cutPrefixDir(filepath.Clean(p), v.m.root.path)
	return rel, ok && rel != "."
}

func cutPrefixDir(p, dir string) (string, bool) {
	if p == dir {
		return ".", true
	}
	if len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/' {
		return p[len(dir)+1:], true
	}
	return "", false
}

// reconcileWatches adds the watches the snapshot needs and drops the rest.
// A directory that cannot be watched makes the whole view fall back to
// short cache timeouts.
func (v *agentView) reconcileWatches(s *snapshot) {
	want := v.desiredWatches(s)
	v.mu.Lock()
	defer v.mu.Unlock()
	ok := v.m.w != nil
	for key, w := range v.watches {
		if nw, keep := want[key]; !keep || nw.role != w.role {
			v.m.w.remove(key, v)
			delete(v.watches, key)
		}
	}
	for key, w := range want {
		if _, have := v.watches[key]; have {
			v.watches[key] = w
			continue
		}
		d, err := w.back.b.dir.OpenDir(w.back.rel)
		if err != nil {
			continue // not there (yet): its parent's watch sees it come
		}
		w := w
		added := v.m.w.add(d.Fd(), key, v, func(evs []event) { v.onEvents(w, evs) })
		d.Close()
		if !added {
			ok = false
			continue
		}
		v.watches[key] = w
	}
	v.ok = ok
}

// onEvents handles the events of one structural watch.
func (v *agentView) onEvents(w structWatch, evs []event) {
	sc := scopeNone
	names := map[string]bool{}
	var ivs []inval
	raise := func(x scope) {
		if x > sc {
			sc = x
		}
	}
	for _, e := range evs {
		entryChange := e.mask&entryEvents != 0
		switch w.role {
		case roleRoot:
			switch e.name {
			case tree.ModelDir, tree.ToolDir, tree.AgentDir, tree.HomeDir, tree.SharedDir:
				ivs = append(ivs, inval{vpath: "", name: e.name, entry: entryChange, listing: entryChange})
				raise(scopeAll)
			}
		case roleAgentDir:
			if o, _ := v.objRel(); e.name == path.Base(o) || e.name == path.Base(o)+abi.CtlSuffix {
				raise(scopeAll)
			}
		case roleAgentCtl:
			if agentCtlFiles[e.name] || e.name == "" {
				raise(scopeAll)
			}
		case roleToolTier:
			if e.name == "" {
				raise(scopeAll)
				continue
			}
			n, _ := splitObject(e.name)
			names[n] = true
			raise(scopeNames)
		case roleToolCtl:
			if e.name == "policy" || e.name == "" {
				names[path.Base(w.back.rel[:len(w.back.rel)-len(abi.CtlSuffix)])] = true
				raise(scopeNames)
			}
		case roleClassDir, roleTierDir:
			if w.vpath != "" && e.name != "" {
				ivs = append(ivs, inval{vpath: w.vpath, name: e.name, entry: entryChange, listing: entryChange})
			}
			if entryChange || e.name == "" || w.role == roleTierDir {
				raise(scopeMeta)
			}
		case roleTierParent:
			raise(scopeAll)
		}
	}
	ivs = append(ivs, v.update(sc, names)...)
	v.m.apply(ivs)
}

// recompute rebuilds the whole snapshot (after an inotify overflow).
func (v *agentView) recompute() { v.m.apply(v.update(scopeAll, nil)) }

// update recomputes what sc names and returns what the kernel must forget
// for the difference between the old and the new snapshot.
func (v *agentView) update(sc scope, names map[string]bool) []inval {
	if sc == scopeNone {
		return nil
	}
	old := v.snap.Load()
	var s *snapshot
	switch sc {
	case scopeAll:
		s = v.loadSnapshot()
		v.computeTools(s)
	case scopeMeta:
		s = v.loadSnapshot()
		s.tools, s.candidates = old.tools, old.candidates
		if !sameTiers(old, s) {
			v.computeTools(s)
		}
	case scopeNames:
		cp := *old
		cp.tools, cp.candidates = clone(old.tools), clone(old.candidates)
		s = &cp
		for n := range names {
			v.evalTool(s, n)
		}
	}
	v.snap.Store(s)
	v.reconcileWatches(s)
	return v.diff(old, s)
}

func sameTiers(a, b *snapshot) bool {
	if a.a == nil || b.a == nil || len(a.tiers) != len(b.tiers) || a.cred.UID != b.cred.UID || a.cred.GID != b.cred.GID ||
		len(a.cred.Groups) != len(b.cred.Groups) || a.a.Type != b.a.Type {
		return false
	}
	for i := range a.tiers {
		if a.tiers[i].path != b.tiers[i].path || a.tiers[i].back.valid() != b.tiers[i].back.valid() {
			return false
		}
	}
	for i := range a.cred.Groups {
		if a.cred.Groups[i] != b.cred.Groups[i] {
			return false
		}
	}
	return true
}

func clone[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, x := range m {
		out[k] = x
	}
	return out
}

// diff lists what differs between two snapshots as invalidations: a tool
// that appeared, went or moved to another tier loses its three names in
// tool/ and in the tier directories that show it; a change of anything
// else (policy for models, agents and shared spaces; the owner) drops
// every name of the directories that depend on it.
func (v *agentView) diff(old, s *snapshot) []inval {
	var out []inval
	tierV := func(sn *snapshot, h toolHit) string {
		for _, t := range sn.tiers {
			if t.back.valid() && t.back.key() == h.dir.key() {
				return t.vpath
			}
		}
		return ""
	}
	touch := func(vp, name string) {
		for _, n := range []string{name, name + abi.CtlSuffix, name + abi.SockSuffix} {
			out = append(out, inval{vpath: vp, name: n, entry: true, listing: true})
		}
	}
	for name, h := range old.tools {
		if nh, ok := s.tools[name]; !ok || !nh.same(h) {
			touch(tree.ToolDir, name)
			if tv := tierV(old, h); tv != "" && tv != tree.ToolDir {
				touch(tv, name)
			}
		}
	}
	for name, h := range s.tools {
		if oh, ok := old.tools[name]; !ok || !oh.same(h) {
			touch(tree.ToolDir, name)
			if tv := tierV(s, h); tv != "" && tv != tree.ToolDir {
				touch(tv, name)
			}
		}
	}
	if old.metaKey() != s.metaKey() {
		for _, vp := range []string{"", tree.HomeDir, tree.SharedDir} {
			out = append(out, v.allNames(vp)...)
		}
		for _, sn := range []*snapshot{old, s} {
			tiers := []string{"", tree.HomeDir + "/" + sn.owner}
			for n := range sn.shared {
				tiers = append(tiers, tree.SharedDir+"/"+n)
			}
			for _, t := range tiers {
				out = append(out, v.allNames(joinV(t, tree.AgentDir))...)
				out = append(out, v.allNames(joinV(t, tree.ModelDir))...)
				for _, p := range v.knownChildren(joinV(t, tree.ModelDir)) {
					out = append(out, v.allNames(joinV(t, tree.ModelDir+"/"+p))...)
				}
			}
		}
	}
	return out
}

// allNames invalidates every name of the directory at vpath the kernel may
// have cached, positive or negative: the children it knows and the names
// the durable directory holds.
func (v *agentView) allNames(vpath string) []inval {
	n := v.m.find(vpath)
	if n == nil {
		return nil
	}
	names := map[string]bool{}
	for _, c := range v.knownChildren(vpath) {
		names[c] = true
	}
	n.mu.Lock()
	n.hasSt = false
	n.mu.Unlock()
	if k, ok := v.durableOf(vpath); ok {
		if es, err := k.readDir(); err == nil {
			for _, e := range es {
				names[e.Name] = true
			}
		}
	}
	out := []inval{{vpath: vpath, listing: true}}
	for name := range names {
		out = append(out, inval{vpath: vpath, name: name, entry: true})
	}
	return out
}

func (v *agentView) knownChildren(vpath string) []string {
	n := v.m.find(vpath)
	if n == nil {
		return nil
	}
	var out []string
	for name := range n.Children() {
		out = append(out, name)
	}
	return out
}

// durableOf maps a view directory to the durable directory listed for it
// (the tier layout is the same on both sides).
func (v *agentView) durableOf(vpath string) (backing, bool) {
	return backing{v.m.root, relOf(vpath)}, true
}
