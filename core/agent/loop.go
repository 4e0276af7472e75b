package agent

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/core/model"
)

// DefaultMaxIterations bounds model calls per run.
const DefaultMaxIterations = 16

// RunOptions is one run of the agent loop.
type RunOptions struct {
	Run           string          // run id
	Session       string          // the session's name, for the tools (CTX_AGENT_SESSION)
	Host          Host            // history in, messages, events and model calls out
	Input         []model.Message // this turn's new messages (the task)
	Emit          func(abi.Event) error
	MaxIterations int
	ToolTimeout   time.Duration // default per tool; a tool's .d/timeout overrides it
}

// Host is everything the agent loop needs from outside the sandbox it
// runs in: the session's conversation and events (kept by the launcher,
// out of the agent's reach), its model (called by the launcher, which
// holds the credentials and checks allow <type> model:<p>/<m> use again)
// and the agent lifecycle operations of the agent.* tools. The launcher
// serves it over the turn's connection (turn.go); SessionHost serves it in
// process.
type Host interface {
	// History is the session's conversation before this turn.
	History() ([]model.Message, error)
	// Model streams one call of model id with the session's history
	// followed by fresh (this turn's input and replies so far) and the
	// tools offered, emitting the driver's body frames.
	Model(ctx context.Context, id string, fresh []model.Message, tools []model.ToolSpec, emit func(abi.Event) error) error
	// Save appends this turn's messages to the conversation.
	Save(msgs []model.Message) error
	// Record adds one line to the session's events.jsonl (best effort).
	Record(r Record)
	// AgentOp runs agent.create, agent.start or agent.stop for this agent.
	AgentOp(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error)
	// Approve asks whoever can approve a tool call whose effects need
	// confirmation (effects.go); where nobody can, it is an EACCES error.
	Approve(ctx context.Context, req ApprovalRequest) (bool, error)
}

