package agent

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/ns"
)

// Isolation profiles of .d/iso besides IsoShared.
const (
	IsoUID    = "uid"    // the agent's uid/gid/groups; needs root
	IsoUserNS = "userns" // a user namespace with the agent's ids mapped
)

// SandboxRoot is CTX_ROOT inside every agent sandbox (the seed's "Runtime
// environment"): tiers under the tree's root are named below it.
const SandboxRoot = "/ctx"

// SandboxMount is one mount of an agent's sandbox.
type SandboxMount struct {
	Kind    string   `json:"kind"` // bind, proc, dev, tmpfs
	Source  string   `json:"source,omitempty"`
	Target  string   `json:"target"`
	Mode    string   `json:"mode"` // ro or rw
	Options []string `json:"options,omitempty"`
	Line    int      `json:"line,omitempty"` // its .d/mount line; 0: the launcher's own
}

// Sandbox is the confinement an agent gets from a launcher: the seed's
// startup steps 2–8 made concrete. ctx agent show prints it; Launch builds
// it.
type Sandbox struct {
	Profile string         `json:"profile"`
	UserNS  bool           `json:"userns"`
	UID     int            `json:"uid"` // the runtime's identity inside
	GID     int            `json:"gid"`
	Groups  []int          `json:"groups"`
	HostUID int            `json:"host_uid"` // the identity the kernel checks outside
	HostGID int            `json:"host_gid"`
	Root    string         `json:"root"`
	Cwd     string         `json:"cwd"`
	Network bool           `json:"network"`
	Mounts  []SandboxMount `json:"mounts"`
	CtxPath []string       `json:"ctx_path"`

	spec ns.Spec
	opts ns.Options
}

// PlanSandbox works out the sandbox a launcher running as euid/egid gives
// the agent, and checks that it can be built, without building it. The
// refusals are stable: iso=uid without root is EPERM; a kernel without
// user namespaces ENOTSUP; a missing or unusable root ENOENT/EINVAL; a
// mount source that does not exist ENOENT naming its .d/mount line; a
// mount target the sandbox reserves EINVAL naming the line; control files
// another user could change, for a root launcher, EACCES.
func (a *Agent) PlanSandbox(euid, egid int) (*Sandbox, error) {
	sb := &Sandbox{Profile: a.Iso, Root: a.RootDir, Cwd: a.Cwd}
	if err := a.identity(sb, euid, egid); err != nil {
		return nil, err
	}
	if err := a.CheckLauncher(euid); err != nil {
		return nil, err
	}
	if err := checkRoot(a.RootDir); err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "agent %s: %w", a.Name, err)
	}
	if a.Cwd != "" && (!filepath.IsAbs(a.Cwd) || filepath.Clean(a.Cwd) != a.Cwd) {
		return nil, abi.Errorf(abi.EINVAL, "agent %s: .d/cwd %q must be an absolute clean path", a.Name, a.Cwd)
	}
	sb.Cwd = insideCwd(a.Cwd, a.RootDir)
	sb.Network = a.Policy.Allowed(a.Type, policy.ClassNetwork, "default", "connect")
	if err := a.mounts(sb); err != nil {
		return nil, err
	}
	if err := a.AuthorizeMounts(); err != nil { // policy v0 mount:<name> read|write, per .d/mount line
		return nil, err
	}
	sb.CtxPath = a.insidePath(sb)
	return sb, nil
}

