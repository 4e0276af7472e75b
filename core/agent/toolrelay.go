package agent

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/toolsrc"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Projected tools (MCP servers, plugins: core/toolsrc) are served from
// outside any sandbox: by cortexfsd on <tier>/.tools.sock, or, for a
// process plugin, by a child of the caller. Inside an agent's sandbox
// neither the tier's socket nor its plugins directory is there, so such a
// tool relays its call like the agent.* tools do: to the runtime over
// CTX_AGENT_FD, and the runtime to the launcher, which authorizes the call
// again against the tree (execute bit for the agent's identity, the
// agent's policy, the tool's own policy) and makes it. The call is thus
// exactly what the daemon would serve a runner outside; a process plugin
// runs beside the sandbox with the agent's host identity, as an MCP server
// runs beside it in the daemon.

// ToolCallOp is the relay op of a projected tool's call.
const ToolCallOp = "tool.call"

// ToolCallRequest is the relayed call.
type ToolCallRequest struct {
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input"`
	DryRun    bool            `json:"dry_run,omitempty"`
	Run       string          `json:"run,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
}

// ToolCallResult is its answer.
type ToolCallResult struct {
	Output       json.RawMessage `json:"output"`
	IsError      bool            `json:"is_error"`
	DaemonLogged bool            `json:"daemon_logged"`
}

// Relayed reports whether this process is a tool started by an agent
// runtime with a relay (CTX_AGENT_FD).
func Relayed() bool { return os.Getenv(envAgentFD) != "" }

// RelayToolCall is the tool's side: it sends the call to the runtime.
func RelayToolCall(ctx context.Context, req ToolCallRequest) (ToolCallResult, error) {
	args, err := json.Marshal(req)
	if err != nil {
		return ToolCallResult{}, abi.Errorf(abi.EINVAL, "tool %s: %v", req.Tool, err)
	}
	res, err := toolOps(ctx, ToolCallOp, args)
	if err != nil {
		return ToolCallResult{}, err
	}
	raw, _ := res.(json.RawMessage)
	var out ToolCallResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return ToolCallResult{}, abi.Errorf(abi.EPROTO, "tool %s: relay answer: %v", req.Tool, err)
	}
	return out, nil
}

// wantsRelay reports whether the tool the runtime starts needs a relay:
// the agent.* tools and projected tools (object metadata source=).
func wantsRelay(t Tool) bool {
	if strings.HasPrefix(t.Name, "agent.") {
		return true
	}
	if !isObject(t.File) {
		return false
	}
	// t.File may be another user's, and may have been swapped since
	// isObject read it: read it again only as a regular file, bounded,
	// never blocking on a FIFO and never through a symlink.
	b, err := safefs.ReadFile(t.File, abi.MaxControlFile)
	if err != nil {
		return false
	}
	m, err := tree.ParseMeta(b)
	return err == nil && m.Get("source") != ""
}

// toolCall is the launcher's side: authorize against the tree as it holds
// the agent, then call the projected tool.
func (a *Agent) toolCall(ctx context.Context, who ToolCaller, args json.RawMessage) (any, error) {
	var req ToolCallRequest
	if err := json.Unmarshal(args, &req); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "tool call: %v", err)
	}
	t, err := a.AuthorizeTool(req.Tool)
	if err != nil {
		return nil, err
	}
	o, err := tree.Resolve(t.File)
	if err != nil {
		return nil, err
	}
	if o.Class != abi.ClassTool || !toolsrc.IsProjected(o) {
		return nil, abi.Errorf(abi.EACCES, "tool %s is not a projected tool: it runs inside the sandbox", req.Tool)
	}
	if req.TimeoutMS < 0 || req.TimeoutMS > 86400*1000 {
		return nil, abi.Errorf(abi.EINVAL, "tool %s: timeout out of range", req.Tool)
	}
	source, actor := "agent", "agent:"+a.Name
	inv := toolsrc.Invocation{ExecutionScope: "foreground", Source: &source, Actor: &actor}
	if who.Session != "" {
		s := who.Session
		inv.SessionID = &s
	}
	res, err := toolsrc.Call(ctx, o, req.Input, toolsrc.CallOptions{Run: req.Run, DryRun: req.DryRun,
		Timeout: time.Duration(req.TimeoutMS) * time.Millisecond, Invocation: inv, Credential: a.hostCredential()})
	if err != nil {
		return nil, err
	}
	return ToolCallResult{Output: res.Output, IsError: res.IsError, DaemonLogged: res.DaemonLogged}, nil
}

// hostCredential is who a process plugin of this agent runs as when the
// launcher is root: the agent's own ids for iso=uid and iso=userns (the
// sandbox's identity on the host); nil runs it as the launcher (iso=shared
// uses the caller's identity inside the sandbox too).
func (a *Agent) hostCredential() *syscall.Credential {
	if os.Geteuid() != 0 || a.Iso == IsoShared {
		return nil
	}
	c := &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: []uint32{}}
	for _, g := range a.Groups {
		c.Groups = append(c.Groups, uint32(g))
	}
	return c
}
