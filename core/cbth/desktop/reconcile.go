package desktop

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// HeartbeatState is what the bridge could verify about the caller
// heartbeat after automation_update when note-arm's answer was lost.
type HeartbeatState string

const (
	HeartbeatPaused  HeartbeatState = "paused"  // verified PAUSED: the arm never took effect
	HeartbeatActive  HeartbeatState = "active"  // Codex accepted the update: the arm took effect
	HeartbeatUnknown HeartbeatState = "unknown" // neither could be verified
)

// ReconcileRequest is reconcile-arm: the bridge's durable reconciliation
// after automation_update was accepted but note-arm's result is unknown.
type ReconcileRequest struct {
	SourceThreadID  string         `json:"source_thread_id"`
	AttemptID       string         `json:"attempt_id"`
	Generation      int64          `json:"generation"`
	BridgeRequestID string         `json:"bridge_request_id"`
	Heartbeat       HeartbeatState `json:"heartbeat_state"`
}

// ReconcileResult says how the arm was settled.
type ReconcileResult struct {
	Outcome      delivery.Outcome      `json:"outcome"`
	Resolution   Resolution            `json:"resolution,omitempty"`
	Token        delivery.Token        `json:"token"`
	AttemptState delivery.AttemptState `json:"attempt_state,omitempty"`
	Arm          *ArmResult            `json:"arm,omitempty"`
}

// ReconcileArm settles an arm in the seed's order: (1) the attempt is in
// cooldown with armed_generation equal to its generation -> the arm
// succeeded and only the answer was lost (or the bridge saw Codex accept
// the update -> note-arm now); (2) its batch closed handoff_recorded at this
// attempt -> it stays so; (3) the heartbeat is verified PAUSED -> the
// attempt is abandoned and the batch keeps automatic replay; (4) nothing
// can be proven -> abandoned, the batch manual_resolution_only and the
// binding degraded. Only the bridge request that holds the lease may
// settle an arm_pending attempt (lease-held otherwise).
func (sv *Service) ReconcileArm(ctx context.Context, a audit.Actor, r ReconcileRequest) (*ReconcileResult, error) {
	if err := validToken(delivery.Token{SourceThreadID: r.SourceThreadID, AttemptID: r.AttemptID, Generation: r.Generation}); err != nil {
		return nil, err
	}
	if err := validID("--bridge-request-id", r.BridgeRequestID); err != nil {
		return nil, err
	}
	switch r.Heartbeat {
	case HeartbeatPaused, HeartbeatActive, HeartbeatUnknown:
	default:
		return nil, errInvalid("--heartbeat-state must be paused, active or unknown, not %q", r.Heartbeat)
	}
	observed := sv.Observe().Fingerprint()
	res := &ReconcileResult{}
	err := sv.run(ctx, a, func(o *delivery.Op) error { return sv.reconcileArm(o, r, observed, res) })
	return res, err
}

type attemptRow struct {
	state       delivery.AttemptState
	batchState  delivery.BatchState
	closeReason sql.NullString
	boundaryAtt sql.NullString
	bridgeReq   sql.NullString
}