// identity fills the profile's identities and user namespace mappings.
func (a *Agent) identity(sb *Sandbox, euid, egid int) error {
	agentID := &ns.Identity{UID: a.UID, GID: a.GID, Groups: append([]int{}, a.Groups...)}
	switch a.Iso {
	case IsoShared:
		// The caller's own identity, whatever .d/uid says.
		sb.UID, sb.GID, sb.HostUID, sb.HostGID = euid, egid, euid, egid
		if euid != 0 {
			sb.UserNS = true // mounts need CAP_SYS_ADMIN: ours, in a namespace of ours
			sb.opts.UIDMap = idMap(euid, euid)
			sb.opts.GIDMap = idMap(egid, egid)
		}
	case IsoUID:
		if euid != 0 {
			return abi.Errorf(abi.EPERM, "agent %s: iso=uid switches to uid %d gid %d and needs root; run ctx-agent as root or use iso=userns", a.Name, a.UID, a.GID)
		}
		sb.UID, sb.GID, sb.Groups, sb.HostUID, sb.HostGID = a.UID, a.GID, agentID.Groups, a.UID, a.GID
		sb.spec.Switch, sb.spec.Resolve = agentID, agentID
	case IsoUserNS:
		sb.UserNS = true
		sb.UID, sb.GID = a.UID, a.GID
		if euid == 0 {
			// Root maps the agent's own ids (and groups) onto themselves:
			// outside, the kernel sees the agent, never root.
			sb.Groups, sb.HostUID, sb.HostGID = agentID.Groups, a.UID, a.GID
			sb.opts.UIDMap = idMap(a.UID, a.UID)
			sb.opts.GIDMap = idMap(a.GID, a.GID)
			for _, g := range a.Groups {
				if g != a.GID {
					sb.opts.GIDMap = append(sb.opts.GIDMap, idMap(g, g)...)
				}
			}
			sb.opts.SetgroupsAllowed = true
			sb.spec.Switch, sb.spec.Resolve = agentID, agentID
		} else {
			// An unprivileged user may map only itself: the agent's uid
			// and gid inside are the caller's outside; supplementary
			// groups stay as the kernel leaves them (setgroups is denied).
			sb.HostUID, sb.HostGID = euid, egid
			sb.opts.UIDMap = idMap(a.UID, euid)
			sb.opts.GIDMap = idMap(a.GID, egid)
			id := &ns.Identity{UID: a.UID, GID: a.GID}
			sb.spec.Switch, sb.spec.Resolve = id, id
		}
	default:
		return abi.Errorf(abi.EINVAL, "agent %s: .d/iso %q: want shared, uid or userns", a.Name, a.Iso)
	}
	if sb.UserNS {
		if err := ns.UserNSAvailable(); err != nil {
			return abi.Errorf(abi.CodeOf(err), "agent %s: iso=%s needs a user namespace here: %v", a.Name, a.Iso, err)
		}
	}
	if sb.Groups == nil {
		sb.Groups = []int{}
	}
	return nil
}

// insideCwd is .d/cwd as the runtime starts in it: a path inside the
// sandbox, "/" (the root) when empty — and when it names .d/root itself,
// which is how agents were created before they ran in a sandbox (their
// cwd was the host path of their root directory).
func insideCwd(cwd, rootDir string) string {
	if cwd == "" || cwd == rootDir {
		return "/"
	}
	return cwd
}

func idMap(inside, outside int) []syscall.SysProcIDMap {
	return []syscall.SysProcIDMap{{ContainerID: inside, HostID: outside, Size: 1}}
}

func checkRoot(dir string) error {
	if dir == "" {
		return abi.Errorf(abi.EINVAL, ".d/root is empty: an agent needs a root directory")
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return abi.Errorf(abi.EINVAL, ".d/root %q must be an absolute clean path", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), ".d/root %s: %v", dir, unwrapPathErr(err))
	}
	if !fi.IsDir() {
		return abi.Errorf(abi.EINVAL, ".d/root %s is not a directory", dir)
	}
	return nil
}

// reservedTargets are the sandbox's own mounts; .d/mount may not bind
// over them or below them.
var reservedTargets = []string{"/proc", "/dev"}

// mounts lists the sandbox's mounts — a fresh /proc, a minimal /dev, a
// private /tmp unless .d/mount binds one, then .d/mount in order — and
// builds the ns spec from them.
func (a *Agent) mounts(sb *Sandbox) error {
	sb.spec.Root = ns.Mount{Kind: ns.KindBind, Source: a.RootDir, NoSuid: true, NoDev: true}
	own := []ns.Mount{{Kind: ns.KindProc, Target: "/proc"}, {Kind: ns.KindDev, Target: "/dev"}}
	tmp := true
	for _, m := range a.Mounts {
		for _, r := range reservedTargets {
			if m.Target == r || strings.HasPrefix(m.Target, r+"/") {
				return abi.Errorf(abi.EINVAL, "agent %s: .d/mount line %d: target %s is the sandbox's own %s", a.Name, m.Line, m.Target, r)
			}
		}
		if m.Target == "/" {
			return abi.Errorf(abi.EINVAL, "agent %s: .d/mount line %d: the root is .d/root, not a mount", a.Name, m.Line)
		}
		if m.Target == "/tmp" {
			tmp = false
		}
		if _, err := os.Stat(m.Source); err != nil {
			return abi.Errorf(abi.CodeOf(err), "agent %s: .d/mount line %d: source %s: %v", a.Name, m.Line, m.Source, unwrapPathErr(err))
		}
	}
	if tmp {
		own = append(own, ns.Mount{Kind: ns.KindTmpfs, Target: "/tmp"})
	}
	for _, m := range own {
		mode := policy.ModeRW
		if m.Kind == ns.KindDev {
			mode = policy.ModeRO // its device nodes are usable, its directory is not writable
		}
		sb.Mounts = append(sb.Mounts, SandboxMount{Kind: m.Kind, Target: m.Target, Mode: mode})
	}
	sb.spec.Mounts = own
	for _, m := range a.Mounts {
		sb.Mounts = append(sb.Mounts, SandboxMount{Kind: ns.KindBind, Source: m.Source, Target: m.Target, Mode: m.Mode, Options: m.Options, Line: m.Line})
		sb.spec.Mounts = append(sb.spec.Mounts, ns.Mount{Kind: ns.KindBind, Source: m.Source, Target: m.Target,
			Recursive: m.Has("rbind"), ReadOnly: m.Mode == policy.ModeRO,
			NoSuid: m.Has("nosuid"), NoDev: m.Has("nodev"), NoExec: m.Has("noexec"), Line: m.Line})
	}
	return nil
}

