// Package tree is the /ctx layout: where tiers and objects live, the object
// metadata format, control files, `ctx init`, and resolving an object path.
package tree

import (
	"os"
	"path/filepath"
	"strconv"
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
