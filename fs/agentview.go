package fs

import (
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tree"
)

// agentView is one agent's projection of the durable tiers ("Agent View"),
// computed in memory: no placeholder file, no symlink copy, nothing written.
//
//	model/   models the agent may use (allow <type> model:<id> use), their
//	         .d/ and .sock, and aliases whose target is one of them
//	tool/    the tools found on its CTX_PATH (first executable wins; .d/
//	         follows the winner's directory) that its uid/gid/groups may
//	         execute and its policy and the tool's own .d/policy allow
//	agent/   itself and the agents it may read
//	home/    only home/<owner> (its CTX_HOME): the same filters apply to the
//	         tier's model/, tool/ and agent/; everything else is as it is
//	shared/  the spaces its policy allows (read or write) and its mode bits
//	         let it search, filtered like home/<owner>
//
// Everything beneath an object's .d/, an agent's state directory or a
// tier's other directories is the durable tree as it is. A name the view
// does not show does not exist in it: lookup is ENOENT, not EACCES.
type agentView struct {
	m       *mount
	objPath string
	sockDir string
	snap    atomic.Pointer[snapshot]

	mu      sync.Mutex       // bases, structural watches, recomputation
	bases   map[string]*base // CTX_PATH tiers outside the root
	watches map[string]structWatch
	ok      bool // every structural watch took
}

func newAgentView(m *mount, objPath, sockDir string) (*agentView, error) {
	v := &agentView{m: m, objPath: objPath, sockDir: sockDir, bases: map[string]*base{}, watches: map[string]structWatch{}}
	s := v.loadSnapshot()
	if s.a == nil {
		return nil, s.err
	}
	v.computeTools(s)
	v.snap.Store(s)
	v.reconcileWatches(s)
	return v, nil
}

func openTier(p string) (*safefs.Dir, error) { return safefs.OpenRoot(p) }

func (v *agentView) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key := range v.watches {
		v.m.w.remove(key, v)
	}
	for _, b := range v.bases {
		b.dir.Close()
	}
	v.bases = map[string]*base{}
}

func (v *agentView) covered(vpath string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ok && v.isVirtual(vpath)
}

// isVirtual reports whether vpath is a directory whose listing the view
// computes (rather than a durable directory shown as it is).
func (v *agentView) isVirtual(vpath string) bool {
	p := splitV(vpath)
	s := v.snap.Load()
	switch len(p) {
	case 0:
		return true
	case 1:
		return true // model, tool, agent, home, shared
	}
	var rest []string
	switch p[0] {
	case tree.HomeDir, tree.SharedDir:
		rest = p[2:]
		if len(rest) == 0 {
			return true // the tier itself
		}
	case tree.ModelDir:
		rest = p
	default:
		return false
	}
	// Within a tier: model/, model/<provider>/, tool/, agent/.
	switch {
	case len(rest) == 1:
		return rest[0] == tree.ModelDir || rest[0] == tree.ToolDir || rest[0] == tree.AgentDir
	case len(rest) == 2 && rest[0] == tree.ModelDir:
		_, suf := splitObject(rest[1])
		return suf == "" && s != nil && s.providerAllowed(rest[1])
	}
	return false
}

func (v *agentView) changed(vpath string, e entry, evs []event) []inval {
	return rawChanged(vpath, evs)
}

// tier is a directory holding model/, tool/ and agent/: the root, the
// agent's home, a shared space.
type tier struct {
	vpath string
	back  backing
}

func (v *agentView) rootTier() tier { return tier{"", backing{v.m.root, "."}} }

func (v *agentView) resolve(vpath string) (entry, error) {
	s := v.snap.Load()
	p := splitV(vpath)
	root := v.rootTier()
	if len(p) == 0 {
		return v.virtual(root.back, false)
	}
	if s.a == nil {
		return entry{}, syscall.ENOENT
	}
	switch p[0] {
	case tree.HomeDir:
		if len(p) == 1 {
			return v.virtual(root.back.join(tree.HomeDir), false)
		}
		if p[1] != s.owner {
			return entry{}, syscall.ENOENT
		}
		return v.inTier(s, tier{tree.HomeDir + "/" + s.owner, root.back.join(tree.HomeDir, s.owner)}, p[2:])
	case tree.SharedDir:
		if len(p) == 1 {
			return v.virtual(root.back.join(tree.SharedDir), false)
		}
		if !s.shared[p[1]] {
			return entry{}, syscall.ENOENT
		}
		return v.inTier(s, tier{tree.SharedDir + "/" + p[1], root.back.join(tree.SharedDir, p[1])}, p[2:])
	case tree.ModelDir, tree.ToolDir, tree.AgentDir:
		return v.inTier(s, root, p)
	}
	return entry{}, syscall.ENOENT
}

