package fs

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/agent"
)

// SandboxTarget is where a sandbox shows an agent's view: its CTX_ROOT.
const SandboxTarget = "/ctx"

// ViewsDir is where MountView puts views when run as root.
const ViewsDir = "/run/cortexfs/views"

// View is an agent's view mounted on the host for a sandbox: the launcher
// binds Dir at SandboxTarget inside the sandbox's mount namespace (a
// read-only, nosuid, nodev bind; the mount's own checks and
// default_permissions apply to the processes inside, whose uids the kernel
// maps into the host's namespace and whose pids into the server's).
//
// The view is mounted on the host, not inside the sandbox, on purpose:
// the FUSE connection then belongs to the server's pid namespace, so the
// thread ids in request headers name the right /proc entries.
type View struct {
	*Server
	Dir string // the host directory holding the mount
}

// MountView mounts the view of the agent object at o.Agent (o.Source is
// the tree) in a fresh private directory — under ViewsDir for root, under
// the user's runtime or temp directory otherwise — and serves it in the
// background until Close.
func MountView(o Options) (*View, error) {
	if o.Agent == "" {
		return nil, abi.Errorf(abi.EINVAL, "MountView: no agent")
	}
	base := ViewsDir
	if os.Geteuid() != 0 {
		base = filepath.Join(os.TempDir(), "cortexfs-views-"+itoa(os.Geteuid()))
	}
	// 0755: the sandbox's init resolves the bind source as the agent.
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "views directory: %v", err)
	}
	if fi, err := os.Lstat(base); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || !ownedByMe(fi) {
		return nil, abi.Errorf(abi.EACCES, "views directory %s is not a directory only this user can write", base)
	}
	dir, err := os.MkdirTemp(base, filepath.Base(o.Agent)+"-")
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "view directory: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.Remove(dir)
		return nil, err
	}
	srv, err := Mount(dir, o)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &View{Server: srv, Dir: dir}, nil
}

// Close unmounts the view (detaching it if a process still uses it: a
// sandbox's own bind of it goes with the sandbox) and removes its
// directory.
func (v *View) Close() error {
	err := v.Unmount(true)
	if rerr := os.Remove(v.Dir); err == nil && rerr != nil && !os.IsNotExist(rerr) {
		err = rerr
	}
	return err
}

func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

func itoa(n int) string { return strconv.Itoa(n) }

// The agent launcher (core/agent) mounts each sandboxed agent's view with
// MountView, binds it where .d/mount binds the tree, and then detaches the
// host's mount (View.Close): the sandbox's bind keeps it served.
func init() { agent.ViewMounter = mountAgentView }

func mountAgentView(a *agent.Agent) (string, func(), error) {
	v, err := MountView(Options{Source: string(a.Root), Agent: a.Object.Path, SockDir: agent.SandboxSockDir})
	if err != nil {
		return "", nil, err
	}
	return v.Dir, func() { _ = v.Close() }, nil
}