// ParseTask reads an agent's input: a JSON object {"task":…} or
// {"messages":[…]}, a JSON string, or plain text.
func ParseTask(raw []byte) ([]model.Message, error) {
	t := strings.TrimSpace(string(raw))
	switch {
	case t == "":
		return nil, abi.Errorf(abi.EINVAL, "empty task")
	case strings.HasPrefix(t, "{"):
		var in struct {
			Task     *string         `json:"task"`
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal([]byte(t), &in); err != nil {
			return nil, abi.Errorf(abi.EINVAL, "bad JSON input: %v", err)
		}
		if in.Task != nil {
			if strings.TrimSpace(*in.Task) == "" {
				return nil, abi.Errorf(abi.EINVAL, "empty task")
			}
			return []model.Message{{Role: "user", Content: *in.Task}}, nil
		}
		mi, err := model.ParseInput([]byte(t))
		if err != nil {
			return nil, abi.Errorf(abi.EINVAL, `want {"task":"…"} or {"messages":[…]}: %v`, err)
		}
		return mi.Messages, nil
	case strings.HasPrefix(t, `"`):
		var s string
		if err := json.Unmarshal([]byte(t), &s); err != nil || strings.TrimSpace(s) == "" {
			return nil, abi.Errorf(abi.EINVAL, "bad task string")
		}
		return []model.Message{{Role: "user", Content: s}}, nil
	}
	return []model.Message{{Role: "user", Content: strings.TrimRight(string(raw), "\r\n")}}, nil
}

// Run is the agent loop: the model (through the agent route) sees the
// session's conversation, this turn's input and the tools this agent may
// execute; every tool_call is checked and executed by the agent, its
// result or refusal fed back, until the model answers without calling a
// tool or MaxIterations model calls were made. It emits body frames only
// (delta, message, tool_call, role "tool" messages, usage); the caller
// owns start, error and done. The conversation is saved when the run ends
// ok; events.jsonl gets a record of every step.
func (a *Agent) Run(ctx context.Context, o RunOptions) (err error) {
	sealRuntime() // before any tool can start: see environ.go
	host := o.Host
	self := "agent/" + a.Name
	host.Record(Record{Type: "run.start", Object: self, Status: abi.StatusOK, Run: o.Run})
	defer func() {
		host.Record(Record{Type: "run.done", Object: self, Status: statusOf(err), Run: o.Run, Code: string(abi.CodeOf(err))})
	}()
	if len(a.Models) == 0 {
		return abi.Errorf(abi.EINVAL, "agent %s: .d/model names no model", a.Name)
	}
	if err := a.AuthorizeMounts(); err != nil {
		return err
	}
	id := a.Models[0]
	if err := a.AuthorizeModel(id); err != nil {
		host.Record(Record{Type: "model.call", Object: "model/" + id, Status: "denied", Run: o.Run, Code: string(abi.EACCES)})
		return err
	}
	if _, err := host.History(); err != nil {
		return abi.Errorf(abi.CodeOf(err), "session %s: %w", o.Session, err)
	}
	fresh := append([]model.Message(nil), o.Input...)
	tools := a.ToolSpecs()
	offered := make(map[string]bool, len(tools))
	for _, t := range tools {
		offered[t.Name] = true
	}
	max := o.MaxIterations
	if max <= 0 {
		max = DefaultMaxIterations
	}
	for i := 0; i < max; i++ {
		reply, err := a.modelTurn(ctx, id, fresh, tools, offered, o)
		host.Record(Record{Type: "model.call", Object: "model/" + id, Status: statusOf(err), Run: o.Run, Code: string(abi.CodeOf(err))})
		if err != nil {
			return err
		}
		fresh = append(fresh, reply)
		if len(reply.ToolCalls) == 0 {
			return host.Save(fresh)
		}
		for _, call := range reply.ToolCalls {
			res, err := a.callTool(ctx, call, offered, o)
			if err != nil {
				return err
			}
			fresh = append(fresh, res)
		}
	}
	return abi.Errorf(abi.EIO, "agent %s: no final answer after %d model calls", a.Name, max)
}

// modelTurn streams one model call to o.Emit and returns the assistant
// message it amounts to: its text and the tool calls it asked for. A call
// by a provider-encoded name of a tool that was not offered (the driver
// decodes only offered names) is decoded here when that is unambiguous,
// so the call, its refusal and its event name the real tool.
func (a *Agent) modelTurn(ctx context.Context, id string, fresh []model.Message, tools []model.ToolSpec, offered map[string]bool, o RunOptions) (model.Message, error) {
	reply := model.Message{Role: "assistant"}
	var deltas, final strings.Builder
	sawMessage := false
	emit := func(e abi.Event) error {
		switch e.Type {
		case abi.EvStart, abi.EvDone:
			return nil // the run's own frames, not the driver's
		case abi.EvDelta:
			deltas.WriteString(e.Text)
		case abi.EvMessage:
			if e.Role == "assistant" || e.Role == "" {
				sawMessage = true
				final.WriteString(e.MessageText())
			}
		case abi.EvToolCall:
			if e.CallID == "" {
				e.CallID = ids.New("call_")
			}
			e.Name = a.DecodeToolName(e.Name, offered)
			args := e.Arguments
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			reply.ToolCalls = append(reply.ToolCalls, model.ToolCall{ID: e.CallID, Name: e.Name, Arguments: args})
		}
		return o.Emit(e)
	}
	if err := o.Host.Model(ctx, id, fresh, tools, emit); err != nil {
		return reply, err
	}
	reply.Content = deltas.String()
	if sawMessage {
		reply.Content = final.String()
	}
	return reply, nil
}

// callTool checks and executes one tool call and emits its result as a
// message of role "tool". A refusal or a tool failure is the tool's
// result, fed back to the model as {"error":{"code":…,"message":…}}; it
// never ends the run. Only a failing emit does. A tool that was not
// offered to the model in this run is refused (EACCES) whatever else is
// true of it: the model runs only what the agent showed it.
func (a *Agent) callTool(ctx context.Context, call model.ToolCall, offered map[string]bool, o RunOptions) (model.Message, error) {
	var out string
	var t Tool
	var err error
	if offered[call.Name] {
		t, err = a.AuthorizeTool(call.Name)
	} else {
		err = a.refuseUnoffered(call.Name)
	}
	if err == nil {
		if !json.Valid(call.Arguments) || !strings.HasPrefix(strings.TrimSpace(string(call.Arguments)), "{") {
			err = abi.Errorf(abi.EINVAL, "tool %s: arguments are not a JSON object", call.Name)
		}
	}
	if err == nil {
		out, err = a.runWithEffects(ctx, t, call.Arguments, call.ID, o)
	}
	o.Host.Record(Record{Type: "tool.call", Object: toolObject(call.Name), Status: statusOf(err), Run: o.Run,
		CallID: call.ID, Code: string(abi.CodeOf(err))})
	if err != nil {
		if ctx.Err() != nil {
			return model.Message{}, abi.Errorf(abi.CodeOf(ctx.Err()), "run stopped during tool %s: %w", call.Name, ctx.Err())
		}
		if abi.CodeOf(err) != abi.EREMOTEIO || out == "" {
			b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": string(abi.CodeOf(err)), "message": err.Error()}})
			out = string(b)
		}
	}
	e := abi.TextMessage(o.Run, "tool", out)
	e.CallID, e.Name = call.ID, call.Name
	if err := o.Emit(e); err != nil {
		return model.Message{}, err
	}
	return model.Message{Role: "tool", Content: out, ToolCallID: call.ID, Name: call.Name}, nil
}