// virtual is a computed directory with the attributes of its durable
// counterpart; synth allows one that does not exist durably (the merged
// tool/ when the root has none), shown with the root's attributes.
func (v *agentView) virtual(k backing, synth bool) (entry, error) {
	st, err := k.lstat()
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return entry{kind: kindVirtual, back: k, st: st}, nil
	}
	if !synth {
		if err == nil {
			err = syscall.ENOENT
		}
		return entry{}, err
	}
	st, err = v.m.root.dir.Stat()
	if err != nil {
		return entry{}, err
	}
	st.Mode = unix.S_IFDIR | 0o555
	st.Nlink = 2
	return entry{kind: kindVirtual, st: st}, nil
}

func (v *agentView) inTier(s *snapshot, t tier, rest []string) (entry, error) {
	if len(rest) == 0 {
		return v.virtual(t.back, false)
	}
	switch rest[0] {
	case tree.ToolDir:
		return v.inTools(s, t, rest[1:])
	case tree.ModelDir:
		return v.inModels(s, t, rest[1:])
	case tree.AgentDir:
		return v.inAgents(s, t, rest[1:])
	}
	if t.vpath == "" {
		return entry{}, syscall.ENOENT // the root shows only its tiers
	}
	return rawEntry(t.back.join(rest...), v.sockDir)
}

func (v *agentView) inTools(s *snapshot, t tier, rest []string) (entry, error) {
	dir := t.back.join(tree.ToolDir)
	if len(rest) == 0 {
		return v.virtual(dir, t.vpath == "")
	}
	name, suf := splitObject(rest[0])
	h, ok := s.tools[name]
	if !ok || t.vpath != "" && h.dir.key() != dir.key() {
		return entry{}, syscall.ENOENT
	}
	return v.object(h.dir, rest, suf, unix.S_IFREG)
}

// object resolves an object's file, .d/ (and below) or .sock in dir.
func (v *agentView) object(dir backing, rest []string, suf string, fileType uint32) (entry, error) {
	e, err := rawEntry(dir.join(rest...), v.sockDir)
	if err != nil {
		return entry{}, err
	}
	typ := e.st.Mode & unix.S_IFMT
	switch {
	case len(rest) > 1 && suf != abi.CtlSuffix:
		return entry{}, syscall.ENOTDIR
	case len(rest) == 1 && suf == "" && fileType != 0 && typ != fileType:
		return entry{}, syscall.ENOENT
	case len(rest) == 1 && suf == abi.CtlSuffix && typ != unix.S_IFDIR:
		return entry{}, syscall.ENOENT
	case len(rest) == 1 && suf == abi.SockSuffix && e.kind != kindSock:
		return entry{}, syscall.ENOENT
	}
	return e, nil
}

func (v *agentView) inModels(s *snapshot, t tier, rest []string) (entry, error) {
	dir := t.back.join(tree.ModelDir)
	if len(rest) == 0 {
		return v.virtual(dir, false)
	}
	k := dir.join(rest[0])
	st, err := k.lstat()
	if err != nil {
		return entry{}, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		if len(rest) > 1 || !v.aliasVisible(s, k, 0) {
			return entry{}, syscall.ENOENT
		}
		return rawEntry(k, v.sockDir)
	case unix.S_IFDIR:
		if !s.providerAllowed(rest[0]) {
			return entry{}, syscall.ENOENT
		}
	default:
		return entry{}, syscall.ENOENT
	}
	if len(rest) == 1 {
		return v.virtual(k, false)
	}
	name, suf := splitObject(rest[1])
	ok, err := v.modelEntryVisible(s, k, rest[1])
	if err != nil || !ok {
		return entry{}, syscall.ENOENT
	}
	if suf == "" {
		if st, _ := k.join(name).lstat(); st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return rawEntry(k.join(name), v.sockDir) // an alias inside a provider directory
		}
	}
	return v.object(k, rest[1:], suf, unix.S_IFREG)
}

