package agent

import (
	"context"
	"encoding/json"
	"os"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/tree"
)

// SessionHost is the Host of a run whose session and model this process
// holds: the launcher answers a sandboxed runtime's requests with it, so
// the session files, the provider key and the policy it checks all stay
// outside the sandbox.
type SessionHost struct {
	Agent   *Agent // as the launcher loaded it from the tree
	Session *Session
	Who     ToolCaller // the run, for the agent.* operations
	// Approver answers tool calls whose effects need confirmation (a
	// terminal of a one-shot run); nil: nobody can, they are refused.
	Approver Approver

	history []model.Message
	loaded  bool
}

// History reads the session's conversation once per run.
func (h *SessionHost) History() ([]model.Message, error) {
	if !h.loaded {
		m, err := h.Session.Messages()
		if err != nil {
			return nil, abi.Errorf(abi.EIO, "session %s: %w", h.Session.Name, err)
		}
		h.history, h.loaded = m, true
	}
	return h.history, nil
}

// Model is the model broker: it checks allow <type> model:<id> use against
// the agent's policy as the tree holds it (whatever the runtime asked), the
// trust of the model's steering files for this process, then calls the
// model with this process's credentials, the history and fresh.
func (h *SessionHost) Model(ctx context.Context, id string, fresh []model.Message, tools []model.ToolSpec, emit func(abi.Event) error) error {
	if err := abi.ValidModelID(id); err != nil {
		return err
	}
	if err := h.Agent.AuthorizeModel(id); err != nil {
		return err
	}
	mo, err := h.Agent.ModelObject(id)
	if err != nil {
		return err
	}
	if err := tree.CheckSteering(mo, os.Geteuid()); err != nil {
		return err // the key goes where the model points
	}
	m, err := model.Open(mo)
	if err != nil {
		return err
	}
	hist, err := h.History()
	if err != nil {
		return err
	}
	msgs := append(append(make([]model.Message, 0, len(hist)+len(fresh)), hist...), fresh...)
	// A call by the provider-encoded name of a tool that was not offered
	// is decoded here, against the tree: inside the sandbox the agent's
	// view does not show tools it may not run, so the runtime could not
	// tell that shell_exec means shell.exec, and its refusal and event
	// must name the real tool.
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.Name] = true
	}
	decode := func(e abi.Event) error {
		if e.Type == abi.EvToolCall {
			e.Name = h.Agent.DecodeToolName(e.Name, offered)
		}
		return emit(e)
	}
	_, err = m.Stream(ctx, abi.RouteAgent, m.Request(model.Input{Messages: msgs, Tools: tools}), decode)
	return err
}

// Save appends the turn's messages to the session.
func (h *SessionHost) Save(msgs []model.Message) error { return h.Session.AppendMessages(msgs) }

// Record appends one event record to the session.
func (h *SessionHost) Record(r Record) { h.Session.Event(r) }

// AgentOp runs an agent.* operation with this agent as the parent.
func (h *SessionHost) AgentOp(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error) {
	res, err := h.Agent.agentOp(ctx, h.Who, op, args)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "agent.%s: %v", op, err)
	}
	return b, nil
}

// Approve asks the run's Approver; without one, nobody can approve.
func (h *SessionHost) Approve(ctx context.Context, req ApprovalRequest) (bool, error) {
	if h.Approver == nil {
		return false, nobodyApproves(req)
	}
	if err := abi.ValidName(req.Tool); err != nil {
		return false, abi.Errorf(abi.EACCES, "approval asked for an invalid tool name")
	}
	req.Agent = h.Agent.Name // the launcher's own account of who asks
	return h.Approver(ctx, req)
}
