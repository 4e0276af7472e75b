package agent

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/tree"
)

// missingRefs is ENOENT naming every model that is in neither the system
// tier nor the owner's home tier of r, and every tool with no executable
// file on path; nil when everything is there. An agent naming what does
// not exist starts, then fails its first turn: say so when it is created
// and whenever the tree is listed.
func missingRefs(r tree.Root, owner int, path, models, tools []string) error {
	var miss []string
	for _, m := range models {
		if !modelExists(r, owner, m) {
			miss = append(miss, "model "+m)
		}
	}
	for _, t := range tools {
		if !toolOnPath(path, t) {
			miss = append(miss, "tool "+t)
		}
	}
	if len(miss) == 0 {
		return nil
	}
	return abi.Errorf(abi.ENOENT, "%s not found (models: ctx model add or ctx model ls; tools: ctx ls tool, on CTX_PATH %s)",
		strings.Join(miss, ", "), strings.Join(path, ":"))
}

func modelExists(r tree.Root, owner int, id string) bool {
	for _, p := range []string{r.ModelPath(id), filepath.Join(r.Home(owner), tree.ModelDir, filepath.FromSlash(id))} {
		if _, err := tree.Resolve(p); err == nil {
			return true
		}
	}
	return false
}

// toolOnPath is the lookup of allowInToolPolicy: a regular file with an
// execute bit in one of the directories of path.
func toolOnPath(path []string, name string) bool {
	for _, dir := range path {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return true
		}
	}
	return false
}

// MissingRefs is ENOENT naming the models of .d/model and the tools its
// policy lets it execute that cannot be found (ctx ls, ctx status and ctx
// doctor call such an agent broken); nil when all are there.
func (a *Agent) MissingRefs() error {
	var tools []string
	for _, r := range a.Policy.Of(a.Type) {
		if r.Class == policy.ClassTool && r.Perm == "execute" {
			tools = append(tools, r.Object)
		}
	}
	return missingRefs(a.Root, a.Owner, a.Path, a.Models, tools)
}

// CheckEntries marks the agents of a tree listing that cannot run as they
// are: a control file that does not load, or a model or tool that is
// missing. The reason goes to Entry.Error, as tree.List does for objects.
// Their Status is State: dead for a process that vanished.
func CheckEntries(entries []tree.Entry) {
	for i := range entries {
		e := &entries[i]
		if e.Class != abi.ClassAgent || e.Error != "" || e.AliasOf != "" {
			continue
		}
		a, err := Open(e.Path)
		if err == nil {
			e.Status = a.State()
			err = a.MissingRefs()
		}
		if err != nil {
			e.Error = err.Error()
		}
	}
}

// State is .d/status, except that a status saying a process runs (start,
// ready, busy, idle, stopping) while none does is dead: the process ended
// without walking its status to stopped (SIGKILL, a crash).
func (a *Agent) State() string {
	s := a.Status()
	switch s {
	case StatusStart, StatusReady, StatusBusy, StatusIdle, StatusStopping:
		if _, ok := Running(a); !ok {
			return StatusDead
		}
	}
	return s
}
