package desktop

import (
	"context"
	"fmt"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// ArmRequest is note-arm-pending's and note-arm's input: the seed's
// (source_thread_id, attempt_id, generation) key and the bridge's owner
// token; note-arm adds the lease and, when the bridge saw it, the id
// automation_update returned.
type ArmRequest struct {
	SourceThreadID   string `json:"source_thread_id"`
	AttemptID        string `json:"attempt_id"`
	Generation       int64  `json:"generation"`
	BridgeRequestID  string `json:"bridge_request_id"`
	BridgeArmLeaseID string `json:"bridge_arm_lease_id,omitempty"`
	AutomationID     string `json:"automation_id,omitempty"`
}

func (r ArmRequest) validate(needLease bool) error {
	if err := validToken(delivery.Token{SourceThreadID: r.SourceThreadID, AttemptID: r.AttemptID, Generation: r.Generation}); err != nil {
		return err
	}
	if err := validID("--bridge-request-id", r.BridgeRequestID); err != nil {
		return err
	}
	if needLease {
		if err := validID("--bridge-arm-lease-id", r.BridgeArmLeaseID); err != nil {
			return err
		}
	}
	if r.AutomationID != "" {
		return validID("--automation-id", r.AutomationID)
	}
	return nil
}

// ArmResult is what the bridge learns: the outcome, the token, the lease
// (only for its owner), the caller automation to update and, after
// note-arm, the pause window.
type ArmResult struct {
	delivery.Result
	SnapshotRevision    string   `json:"snapshot_revision,omitempty"`
	BindingID           string   `json:"binding_id,omitempty"`
	CallerAutomationID  *string  `json:"caller_automation_id,omitempty"`
	ArmedGeneration     *int64   `json:"armed_generation,omitempty"`
	PauseNotBefore      *string  `json:"pause_not_before,omitempty"`
	PauseDeadline       *string  `json:"pause_deadline,omitempty"`
	NotAutomaticBecause []string `json:"not_automatic_because,omitempty"`
}

// tokenOf completes (thread, attempt, generation) with the attempt's batch;
// ok=false when no such attempt exists on that thread.
func tokenOf(o *delivery.Op, thread, attempt string, gen int64) (delivery.Token, bool, error) {
	tok := delivery.Token{SourceThreadID: thread, AttemptID: attempt, Generation: gen}
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT batch_id FROM attempts WHERE attempt_id = ? AND source_thread_id = ?
		AND generation = ?`, attempt, thread, gen).Scan(&tok.BatchID)
	if store.IsNoRows(err) {
		return tok, false, nil
	}
	return tok, err == nil, err
}

func stale(tok delivery.Token, st delivery.AttemptState) ArmResult {
	return ArmResult{Result: delivery.Result{Outcome: delivery.OutcomeStaleOrSuperseded, Token: tok, AttemptState: st}}
}

func outcome(out delivery.Outcome, tok delivery.Token, h delivery.Head, why ...string) ArmResult {
	return ArmResult{Result: delivery.Result{Outcome: out, Token: tok, AttemptState: h.AttemptState},
		SnapshotRevision: h.SnapshotRevision, NotAutomaticBecause: why}
}

// gate loads what every automatic step checks: the installation state, the
// binding and why automatic continuation is not allowed (nil when it is).
func (sv *Service) gate(o *delivery.Op, thread, observed string) (*Binding, []string, error) {
	st, err := LoadInstallation(o.Ctx, o.Tx)
	if err != nil {
		return nil, nil, err
	}
	b, err := GetBinding(o.Ctx, o.Tx, thread)
	if err != nil {
		return nil, nil, err
	}
	return b, automaticGate(st, b, observed), nil
}

// NoteArmPending is the bridge's durable barrier before automation_update:
// prepared -> arm_pending with a bridge_arm_lease, only for the head
// attempt of a bound, validated, quiesced thread whose batch needs no
// artifact read. The same bridge_request_id gets the same lease back
// (already-pending); another gets lease-held and never the lease.
func (sv *Service) NoteArmPending(ctx context.Context, a audit.Actor, r ArmRequest) (*ArmResult, error) {
	if err := r.validate(false); err != nil {
		return nil, err
	}
	observed := sv.Observe().Fingerprint()
	var res ArmResult
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		var err error
		res, err = sv.noteArmPending(o, r, observed)
		return err
	})
	return &res, err
}

func (sv *Service) noteArmPending(o *delivery.Op, r ArmRequest, observed string) (ArmResult, error) {
	tok, ok, err := tokenOf(o, r.SourceThreadID, r.AttemptID, r.Generation)
	if err != nil || !ok {
		return stale(tok, ""), err
	}
	h, ok, err := delivery.LoadHead(o, tok)
	if err != nil || !ok {
		return stale(tok, h.AttemptState), err
	}
	b, why, err := sv.gate(o, tok.SourceThreadID, observed)
	switch {
	case err != nil:
		return ArmResult{}, err
	case h.TargetKind != delivery.TargetDesktop:
		return outcome(delivery.OutcomeBindingInvalid, tok, h, "batch targets "+string(h.TargetKind)), nil
	case len(why) > 0:
		return outcome(delivery.OutcomeBindingInvalid, tok, h, why...), nil
	case h.ReplayPolicy != delivery.ReplayAutomatic || h.RequiresArtifactRead:
		return outcome(delivery.OutcomeManualResolutionOnly, tok, h), nil
	case h.AttemptState != delivery.AttemptPrepared && h.AttemptState != delivery.AttemptArmPending:
		// Already armed (cooldown) or ended: the barrier is behind it.
		return outcome(delivery.OutcomeStaleOrSuperseded, tok, h), nil
	case h.AttemptState == delivery.AttemptPrepared && !b.quiesced():
		return outcome(delivery.OutcomeTransientNotReady, tok, h,
			fmt.Sprintf("armed_generation %d is not quiesced yet", *b.ArmedGeneration)), nil
	}
	dr, err := delivery.NoteArmPending(o, tok, r.BridgeRequestID)
	if err != nil {
		return ArmResult{}, err
	}
	res := ArmResult{Result: dr, SnapshotRevision: h.SnapshotRevision, BindingID: b.BindingID,
		CallerAutomationID: b.CallerAutomationID}
	if dr.Outcome == delivery.OutcomeOK {
		_, err = o.Tx.ExecContext(o.Ctx, `UPDATE attempts SET binding_id = ? WHERE attempt_id = ?`, b.BindingID, tok.AttemptID)
	}
	return res, err
}

// NoteArm records that Codex accepted the automation_update: arm_pending
// -> cooldown under the CAS on attempt, generation, request id and lease;
// delivery_attempt_count counts it once; the binding's armed_generation
// becomes this generation with armed_generation_quiesced_at cleared and the
// pause window set (pause_not_before = last_delivery_attempt_at + delay,
// pause_deadline = pause_not_before + window). A repeat after success is
// already-armed and changes nothing.
func (sv *Service) NoteArm(ctx context.Context, a audit.Actor, r ArmRequest) (*ArmResult, error) {
	if err := r.validate(true); err != nil {
		return nil, err
	}
	observed := sv.Observe().Fingerprint()
	var res ArmResult
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		var err error
		res, err = sv.noteArm(o, r, observed, false)
		return err
	})
	return &res, err
}

// noteArm is note-arm; asOwner (the relay consumer acting for the bridge
// request the marker names) takes the durable lease of that request.
func (sv *Service) noteArm(o *delivery.Op, r ArmRequest, observed string, asOwner bool) (ArmResult, error) {
	tok, ok, err := tokenOf(o, r.SourceThreadID, r.AttemptID, r.Generation)
	if err != nil || !ok {
		return stale(tok, ""), err
	}
	h, ok, err := delivery.LoadHead(o, tok)
	if err != nil || !ok {
		return stale(tok, h.AttemptState), err
	}
	b, why, err := sv.gate(o, tok.SourceThreadID, observed)
	if err != nil {
		return ArmResult{}, err
	}
	if h.AttemptState == delivery.AttemptCooldown && b != nil && b.ArmedGeneration != nil && *b.ArmedGeneration == tok.Generation {
		res := outcome(delivery.OutcomeAlreadyArmed, tok, h)
		res.BindingID, res.CallerAutomationID, res.ArmedGeneration = b.BindingID, b.CallerAutomationID, b.ArmedGeneration
		res.PauseNotBefore, res.PauseDeadline = b.PauseNotBefore, b.PauseDeadline
		return res, nil
	}
	switch {
	case h.TargetKind != delivery.TargetDesktop:
		return outcome(delivery.OutcomeBindingInvalid, tok, h, "batch targets "+string(h.TargetKind)), nil
	case len(why) > 0:
		return outcome(delivery.OutcomeBindingInvalid, tok, h, why...), nil
	case h.AttemptState != delivery.AttemptArmPending:
		return outcome(delivery.OutcomeStaleOrSuperseded, tok, h), nil
	}
	lease := r.BridgeArmLeaseID
	if asOwner && r.BridgeRequestID == h.BridgeRequestID {
		lease = h.BridgeArmLeaseID
	}
	dr, err := delivery.NoteAccepted(o, tok, delivery.Accepted{Mode: delivery.ModeDesktopHeartbeat,
		BridgeRequestID: r.BridgeRequestID, BridgeLeaseID: lease})
	if err != nil || dr.Outcome != delivery.OutcomeOK {
		res := ArmResult{Result: dr, SnapshotRevision: h.SnapshotRevision}
		return res, err
	}
	notBefore := o.Now.Add(o.Cfg.Desktop.PauseNotBeforeDelay)
	sets := map[string]any{"armed_generation": tok.Generation, "armed_generation_quiesced_at": nil,
		"pause_not_before": store.TS(notBefore), "pause_deadline": store.TS(notBefore.Add(o.Cfg.Desktop.PauseDeadlineWindow)),
		"last_verified_at": o.At()}
	if ok, err := casBinding(o, b, Bound, Bound, fmt.Sprintf("note-arm: generation %d armed", tok.Generation), sets); err != nil {
		return ArmResult{}, err
	} else if !ok {
		return ArmResult{}, fmt.Errorf("desktop: binding %s changed under its own transaction", b.BindingID)
	}
	automation, state := any(nil), "unknown"
	if r.AutomationID != "" {
		automation, state = r.AutomationID, "observed"
		if b.CallerAutomationID != nil && *b.CallerAutomationID == r.AutomationID {
			state = "reconciled"
		}
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE attempts SET binding_id = ?, automation_id = ?,
		automation_binding_state = ? WHERE attempt_id = ?`, b.BindingID, automation, state, tok.AttemptID); err != nil {
		return ArmResult{}, err
	}
	res := ArmResult{Result: dr, SnapshotRevision: h.SnapshotRevision, BindingID: b.BindingID,
		CallerAutomationID: b.CallerAutomationID, ArmedGeneration: &tok.Generation}
	res.PauseNotBefore, res.PauseDeadline = ptr(sets["pause_not_before"].(string)), ptr(sets["pause_deadline"].(string))
	return res, nil
}

