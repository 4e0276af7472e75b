// Package agent is the agent runtime of CortexFS: agent objects and their
// control files, tool visibility by CTX_PATH and the authority checks of
// policy v0, the loop that runs a model and executes its tool calls,
// sessions and events, the agent socket and lifecycle, and child agents.
package agent

import (
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/tree"
)

// ControlFiles are exactly the seed's agent/<name>.d/ files.
var ControlFiles = []string{"owner", "uid", "gid", "groups", "label", "iso", "parent", "life",
	"root", "cwd", "env", "path", "mount", "model", "policy", "status", "pid", "log", "meta.json"}

// Lifecycle states of .d/status: the seed's start, ready, busy, idle,
// stopping and dead, and stopped, which is no process and nothing wrong:
// a new agent, or one whose process ended as asked (ctx-agent stop,
// SIGTERM, its owner gone). dead is kept for a process that ended on its
// own (its sandbox could not be built or ended, it failed, it was killed
// and a later stop or start found it gone).
const (
	StatusStart    = "start"
	StatusReady    = "ready"
	StatusBusy     = "busy"
	StatusIdle     = "idle"
	StatusStopping = "stopping"
	StatusStopped  = "stopped"
	StatusDead     = "dead"
)

// Isolation profiles and lifecycle ownership values.
const (
	IsoShared = "shared"
	LifeOwned = "owned"
)

// Agent is an agent object with its control files read and checked.
type Agent struct {
	Object  tree.Object
	Name    string
	Root    tree.Root
	Owner   int
	UID     int
	GID     int
	Groups  []int
	Label   string
	Type    string // subject type from the label
	Iso     string
	Parent  string
	Life    string
	RootDir string
	Cwd     string
	Env     []abi.KV
	Path    []string // CTX_PATH tiers, left to right
	Mounts  []policy.Mount
	Models  []string // provider/model, first is the default
	Policy  *policy.Policy
}

// Open reads the agent object at path (agent/<name>).
func Open(path string) (*Agent, error) {
	o, err := tree.Resolve(path)
	if err != nil {
		return nil, err
	}
	return Load(o)
}

// Load reads and validates every control file of an agent object. Policy
// decisions never look at meta.json.
func Load(o tree.Object) (*Agent, error) {
	if o.Class != abi.ClassAgent {
		return nil, abi.Errorf(abi.EINVAL, "%s is a %s, not an agent", o.Called, o.Class)
	}
	a := &Agent{Object: o, Name: o.Name, Root: o.Root}
	var err error
	get := func(f string) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = o.CtlString(f)
		return s
	}
	if err := a.loadIdentity(get); err != nil {
		return nil, a.ctlErr(err)
	}
	if a.Groups, err = parseGroups(get("groups")); err != nil {
		return nil, a.ctlErr(err)
	}
	a.Label = get("label")
	if a.Type, err = policy.SubjectType(a.Label); err != nil {
		return nil, a.ctlErr(err)
	}
	a.Iso, a.Parent, a.Life = orDefault(get("iso"), IsoShared), get("parent"), orDefault(get("life"), LifeOwned)
	a.RootDir, a.Cwd = get("root"), get("cwd")
	if err != nil {
		return nil, a.ctlErr(err)
	}
	return a, a.loadFiles()
}

func (a *Agent) loadFiles() error {
	o := a.Object
	read := func(f string) []byte {
		b, err := o.ReadCtl(f)
		if err != nil {
			return nil
		}
		return b
	}
	var err error
	if a.Env, err = abi.ParseKV(read("env")); err != nil {
		return a.ctlErr(abi.Errorf(abi.EINVAL, "env: %v", err))
	}
	if err := checkEnvFile(a.Env); err != nil {
		return a.ctlErr(err)
	}
	if a.Mounts, err = policy.ParseMountFile(read("mount")); err != nil {
		return a.ctlErr(err)
	}
	if a.Policy, err = policy.Parse(read("policy")); err != nil {
		return a.ctlErr(err)
	}
	for _, m := range lines(string(read("model"))) {
		if err := abi.ValidModelID(m); err != nil {
			return a.ctlErr(abi.Errorf(abi.EINVAL, "model: %v", err))
		}
		a.Models = append(a.Models, m)
	}
	path := strings.TrimSpace(string(read("path")))
	if path == "" {
		a.Path = DefaultPath(a.Root, a.Owner)
	} else {
		for _, p := range strings.FieldsFunc(path, func(r rune) bool { return r == ':' || r == '\n' }) {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			// A relative entry would be looked up from one directory and
			// run from another (the tool's cwd): the file that passed the
			// checks would not be the file that runs.
			if !filepath.IsAbs(p) {
				return a.ctlErr(abi.Errorf(abi.EINVAL, "path: CTX_PATH entry %q is not absolute", p))
			}
			a.Path = append(a.Path, filepath.Clean(p))
		}
	}
	switch a.Iso {
	case IsoShared, IsoUID, IsoUserNS:
	default:
		return a.ctlErr(abi.Errorf(abi.EINVAL, "iso: %q is not a profile (shared, uid or userns)", trunc(a.Iso)))
	}
	return nil
}

func (a *Agent) ctlErr(err error) error {
	return abi.Errorf(abi.CodeOf(err), "agent %s: .d/%v", a.Name, err)
}

// DefaultPath is CTX_PATH when .d/path is empty: <root>/tool then
// <root>/home/<uid>/tool.
func DefaultPath(r tree.Root, uid int) []string {
	return []string{r.Path(tree.ToolDir), filepath.Join(r.Home(uid), tree.ToolDir)}
}

// Home is home/<uid>/agent/<name>: the agent's own state directory.
func (a *Agent) Home() string { return filepath.Join(a.Root.Home(a.Owner), tree.AgentDir, a.Name) }

// Ctl is a control file path of the agent.
func (a *Agent) Ctl(f string) string { return a.Object.Ctl(f) }

// Status reads .d/status.
func (a *Agent) Status() string { s, _ := a.Object.CtlString("status"); return s }

// loadIdentity reads .d/owner, .d/uid and .d/gid with the seed's
// defaults: the owner is whoever owns the agent object file, uid defaults
// to the owner, gid to the owner's primary group (else the object file's
// group). Never to the identity of whichever process happens to load it.
func (a *Agent) loadIdentity(get func(string) string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(a.Object.Path, &st); err != nil {
		return abi.Errorf(abi.CodeOf(err), "owner: cannot stat the agent object: %v", err)
	}
	var err error
	if a.Owner, err = intFile(get("owner"), "owner", int(st.Uid)); err != nil {
		return err
	}
	if a.UID, err = intFile(get("uid"), "uid", a.Owner); err != nil {
		return err
	}
	a.GID, err = intFile(get("gid"), "gid", primaryGID(a.Owner, int(st.Gid)))
	return err
}

// primaryGID is uid's primary group from the user database, else def.
func primaryGID(uid, def int) int {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return def
	}
	g, err := strconv.Atoi(u.Gid)
	if err != nil {
		return def
	}
	return g
}

func intFile(s, name string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, abi.Errorf(abi.EINVAL, "%s: want a non-negative integer, got %q", name, s)
	}
	return n, nil
}

func parseGroups(s string) ([]int, error) {
	var out []int
	for _, l := range lines(s) {
		n, err := intFile(l, "groups", 0)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// lines splits a control file into trimmed non-empty, non-comment lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
