package agent

import (
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Report is what ctx agent show and ctx doctor say about an agent: its
// control files as they load, and the sandbox a launcher of the given
// identity would build for it — or why it would not start.
type Report struct {
	Object  tree.Object
	Agent   *Agent   // nil when the control files do not load
	Sandbox *Sandbox // nil when the agent cannot start
	Err     error    // why it cannot start: a control file, or the sandbox
}

// Inspect reports on the agent object at path for a launcher running as
// euid/egid, building nothing. Only a path that is no agent object at all
// is an error.
func Inspect(path string, euid, egid int) (*Report, error) {
	o, err := tree.Resolve(path)
	if err != nil {
		return nil, err
	}
	r := &Report{Object: o}
	if r.Agent, r.Err = Load(o); r.Err != nil {
		if o.Class != abi.ClassAgent {
			return nil, r.Err
		}
		r.Agent = nil
		return r, nil
	}
	r.Sandbox, r.Err = r.Agent.PlanSandbox(euid, egid)
	return r, nil
}