// QuiesceRequest is note-quiesced: the bridge verified that the caller
// heartbeat armed for Generation is PAUSED, deleted or otherwise quiet.
type QuiesceRequest struct {
	SourceThreadID  string `json:"source_thread_id"`
	Generation      int64  `json:"generation"`
	BridgeRequestID string `json:"bridge_request_id"`
}

// QuiesceResult is its answer.
type QuiesceResult struct {
	Outcome delivery.Outcome `json:"outcome"`
	Changed bool             `json:"changed"`
	Binding *Binding         `json:"binding"`
	Why     string           `json:"why,omitempty"`
}

// NoteQuiesced sets armed_generation_quiesced_at (and clears the pause
// window) only while the binding's armed_generation is Generation: any
// older generation's cleanup is a no-op, stale_or_superseded. Before
// pause_not_before it is refused (transient_not_ready) unless that
// generation's batch already recorded its handoff: the seed forbids an
// ordinary cleanup from pausing a heartbeat that may not have fired yet.
func (sv *Service) NoteQuiesced(ctx context.Context, a audit.Actor, r QuiesceRequest) (*QuiesceResult, error) {
	if err := validID("--source-thread-id", r.SourceThreadID); err != nil {
		return nil, err
	}
	if err := validID("--bridge-request-id", r.BridgeRequestID); err != nil {
		return nil, err
	}
	if r.Generation < 1 {
		return nil, errInvalid("--generation must be a positive integer")
	}
	res := &QuiesceResult{Outcome: delivery.OutcomeOK}
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		b, err := GetBinding(o.Ctx, o.Tx, r.SourceThreadID)
		if err != nil {
			return err
		}
		switch {
		case b == nil || b.ArmedGeneration == nil || *b.ArmedGeneration != r.Generation:
			res.Outcome, res.Why = delivery.OutcomeStaleOrSuperseded, "armed_generation is not this generation"
			return nil
		case b.ArmedGenerationQuiescedAt != nil:
			return nil
		}
		if b.PauseNotBefore != nil && *b.PauseNotBefore > o.At() {
			var crossed int
			if err := o.Tx.QueryRowContext(o.Ctx, `SELECT COUNT(*) FROM batches WHERE source_thread_id = ?
				AND boundary_generation = ? AND close_reason = 'handoff_recorded'`, r.SourceThreadID, r.Generation).
				Scan(&crossed); err != nil {
				return err
			}
			if crossed == 0 {
				res.Outcome, res.Why = delivery.OutcomeTransientNotReady, "before pause_not_before "+*b.PauseNotBefore
				return nil
			}
		}
		res.Changed = true
		_, err = casBinding(o, b, b.BindingState, b.BindingState,
			fmt.Sprintf("generation %d quiesced (bridge request %s)", r.Generation, r.BridgeRequestID),
			map[string]any{"armed_generation_quiesced_at": o.At(), "pause_not_before": nil, "pause_deadline": nil})
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Binding, err = GetBinding(ctx, sv.Store.DB, r.SourceThreadID)
	return res, err
}