// modelEntryVisible decides one entry of model/<provider>/: an object
// triple member of an allowed model, or an alias to one.
func (v *agentView) modelEntryVisible(s *snapshot, provDir backing, entryName string) (bool, error) {
	name, suf := splitObject(entryName)
	if suf == "" {
		st, err := provDir.join(name).lstat()
		if err != nil {
			return false, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return v.aliasVisible(s, provDir.join(name), 0), nil
		}
	}
	return s.modelAllowed(path.Base(provDir.rel) + "/" + name), nil
}

// aliasVisible follows a model alias (a symlink, up to 8 deep) within the
// tree, lexically and without following anything on disk but the links
// themselves: it is visible when it ends at a model object the agent may
// use, in any tier.
func (v *agentView) aliasVisible(s *snapshot, k backing, depth int) bool {
	if depth > 8 || k.b != v.m.root {
		return false
	}
	target, err := k.b.dir.Readlink(k.rel)
	if err != nil {
		return false
	}
	var rel string
	if strings.HasPrefix(target, "/") {
		r, ok := strings.CutPrefix(path.Clean(target), v.m.root.path+"/")
		if !ok {
			return false
		}
		rel = r
	} else {
		rel = path.Join(path.Dir(k.rel), target)
	}
	if rel == "" || rel == "." || strings.HasPrefix(rel, "../") || rel == ".." {
		return false
	}
	next := backing{v.m.root, rel}
	st, err := next.lstat()
	if err != nil {
		return false
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return v.aliasVisible(s, next, depth+1)
	}
	p := strings.Split(rel, "/")
	if st.Mode&unix.S_IFMT != unix.S_IFREG || len(p) < 3 || p[len(p)-3] != tree.ModelDir {
		return false
	}
	return s.modelAllowed(p[len(p)-2] + "/" + p[len(p)-1])
}

func (v *agentView) inAgents(s *snapshot, t tier, rest []string) (entry, error) {
	dir := t.back.join(tree.AgentDir)
	if len(rest) == 0 {
		return v.virtual(dir, false)
	}
	name, suf := splitObject(rest[0])
	if !s.agentVisible(name) {
		return entry{}, syscall.ENOENT
	}
	if suf == "" {
		// The object file, or the agent's state directory (home tiers):
		// shown as it is, with everything below it.
		return rawEntry(dir.join(rest...), v.sockDir)
	}
	return v.object(dir, rest, suf, 0)
}

// list computes a virtual directory's entries; a raw one is listed as it is.
func (v *agentView) list(vpath string, e entry) ([]safefs.DirEntry, error) {
	if e.kind != kindVirtual {
		return rawList(e.back)
	}
	s := v.snap.Load()
	var out []safefs.DirEntry
	add := func(name string) {
		if c, err := v.resolve(joinV(vpath, name)); err == nil {
			out = append(out, safefs.DirEntry{Name: name, Type: c.st.Mode & unix.S_IFMT})
		}
	}
	p := splitV(vpath)
	switch {
	case len(p) == 0:
		for _, n := range []string{tree.AgentDir, tree.HomeDir, tree.ModelDir, tree.SharedDir, tree.ToolDir} {
			add(n)
		}
	case len(p) == 1 && p[0] == tree.HomeDir:
		add(s.owner)
	case len(p) == 1 && p[0] == tree.SharedDir:
		for _, n := range sortedKeys(s.shared) {
			add(n)
		}
	case p[len(p)-1] == tree.ToolDir && (len(p) == 1 || len(p) == 3):
		for _, n := range sortedKeys(s.tools) {
			h := s.tools[n]
			if len(p) == 3 && h.dir.key() != e.back.key() {
				continue
			}
			out = append(out, safefs.DirEntry{Name: n, Type: unix.S_IFREG})
			if h.hasCtl {
				out = append(out, safefs.DirEntry{Name: n + abi.CtlSuffix, Type: unix.S_IFDIR})
			}
			if h.hasSock {
				out = append(out, safefs.DirEntry{Name: n + abi.SockSuffix, Type: unix.S_IFLNK})
			}
		}
	default:
		// A tier, model/, model/<provider>/ or agent/: the durable
		// entries the view resolves.
		es, err := e.back.readDir()
		if err != nil {
			return nil, err
		}
		for _, d := range es {
			add(d.Name)
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
