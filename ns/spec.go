package ns

import (
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Mount kinds.
const (
	KindBind  = "bind"  // a bind of Source (a host path)
	KindProc  = "proc"  // a fresh procfs of the sandbox's pid namespace
	KindTmpfs = "tmpfs" // an empty tmpfs
	KindDev   = "dev"   // a tmpfs holding the minimal device set (see dev.go)
)

// Mount is one mount of the sandbox, applied in order after the root.
type Mount struct {
	Kind      string `json:"kind"`
	Source    string `json:"source,omitempty"` // KindBind: the host path
	Target    string `json:"target"`           // absolute path inside the sandbox
	Recursive bool   `json:"recursive,omitempty"`
	ReadOnly  bool   `json:"ro,omitempty"`
	NoSuid    bool   `json:"nosuid,omitempty"`
	NoDev     bool   `json:"nodev,omitempty"`
	NoExec    bool   `json:"noexec,omitempty"`
	// Line is the agent's .d/mount line this mount comes from (0: added by
	// the launcher); every error about the mount names it.
	Line int `json:"line,omitempty"`
}

// Identity is a uid, a gid and supplementary groups.
type Identity struct {
	UID    int   `json:"uid"`
	GID    int   `json:"gid"`
	Groups []int `json:"groups,omitempty"`
}

// Spec is everything the init needs to build the sandbox and start its
// payload. It travels from Start to Init as JSON over a pipe.
type Spec struct {
	// Root is the bind that becomes "/": Source is the host directory,
	// Target is ignored. A non-recursive bind shows none of the mounts
	// beneath Source.
	Root   Mount   `json:"root"`
	Mounts []Mount `json:"mounts,omitempty"`

	// Hostname is set in the sandbox's own UTS namespace ("" keeps the
	// host's name there).
	Hostname string `json:"hostname,omitempty"`
	// Network keeps the host's network namespace; false gives the sandbox
	// a new one where only loopback is up.
	Network bool `json:"network,omitempty"`
	// UserNS is true when Start creates a user namespace (Options.UIDMap);
	// it tells the init that supplementary groups may be fixed by
	// setgroups=deny.
	UserNS bool `json:"userns,omitempty"`
	// SetgroupsDenied is true when the user namespace was created with
	// /proc/PID/setgroups "deny" (an unprivileged launcher).
	SetgroupsDenied bool `json:"setgroups_denied,omitempty"`

	// Resolve is the identity (as the init's namespace sees it) that
	// resolves every host path of the spec: the root, bind sources and
	// mount points. The kernel then checks search permission on each
	// directory of those paths for that identity, not for the (possibly
	// privileged) init, so a bind can expose only what the agent could
	// reach by itself. Nil resolves as the init is.
	Resolve *Identity `json:"resolve,omitempty"`
	// Switch is the identity the payload runs as; nil keeps the init's.
	Switch *Identity `json:"switch,omitempty"`

	// Cwd is the working directory inside ("" is "/").
	Cwd string `json:"cwd,omitempty"`
	// Argv is the payload's argument vector; Argv[0] is its name.
	Argv []string `json:"argv"`
	// Path is the program to execute inside the sandbox. Empty runs this
	// binary itself, from a read-only mount of it that is not attached
	// anywhere in the sandbox's tree (see Init).
	Path string `json:"path,omitempty"`
	// Env is the payload's whole environment.
	Env []string `json:"env,omitempty"`
	// ClassicMounts builds the tree with mount(2) and remounts even where
	// the descriptor-based mount API exists (tests cover both paths).
	ClassicMounts bool `json:"classic_mounts,omitempty"`

	// Files is how many descriptors after stdio (3, 4, …) the payload
	// inherits (Options.ExtraFiles).
	Files int `json:"files,omitempty"`
}

// maxTargetDepth bounds a mount point's path, which the init may have to
// create one component at a time.
const maxTargetDepth = 64

// Validate checks a spec before anything is started: absolute clean paths
// without NUL, known kinds, a payload. Errors are EINVAL naming the mount.
func (s *Spec) Validate() error {
	if s.Root.Source == "" || !cleanAbs(s.Root.Source) {
		return abi.Errorf(abi.EINVAL, "sandbox root %q must be an absolute clean path", s.Root.Source)
	}
	for _, m := range s.Mounts {
		if err := m.validate(); err != nil {
			return err
		}
	}
	if len(s.Argv) == 0 {
		return abi.Errorf(abi.EINVAL, "sandbox: no program to run")
	}
	if s.Cwd != "" && !cleanAbs(s.Cwd) {
		return abi.Errorf(abi.EINVAL, "sandbox cwd %q must be an absolute clean path", s.Cwd)
	}
	if s.Path != "" && !filepath.IsAbs(s.Path) {
		return abi.Errorf(abi.EINVAL, "sandbox program %q must be an absolute path", s.Path)
	}
	return nil
}

func (m Mount) validate() error {
	switch m.Kind {
	case KindBind:
		if !cleanAbs(m.Source) {
			return m.errorf(abi.EINVAL, "source must be an absolute clean path")
		}
	case KindProc, KindTmpfs, KindDev:
	default:
		return m.errorf(abi.EINVAL, "unknown mount kind %q", m.Kind)
	}
	if !cleanAbs(m.Target) || m.Target == "/" {
		return m.errorf(abi.EINVAL, "target must be an absolute clean path below /")
	}
	if strings.Count(m.Target, "/") > maxTargetDepth {
		return m.errorf(abi.EINVAL, "target is deeper than %d components", maxTargetDepth)
	}
	return nil
}

// errorf is an error about this mount: it names the .d/mount line when
// the mount came from one, else the mount itself.
func (m Mount) errorf(c abi.Code, format string, args ...any) error {
	return abi.Errorf(c, "%s: %s", m.where(), fmtMsg(format, args...))
}

func (m Mount) where() string {
	if m.Line > 0 {
		return "mount line " + itoa(m.Line) + " (" + m.Source + " -> " + m.Target + ")"
	}
	if m.Kind == KindBind {
		return "mount " + m.Source + " -> " + m.Target
	}
	return m.Kind + " mount at " + m.Target
}

func cleanAbs(p string) bool {
	return p != "" && filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}
