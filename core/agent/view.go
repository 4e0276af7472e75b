package agent

import (
	"fmt"
	"os"
	"path/filepath"

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
			return detach, "", nil
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

// canonical is a path with its symlinks resolved, for comparing a mount
// source with the tree's root (either may be named through a symlink).
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