func loadAttempt(o *delivery.Op, tok delivery.Token) (attemptRow, error) {
	var r attemptRow
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT a.state, b.state, b.close_reason, b.boundary_attempt_id, a.bridge_request_id
		FROM attempts a JOIN batches b ON b.batch_id = a.batch_id WHERE a.attempt_id = ?`, tok.AttemptID).
		Scan(&r.state, &r.batchState, &r.closeReason, &r.boundaryAtt, &r.bridgeReq)
	return r, err
}

func (sv *Service) reconcileArm(o *delivery.Op, r ReconcileRequest, observed string, res *ReconcileResult) error {
	tok, ok, err := tokenOf(o, r.SourceThreadID, r.AttemptID, r.Generation)
	res.Token, res.Outcome = tok, delivery.OutcomeStaleOrSuperseded
	if err != nil || !ok {
		return err
	}
	row, err := loadAttempt(o, tok)
	if err != nil {
		return err
	}
	res.AttemptState = row.state
	b, err := GetBinding(o.Ctx, o.Tx, tok.SourceThreadID)
	if err != nil {
		return err
	}
	switch {
	case row.state == delivery.AttemptCooldown && b != nil && b.ArmedGeneration != nil && *b.ArmedGeneration == tok.Generation:
		res.Outcome, res.Resolution = delivery.OutcomeOK, ResolvedArmSucceeded
		return nil
	case row.closeReason.String == string(delivery.CloseHandoffRecorded) && row.boundaryAtt.String == tok.AttemptID:
		res.Outcome, res.Resolution = delivery.OutcomeOK, ResolvedBoundaryCrossed
		return nil
	case row.state != delivery.AttemptArmPending:
		return nil
	case row.bridgeReq.String != r.BridgeRequestID:
		res.Outcome = delivery.OutcomeLeaseHeld
		return nil
	}
	switch r.Heartbeat {
	case HeartbeatActive:
		arm, err := sv.noteArm(o, ArmRequest{SourceThreadID: tok.SourceThreadID, AttemptID: tok.AttemptID,
			Generation: tok.Generation, BridgeRequestID: r.BridgeRequestID}, observed, true)
		if err != nil {
			return err
		}
		res.Arm, res.Outcome, res.AttemptState = &arm, arm.Outcome, arm.AttemptState
		if arm.Outcome == delivery.OutcomeOK {
			res.Resolution = ResolvedArmSucceeded
		}
		return nil
	case HeartbeatPaused:
		dr, err := delivery.Abandon(o, tok, false, "reconcile: caller heartbeat verified PAUSED; the arm never took effect")
		if err != nil || dr.Outcome != delivery.OutcomeOK {
			res.Outcome = dr.Outcome
			return err
		}
		res.Outcome, res.Resolution, res.AttemptState = delivery.OutcomeOK, ResolvedAbandonedReplay, dr.AttemptState
		return nil
	}
	if err := failArmClosed(o, tok, b, "reconcile: neither the arm nor a re-pause can be proven"); err != nil {
		return err
	}
	res.Outcome, res.Resolution, res.AttemptState = delivery.OutcomeOK, ResolvedManualResolution, delivery.AttemptAbandoned
	return nil
}

// failArmClosed is the seed's last resort for an arm nobody can prove:
// the attempt abandoned, the head batch manual_resolution_only, the
// binding degraded.
func failArmClosed(o *delivery.Op, tok delivery.Token, b *Binding, reason string) error {
	dr, err := delivery.Abandon(o, tok, true, reason)
	if err != nil || dr.Outcome != delivery.OutcomeOK {
		return err
	}
	if b != nil && b.BindingState == Bound {
		_, err = casBinding(o, b, Bound, Degraded, reason, map[string]any{"degraded_reason": reason,
			"degraded_at": o.At(), "pause_not_before": nil, "pause_deadline": nil})
	}
	return err
}

// expireArmPending is the sweep's resolver for an attempt whose
// arm_pending_deadline passed: still arm_pending means note-arm never
// landed and the bridge never proved a re-pause, so nothing can be proven
// (a proven arm is already cooldown, a proven pause already abandoned it).
func expireArmPending(o *delivery.Op, tok delivery.Token) (bool, error) {
	h, ok, err := delivery.LoadHead(o, tok)
	if err != nil || !ok || h.AttemptState != delivery.AttemptArmPending {
		return false, err
	}
	b, err := GetBinding(o.Ctx, o.Tx, tok.SourceThreadID)
	if err != nil {
		return false, err
	}
	return true, failArmClosed(o, tok, b, "arm_pending_deadline passed: arm outcome unknown")
}

// ReconcileReport counts what one Desktop reconcile did.
type ReconcileReport struct {
	Degraded            map[string]string `json:"degraded"`
	ManualArtifactRead  int               `json:"manual_requires_artifact_read"`
	EnvelopesCollected  int               `json:"envelopes_collected"`
	LeasesExpired       int               `json:"artifact_leases_expired"`
	MarkersCollected    int               `json:"relay_markers_collected"`
	SnapshotsCollected  int               `json:"snapshots_collected"`
	FingerprintMismatch bool              `json:"fingerprint_mismatch"`
}

// Reconcile is the Desktop part of every sweep and of bridge-preflight:
// bindings whose mirror differs from the installation state, or whose
// installation fingerprint no longer matches what is observed, or whose
// pause_deadline passed unverified, become degraded (with why); Desktop
// head batches that need an artifact read go to manual follow-up; expired
// recovery envelopes, leases, markers and snapshot revisions are collected.
func (sv *Service) Reconcile(ctx context.Context, a audit.Actor) (ReconcileReport, error) {
	rep := ReconcileReport{Degraded: map[string]string{}}
	observed := sv.Observe().Fingerprint()
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		st, err := LoadInstallation(o.Ctx, o.Tx)
		if err != nil {
			return err
		}
		bs, err := ListBindings(o.Ctx, o.Tx)
		if err != nil {
			return err
		}
		rep.FingerprintMismatch = st.ValidationFingerprint != nil && *st.ValidationFingerprint != observed
		for i := range bs {
			b := &bs[i]
			if b.BindingState != Bound {
				continue
			}
			why := ""
			switch {
			case b.mirrorMismatch(st) != "":
				why = "mirror differs from the installation state: " + b.mirrorMismatch(st)
			case rep.FingerprintMismatch:
				why = fmt.Sprintf("validation_fingerprint changed: installation has %s, observed %s",
					*st.ValidationFingerprint, observed)
			case b.ArmedGeneration != nil && b.ArmedGenerationQuiescedAt == nil && b.PauseDeadline != nil &&
				*b.PauseDeadline <= o.At():
				why = fmt.Sprintf("pause_deadline %s passed without a verified pause of generation %d",
					*b.PauseDeadline, *b.ArmedGeneration)
			default:
				continue
			}
			ok, err := degrade(o, b, why)
			if err != nil {
				return err
			}
			if ok {
				rep.Degraded[b.SourceThreadID] = why
			}
		}
		return sv.manualArtifactRead(o, &rep)
	})
	if err != nil {
		return rep, err
	}
	if err := sv.collect(ctx, a, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// manualArtifactRead moves every open automatic Desktop batch that needs an
// artifact read to manual_resolution_only: v1 never lets it reach the
// automatic caller path, and it must not wait there silently.
func (sv *Service) manualArtifactRead(o *delivery.Op, rep *ReconcileReport) error {
	rows, err := o.Tx.QueryContext(o.Ctx, `SELECT batch_id FROM batches WHERE target_kind = 'desktop'
		AND state != 'closed' AND replay_policy = 'automatic' AND requires_artifact_read = 1 ORDER BY batch_id`)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if err := delivery.MarkManualOnly(o, id, "requires_artifact_read: operator/manual follow-up"); err != nil {
			return err
		}
		rep.ManualArtifactRead++
	}
	return rows.Err()
}

func nowTS(s *store.Store) string { return store.TS(s.Now()) }