// insidePath is CTX_PATH as the runtime sees it: a tier under the tree's
// root is named below SandboxRoot (where the default mounts put the tree,
// and where ctx-mount puts the agent's view); any other tier is named
// through the .d/mount line that shows it, the most specific one; a tier
// nothing shows is left out.
func (a *Agent) insidePath(sb *Sandbox) []string {
	out := []string{}
	for _, p := range a.Path {
		if q, ok := a.inside(p); ok {
			out = append(out, q)
		}
	}
	return out
}

// inside names a host path as the sandbox shows it.
func (a *Agent) inside(p string) (string, bool) {
	if rel, ok := below(p, filepath.Clean(string(a.Root))); ok {
		return path.Join(SandboxRoot, rel), true
	}
	best := -1
	for i, m := range a.Mounts {
		if _, ok := below(p, m.Source); ok && (best < 0 || len(m.Source) >= len(a.Mounts[best].Source)) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	rel, _ := below(p, a.Mounts[best].Source)
	return path.Join(a.Mounts[best].Target, rel), true
}

// below reports whether p is base or lies below it, and the rest.
func below(p, base string) (string, bool) {
	switch {
	case p == base:
		return ".", true
	case base == "/":
		return strings.TrimPrefix(p, "/"), true
	case strings.HasPrefix(p, base+"/"):
		return p[len(base)+1:], true
	}
	return "", false
}

// sandboxFiles are the control files that decide what a sandbox is and
// does: for a root launcher, only root may be able to change them.
var sandboxFiles = []string{"owner", "uid", "gid", "groups", "label", "iso", "root", "cwd", "env", "path", "mount", "model", "policy"}

// CheckLauncher is the trust rule for a launcher running as euid, applied
// before it writes anything of the agent's (.d/pid, .d/status, a session
// directory) or builds its sandbox: root launches only an agent nobody but
// root can steer (rootMayLaunch); any other user acts with its own rights
// and passes.
func (a *Agent) CheckLauncher(euid int) error {
	if euid != 0 {
		return nil
	}
	return a.rootMayLaunch()
}

// rootMayLaunch refuses to build, as root, the sandbox of an agent whose
// identity, mounts or policy another user could change: root resolves the
// mounts and grants the identity, so whoever can edit those files would
// steer root (the trust rule cortexfsd applies to models, tree.Trusted).
// That covers the directories from the agent's tier down to its .d/ too:
// whoever may rename entries in one of them can swap a file or directory
// for a symlink after any check, and have root write .d/pid and
// .d/status, or read control files, somewhere else.
func (a *Agent) rootMayLaunch() error {
	o := a.Object
	chain := []string{o.Tier}
	for d := filepath.Dir(o.Path); d != o.Tier && len(d) > len(o.Tier); d = filepath.Dir(d) {
		chain = append(chain, d)
	}
	required := len(chain) + 1 // the chain and the object must exist
	paths := append(chain, o.Path, a.Ctl(""))
	for _, f := range sandboxFiles {
		paths = append(paths, a.Ctl(f))
	}
	for i, p := range paths {
		fi, err := os.Lstat(filepath.Clean(p))
		if err != nil {
			if os.IsNotExist(err) && i >= required {
				continue
			}
			return abi.Errorf(abi.EACCES, "agent %s: %v", a.Name, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return abi.Errorf(abi.EACCES, "agent %s: %s is a symlink; root builds sandboxes only from its own files", a.Name, p)
		case !ok || st.Uid != 0:
			return abi.Errorf(abi.EACCES, "agent %s: %s is not root's; root builds sandboxes only from files only root can change (run the agent as its owner)", a.Name, p)
		case fi.Mode().Perm()&0o022 != 0:
			return abi.Errorf(abi.EACCES, "agent %s: %s is writable by group or others (mode %04o)", a.Name, p, fi.Mode().Perm())
		}
	}
	return nil
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
