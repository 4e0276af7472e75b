package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/toolsrc"
	"github.com/cortexfs/cortexfs/core/tree"
)

// runProjected runs a tool projected from an MCP server or a plugin. Its
// result object is the content of the role "tool" message; a result the
// tool itself marked as an error is emitted the same way and then ends
// the run with EREMOTEIO (the tool ran and failed: not a transport
// failure, which is EHOSTDOWN).
func runProjected(ctx context.Context, o tree.Object, input []byte, run string, dryRun bool, emit func(abi.Event) error) (extra string, logged bool, err error) {
	if dryRun {
		extra = "dry_run=true"
	}
	args := bytes.TrimSpace(input)
	if len(args) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		return extra, false, abi.Errorf(abi.EINVAL, "tool %s: input is not valid JSON", o.Name)
	}
	var res toolsrc.Result
	if agent.Relayed() {
		// A tool of a sandboxed agent: its source is outside; the launcher
		// authorizes and makes the call (core/agent/toolrelay.go).
		var timeout int64
		if n, err := strconv.Atoi(strings.TrimSpace(ctlText(o, "timeout"))); err == nil && n > 0 {
			timeout = int64(n) * 1000
		}
		r, rerr := agent.RelayToolCall(ctx, agent.ToolCallRequest{Tool: o.Name, Input: args, DryRun: dryRun, Run: run, TimeoutMS: timeout})
		res, err = toolsrc.Result{Output: r.Output, IsError: r.IsError, DaemonLogged: r.DaemonLogged}, rerr
	} else {
		res, err = toolsrc.Call(ctx, o, args, toolsrc.CallOptions{Run: run, DryRun: dryRun, Invocation: invocation()})
	}
	if err != nil {
		return extra, res.DaemonLogged, err
	}
	e := abi.TextMessage("", "tool", string(res.Output))
	e.Name = o.Name
	if err := emit(e); err != nil {
		return extra, res.DaemonLogged, err
	}
	if res.IsError {
		return extra, res.DaemonLogged, abi.Errorf(abi.EREMOTEIO, "tool %s reported an error", o.Name)
	}
	return extra, res.DaemonLogged, nil
}

// invocation is the seed's InvocationContext of this call as the caller
// describes it: an agent run sets CTX_AGENT and CTX_AGENT_SESSION for its
// tools. It is informational; the daemon knows the caller only by its
// peer credentials.
func invocation() toolsrc.Invocation {
	inv := toolsrc.Invocation{ExecutionScope: "foreground"}
	source := "exec"
	actor := "uid:" + strconv.Itoa(os.Getuid())
	if a := os.Getenv("CTX_AGENT"); a != "" && abi.ValidName(a) == nil {
		source, actor = "agent", "agent:"+a
		if s := os.Getenv("CTX_AGENT_SESSION"); s != "" && len(s) <= 128 {
			inv.SessionID = &s
		}
	}
	inv.Source, inv.Actor = &source, &actor
	return inv
}

func ctlText(o tree.Object, f string) string {
	s, _ := o.CtlString(f)
	return s
}
