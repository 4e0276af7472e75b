// Package tree is the /ctx layout: where tiers and objects live, the object
// metadata format, control files, `ctx init`, and resolving an object path.
package tree

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/cortexfs/cortexfs/core/abi"
)

// DefaultRoot is $CTX_ROOT, else /ctx.
func DefaultRoot() string {
	if r := os.Getenv("CTX_ROOT"); r != "" {
		return r
	}
	return "/ctx"
}

// DefaultRunner is where shebangs point unless `ctx init --runner` says else.
const DefaultRunner = "/usr/bin/cortexfs-object-runner"

// Tier directories under a root (and under home/<uid>).
const (
	ModelDir  = "model"
	ToolDir   = "tool"
	AgentDir  = "agent"
	HomeDir   = "home"
	SharedDir = "shared"
	BinDir    = "bin"
)

// Root is a CortexFS root directory.
type Root string

func (r Root) Path(elem ...string) string {
	return filepath.Join(append([]string{string(r)}, elem...)...)
}

// Home is home/<uid>, the per-user tier.
func (r Root) Home(uid int) string { return r.Path(HomeDir, strconv.Itoa(uid)) }

// ModelPath is model/<provider>/<model> for a stable id "provider/model".
func (r Root) ModelPath(id string) string { return r.Path(ModelDir, filepath.FromSlash(id)) }

// ToolPath is tool/<name>.
func (r Root) ToolPath(name string) string { return r.Path(ToolDir, name) }

// ModelSessionDir is where cortexfsd keeps one user's model socket session:
// home/<uid>/session/model/<provider>/<model>/<session>/. It is outside the
// model tiers so session state never looks like a user's model object.
func (r Root) ModelSessionDir(uid uint32, modelID, session string) string {
	return r.Path(HomeDir, strconv.FormatUint(uint64(uid), 10), "session", ModelDir, filepath.FromSlash(modelID), session)
}

// Check is ENOENT unless r is a CortexFS root: a directory holding model/
// and tool/ directories, as ctx init makes it. Every applet that reads a
// tree refuses a wrong --root with the command that makes one, rather
// than serving or listing nothing.
func (r Root) Check() error {
	fi, err := os.Stat(string(r))
	if err != nil || !fi.IsDir() {
		return abi.Errorf(abi.ENOENT, "no CortexFS root at %s (create one with: ctx init --root %s)", r, r)
	}
	for _, d := range []string{ModelDir, ToolDir} {
		if fi, err := os.Stat(r.Path(d)); err != nil || !fi.IsDir() {
			return abi.Errorf(abi.ENOENT, "%s is not a CortexFS root: it has no %s/ (create one with: ctx init --root %s, or give the right --root or CTX_ROOT)", r, d, r)
		}
	}
	return nil
}
