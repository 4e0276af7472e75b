package tool

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
)

// The optional agent lifecycle tools (agent-tool-security-abi "Agent
// Creation"). Their logic — policy agent:<name> create|start|stop and
// attenuation — lives in core/agent, which imports this package and so
// registers itself with RegisterAgentOps.

// AgentOps runs op ("create", "start", "stop") for the agent the calling
// process works for; the result is encoded as the tool's output.
type AgentOps func(ctx context.Context, op string, args json.RawMessage) (any, error)

var (
	agentOpsMu sync.RWMutex
	agentOps   AgentOps
)

// RegisterAgentOps installs the agent runtime and, with it, the agent.*
// built-ins: a binary without the agent runtime has no such tools. Call it
// at init, before the registry is first used.
func RegisterAgentOps(f AgentOps) {
	agentOpsMu.Lock()
	defer agentOpsMu.Unlock()
	agentOps = f
}

var agentNameInput = lit(`{
	"type": "object",
	"properties": {"name": {"type": "string", "minLength": 1, "maxLength": 64, "description": "child agent name"}},
	"required": ["name"],
	"additionalProperties": false
}`)

var agentCreateInput = lit(`{
	"type": "object",
	"properties": {
		"name":   {"type": "string", "minLength": 1, "maxLength": 64, "description": "child agent name"},
		"label":  {"type": "string", "description": "child label or subject type (default <name>_t)"},
		"model":  {"type": "array", "items": {"type": "string"}, "description": "provider/model ids (default: the parent's)"},
		"tools":  {"type": "array", "items": {"type": "string"}, "description": "tools the child may execute"},
		"shared": {"type": "object", "description": "shared space name to [read, write]"},
		"mount":  {"type": "array", "items": {"type": "array", "items": {"type": "string"}}, "description": "[view path, target, ro|rw]"},
		"groups": {"type": "array", "items": {"type": "integer"}, "description": "supplementary groups, a subset of the parent's"}
	},
	"required": ["name"],
	"additionalProperties": false
}`)

var agentOutput = lit(`{
	"type": "object",
	"properties": {
		"name":   {"type": "string"},
		"path":   {"type": "string"},
		"label":  {"type": "string"},
		"parent": {"type": "string"},
		"pid":    {"type": "integer"},
		"status": {"type": "string"}
	},
	"required": ["name", "status"],
	"additionalProperties": false
}`)

func agentTool(op, desc string, input json.RawMessage) Builtin {
	return Builtin{
		Name:        "agent." + op,
		Description: desc,
		Schema:      mustSchema(input, agentOutput.JSON()),
		Caps:        []string{"agent"},
		Run: func(ctx context.Context, env Env, args json.RawMessage) (json.RawMessage, error) {
			if err := Validate(input, args); err != nil {
				return nil, toolErr("agent."+op, err)
			}
			agentOpsMu.RLock()
			f := agentOps
			agentOpsMu.RUnlock()
			if f == nil {
				return nil, abi.Errorf(abi.ENOTSUP, "agent.%s: no agent runtime in this build", op)
			}
			v, err := f(ctx, op, args)
			if err != nil {
				return nil, toolErr("agent."+op, err)
			}
			return encodeResult(v)
		},
	}
}

func addAgentTools(builtins map[string]Builtin) {
	for _, b := range []Builtin{
		agentTool("create", "Create a child agent (attenuated: never more than the calling agent may do).", agentCreateInput.JSON()),
		agentTool("start", "Start a child agent's process; owned children stop when the parent dies.", agentNameInput.JSON()),
		agentTool("stop", "Stop a child agent's process.", agentNameInput.JSON()),
	} {
		if _, dup := builtins[b.Name]; dup {
			panic("tool: duplicate built-in " + b.Name)
		}
		builtins[b.Name] = b
	}
}
