package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/wire/codex"
)

// activeTurnView is the seed's machine-readable risk view of the active
// turn a steer would join: the thread's current settings are the ones the
// active turn runs under.
type activeTurnView struct {
	Kind             string `json:"active_turn_kind"`
	TurnID           string `json:"active_turn_id"`
	RequiresApproval bool   `json:"active_turn_requires_approval"`
	RequiresNetwork  bool   `json:"active_turn_requires_network"`
	RequiresWrite    bool   `json:"active_turn_requires_write_access"`
	RiskClass        string `json:"active_turn_risk_class"`
}

// Risk classes of an active turn.
const (
	riskReadOnlyLow = "read_only_low_risk"
	riskElevated    = "elevated"
)

// steerable applies the seed's limits on turn/steer: the session opted in
// (--enable-turn-steer), the server has it, the batch is read-only and the
// active turn itself is read_only_low_risk. Otherwise the batch waits for
// idle; why says so (empty when steering is simply off).
func (rt *runtime) steerable(s *Session, v view, b *delivery.Batch) (bool, string) {
	if !s.EnableTurnSteer {
		return false, ""
	}
	switch {
	case rt.caps == nil || !rt.caps.Features.TurnSteer:
		return false, "turn/steer is not supported by this codex; waiting for the thread to be idle"
	case !readOnlyBatch(b):
		return false, "turn/steer needs a read-only batch; waiting for the thread to be idle"
	case v.resume == nil:
		return false, "the active turn's permissions are unknown; waiting for the thread to be idle"
	}
	a := rt.activeView(v)
	if a.TurnID == "" {
		return false, "no active turn id observed; waiting for the thread to be idle"
	}
	if a.RiskClass != riskReadOnlyLow {
		return false, fmt.Sprintf("the active turn is %s (approval=%t network=%t write_access=%t); waiting for the thread to be idle",
			a.RiskClass, a.RequiresApproval, a.RequiresNetwork, a.RequiresWrite)
	}
	return true, ""
}

func (rt *runtime) activeView(v view) activeTurnView {
	a := activeTurnView{Kind: "user", TurnID: rt.activeTurn, RequiresApproval: v.snap.Allows.Approval,
		RequiresNetwork: v.snap.Allows.Network, RequiresWrite: v.snap.Allows.Write, RiskClass: riskElevated}
	if a.TurnID == "" {
		a.TurnID = rt.latestActiveTurn(*v.resume)
	}
	if !a.RequiresApproval && !a.RequiresNetwork && !a.RequiresWrite {
		a.RiskClass = riskReadOnlyLow
	}
	return a
}

// latestActiveTurn reads the thread's newest turn when no turn/started was
// seen on this connection.
func (rt *runtime) latestActiveTurn(r codex.ThreadResumeResponse) string {
	if rt.caps == nil || !rt.caps.Features.TurnsList {
		return ""
	}
	ctx, cancel := context.WithTimeout(rt.m.ctx, 10*time.Second)
	defer cancel()
	var page codex.ThreadTurnsListResponse
	err := rt.cl.Call(ctx, codex.MethodThreadTurnsList, codex.ThreadTurnsListParams{ThreadID: r.Thread.ID, Limit: 1,
		ItemsView: "notLoaded"}, &page)
	if err != nil || len(page.Data) == 0 || page.Data[0].Status != codex.TurnInProgress {
		return ""
	}
	return page.Data[0].ID
}

// steer delivers the batch into the active turn with turn/steer: the same
// accept_pending barrier and correlation marker as turn/start, the active
// turn id as the precondition and as the delivery_turn_id to observe.
func (rt *runtime) steer(s *Session, tok delivery.Token, b *delivery.Batch, v view) error {
	a := rt.activeView(v)
	reqID, marker := ids.New("rpc_"), ids.New("cbth-mk-")
	detail := map[string]any{"effective": v.eff, "active_turn": a}
	if ok, err := rt.begin(s, tok, delivery.ModeCLITurnSteer, reqID, marker, detail); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(rt.m.ctx, rpcTimeout)
	defer cancel()
	var resp codex.TurnSteerResponse
	callErr := rt.cl.Call(ctx, codex.MethodTurnSteer, codex.TurnSteerParams{ThreadID: tok.SourceThreadID,
		Input: []codex.UserInput{{Type: "text", Text: rt.prompt(b, tok, marker)}}, ExpectedTurnID: a.TurnID,
		ClientUserMessageID: marker}, &resp)
	var rpcErr *codex.RPCError
	switch {
	case callErr == nil && resp.TurnID != "":
		return rt.accepted(tok, delivery.ModeCLITurnSteer, resp.TurnID)
	case errors.As(callErr, &rpcErr):
		// Refused before acceptance (the turn ended, or is not steerable):
		// the seed's benign pre-accept reject; the next try waits for idle.
		return rt.rejected(tok, "turn/steer", rpcErr)
	default:
		return rt.reconcileUnknown(tok, marker, fmt.Sprint(callErr))
	}
}
