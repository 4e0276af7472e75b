package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/ns"
)

// ViewMounter mounts the agent's own view of its tree (ctx-mount --agent)
// for a sandbox and returns the host directory holding it and the function
// that detaches that mount from the host once the sandbox has bound it
// (the view is served until its last bind goes). Package fs sets it (fs depends on this package, not
// the other way round); the binary always links fs.
var ViewMounter func(a *Agent) (dir string, unmount func(), err error)

// projectTree makes every bind of the tree's root in spec a bind of the
// agent's view instead: "the agent's /ctx is its own projection" — tool/
// holds exactly the tools it may run, model/ the models it may use, and
// nothing it may not use exists there. Binds of directories below the root
// (its home, a shared space) stay what .d/mount says. The returned
// function detaches the host's mount of the view; the launcher calls it as
// soon as the sandbox is built.
//
// A launcher that is not root may be unable to mount at all (no
// fusermount3, or a /dev/fuse only root may open): its agent then sees the
// tree as its own uid may (read-only), warn says so, and the agent's
// policy is still enforced by every tool call. A root launcher fails
// instead: the agent does not start without its view.
func (a *Agent) projectTree(spec *ns.Spec) (detach func(), warn string, err error) {
	root := canonical(string(a.Root))
	var hit []int
	for i, m := range spec.Mounts {
		if m.Kind == ns.KindBind && canonical(m.Source) == root {
			hit = append(hit, i)
		}
	}
	if len(hit) == 0 {
		return func() {}, "", nil
	}
	if ViewMounter == nil {
		err = abi.Errorf(abi.ENOTSUP, "this build cannot mount the agent's view")
	} else {
		var dir string
		if dir, detach, err = ViewMounter(a); err == nil {
			for _, i := range hit {
				// The view is one FUSE mount with nothing beneath it,
				// always read-only (its writes are EROFS whatever the
				// mode says).
				spec.Mounts[i].Source, spec.Mounts[i].Recursive = dir, false
			}
			return detach, a.bindSockets(spec, dir), nil
		}
	}
	if os.Geteuid() == 0 {
		return nil, "", abi.Errorf(abi.CodeOf(err), "agent %s: mount its view of the tree: %w", a.Name, err)
	}
	for _, i := range hit {
		spec.Mounts[i].ReadOnly = true
	}
	return func() {}, fmt.Sprintf("agent %s: its view of the tree could not be mounted (%v); /ctx is the tree read-only as uid %d sees it",
		a.Name, err, os.Geteuid()), nil
}

// SandboxSockDir is where an agent's view points its .sock entries
// (ctx-mount's SockDir): FUSE cannot host a socket inode, so the view shows
// name.sock as a symlink to SandboxSockDir/<its path in the tree>, and the
// launcher binds each socket the view lists there, on the sandbox's own
// /tmp (a tmpfs only this sandbox has, so no mount point is ever created
// on the host). connect(2) on the path the agent sees then reaches the
// daemon serving it, which checks the peer as for any client.
const SandboxSockDir = "/tmp/.cortexfs-sock"

// maxViewSockets bounds the sockets bound into one sandbox.
const maxViewSockets = 256

// bindSockets adds a read-only bind of every socket the view at dir lists
// to spec, after every other mount. Sockets live where object sockets
// live — model/P/M.sock and agent/N.sock, in the system tier and under
// home/<uid>/ — so those directories of the durable tree are listed (on the
// host, cheaply) and each socket found is kept only if the view shows it,
// as a symlink into SandboxSockDir (one lookup through the view each). A
// socket made after the sandbox started (a daemon restarted) is a new
// inode the bind does not follow: the agent reaches it after its next
// start. It returns a warning when the sandbox has no /tmp of its own to
// put them on.
func (a *Agent) bindSockets(spec *ns.Spec, dir string) string {
	ownTmp := false
	for _, m := range spec.Mounts {
		if m.Kind == ns.KindTmpfs && m.Target == "/tmp" {
			ownTmp = true
		}
	}
	root := string(a.Root)
	tiers := []string{"."}
	if homes, err := os.ReadDir(filepath.Join(root, "home")); err == nil {
		for _, h := range homes {
			if h.IsDir() {
				tiers = append(tiers, filepath.Join("home", h.Name()))
			}
		}
	}
	var socks []string
	sockets := func(rel string) {
		ents, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			return
		}
		for _, e := range ents {
			name := filepath.Join(rel, e.Name())
			if len(socks) >= maxViewSockets || e.Type()&os.ModeSocket == 0 || !strings.HasSuffix(e.Name(), abi.SockSuffix) {
				continue
			}
			if t, err := os.Readlink(filepath.Join(dir, name)); err == nil && t == filepath.Join(SandboxSockDir, name) {
				socks = append(socks, name)
			}
		}
	}
	for _, tier := range tiers {
		sockets(filepath.Join(tier, "agent"))
		providers, _ := os.ReadDir(filepath.Join(root, tier, "model"))
		for _, p := range providers {
			if p.IsDir() && !strings.HasSuffix(p.Name(), abi.CtlSuffix) {
				sockets(filepath.Join(tier, "model", p.Name()))
			}
		}
	}
	if len(socks) == 0 {
		return ""
	}
	if !ownTmp {
		return fmt.Sprintf("agent %s: .d/mount binds /tmp, so the %d sockets of its view are not reachable inside the sandbox", a.Name, len(socks))
	}
	for _, rel := range socks {
		spec.Mounts = append(spec.Mounts, ns.Mount{Kind: ns.KindBind, Source: filepath.Join(root, rel),
			Target: filepath.Join(SandboxSockDir, rel), ReadOnly: true, NoSuid: true, NoDev: true, NoExec: true})
	}
	return ""
}

// canonical is a path with its symlinks resolved, for comparing a mount
// source with the tree's root (either may be named through a symlink).
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
