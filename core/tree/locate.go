package tree

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// treeNames are the first components of a tree-relative object name
// (model/main, tool/fs.read, agent/coder, home/1000/…, shared/…).
var treeNames = []string{ModelDir, ToolDir, AgentDir, HomeDir, SharedDir}

// IsTreeName reports whether name reads as relative to a CortexFS root:
// relative, not "./…" or "../…", and starting with model/, tool/, agent/,
// home/ or shared/.
func IsTreeName(name string) bool {
	if filepath.IsAbs(name) || strings.HasPrefix(name, "./") || strings.HasPrefix(name, "../") {
		return false
	}
	first, _, ok := strings.Cut(name, "/")
	return ok && slices.Contains(treeNames, first)
}

// Candidates are the paths a name typed for an object may mean, in the
// order they are tried: a tree-relative name under the root first, then
// relative to the working directory (a tree checked out in the current
// directory); any other name is a path as is.
func (r Root) Candidates(name string) []string {
	if !IsTreeName(name) {
		return []string{name}
	}
	return []string{r.Path(filepath.FromSlash(name)), name}
}

// Locate returns the first candidate of name that exists (a dangling
// symlink counts: Resolve reports it). None is ENOENT naming every path
// tried.
func (r Root) Locate(name string) (string, error) {
	cands := r.Candidates(name)
	for _, c := range cands {
		if _, err := os.Lstat(c); err == nil {
			return c, nil
		}
	}
	tried := make([]string, len(cands))
	for i, c := range cands {
		if abs, err := filepath.Abs(c); err == nil {
			c = abs
		}
		tried[i] = c
	}
	if len(tried) == 1 {
		return "", abi.Errorf(abi.ENOENT, "no object %s (tried %s)", name, tried[0])
	}
	return "", abi.Errorf(abi.ENOENT, "no object %s (tried %s; a name starting with %s/ is looked up under the root %s, given by --root or $CTX_ROOT, then in the current directory)",
		name, strings.Join(tried, ", "), strings.SplitN(name, "/", 2)[0], string(r))
}

// ResolveName is Resolve of what a user typed: a path, or a name relative
// to root (see Locate).
func (r Root) ResolveName(name string) (Object, error) {
	p, err := r.Locate(name)
	if err != nil {
		return Object{}, err
	}
	return Resolve(p)
}
