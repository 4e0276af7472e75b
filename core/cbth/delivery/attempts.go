package delivery

import (
	"database/sql"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// Token is the correctness fence every adapter call carries: it must still
// name the thread's head batch, that batch's head attempt and generation.
type Token struct {
	SourceThreadID string `json:"source_thread_id"`
	BatchID        string `json:"batch_id"`
	AttemptID      string `json:"attempt_id"`
	Generation     int64  `json:"generation"`
}

// Result is what an adapter-facing helper returns: always an outcome.
type Result struct {
	Outcome Outcome `json:"outcome"`
	Token
	AttemptState       AttemptState `json:"attempt_state,omitempty"`
	BridgeArmLeaseID   string       `json:"bridge_arm_lease_id,omitempty"`
	BridgeArmLeaseDead string       `json:"bridge_arm_lease_deadline,omitempty"`
}

type headView struct {
	attemptState AttemptState
	batchState   BatchState
	replay       ReplayPolicy
	target       TargetKind
	eligibleOK   bool
	bridgeReq    sql.NullString
	lease        sql.NullString
	leaseDead    sql.NullString
	observation  sql.NullString
	obsDeadline  sql.NullString
}

// armExpired reports an arm_pending attempt whose bridge arm lease
// deadline has passed: it is expired, stale for every writeback helper,
// even before the sweep reclaims it (the sweep runs on its own interval).
func (h headView) armExpired(now time.Time) bool {
	if h.attemptState != AttemptArmPending || !h.leaseDead.Valid {
		return false
	}
	t, err := store.ParseTS(h.leaseDead.String)
	return err == nil && !now.Before(t)
}

// loadHead checks tok against the current head; ok=false means stale.
func loadHead(o *Op, tok Token) (h headView, ok bool, err error) {
	head, _, err := headBatch(o, tok.SourceThreadID)
	if err != nil || head != tok.BatchID {
		return h, false, err
	}
	var headAttempt sql.NullString
	var elig, next sql.NullString
	err = o.Tx.QueryRowContext(o.Ctx, `SELECT b.state, b.replay_policy, b.target_kind, b.head_attempt_id,
		b.eligible_after, t.next_delivery_not_before, a.state, a.bridge_request_id, a.bridge_arm_lease_id,
		a.bridge_arm_lease_deadline, a.delivery_observation_state, a.delivery_observation_deadline
		FROM batches b JOIN threads t ON t.source_thread_id = b.source_thread_id
		JOIN attempts a ON a.attempt_id = ? AND a.batch_id = b.batch_id AND a.generation = ?
		WHERE b.batch_id = ?`, tok.AttemptID, tok.Generation, tok.BatchID).Scan(&h.batchState, &h.replay, &h.target,
		&headAttempt, &elig, &next, &h.attemptState, &h.bridgeReq, &h.lease, &h.leaseDead, &h.observation, &h.obsDeadline)
	if store.IsNoRows(err) {
		return h, false, nil
	}
	if err != nil || headAttempt.String != tok.AttemptID {
		return h, false, err
	}
	h.eligibleOK = (!elig.Valid || elig.String <= o.At()) && (!next.Valid || next.String <= o.At())
	return h, true, nil
}

func result(out Outcome, tok Token, st AttemptState) Result {
	return Result{Outcome: out, Token: tok, AttemptState: st}
}

// BeginAccept is the CLI adapter's durable accept_pending barrier before it
// calls turn/start or turn/steer: prepared -> accept_pending with the RPC
// request id, kind, start time and correlation marker.
func BeginAccept(o *Op, tok Token, kind DeliveryMode, requestID, marker, managedSessionID string, epoch int64) (Result, error) {
	h, ok, err := loadHead(o, tok)
	switch {
	case err != nil:
		return Result{}, err
	case !ok:
		return result(OutcomeStaleOrSuperseded, tok, ""), nil
	case h.replay != ReplayAutomatic:
		return result(OutcomeManualResolutionOnly, tok, h.attemptState), nil
	case h.attemptState != AttemptPrepared || !h.eligibleOK:
		return result(OutcomeTransientNotReady, tok, h.attemptState), nil
	}
	rpcKind := "turn_start"
	if kind == ModeCLITurnSteer {
		rpcKind = "turn_steer"
	}
	out, err := casAttempt(o, AttemptCAS{AttemptID: tok.AttemptID, Generation: tok.Generation, From: AttemptPrepared,
		To: AttemptAcceptPending, Reason: "cli rpc " + rpcKind, Sets: []Set{{"delivery_rpc_request_id", requestID},
			{"delivery_rpc_kind", rpcKind}, {"delivery_rpc_started_at", o.At()}, {"delivery_rpc_state", "pending_acceptance"},
			{"delivery_rpc_correlation_marker", marker}, {"managed_session_id", managedSessionID}, {"session_epoch", epoch}}})
	return result(out, tok, stateAfter(out, AttemptAcceptPending, h.attemptState)), err
}

func stateAfter(out Outcome, to, was AttemptState) AttemptState {
	if out == OutcomeOK {
		return to
	}
	return was
}

// RejectBeforeAccept records a proven benign pre-accept rejection:
// accept_pending -> prepared, delivery_rpc_state=rejected_before_accept. It
// does not count an attempt; the thread leaves the immediately eligible set
// until eligible_after so it cannot hog the fair-ready order.
func RejectBeforeAccept(o *Op, tok Token) (Result, error) {
	h, ok, err := loadHead(o, tok)
	if err != nil || !ok {
		return result(OutcomeStaleOrSuperseded, tok, ""), err
	}
	out, err := casAttempt(o, AttemptCAS{AttemptID: tok.AttemptID, Generation: tok.Generation, From: AttemptAcceptPending,
		To: AttemptPrepared, Reason: "rejected before accept", Sets: []Set{{"delivery_rpc_state", "rejected_before_accept"}}})
	if err != nil || out != OutcomeOK {
		return result(out, tok, h.attemptState), err
	}
	_, err = o.Tx.ExecContext(o.Ctx, `UPDATE batches SET eligible_after = ?, updated_at = ? WHERE batch_id = ?`,
		store.TS(o.Now.Add(max(o.Cfg.MinDeliveryInterval, 1e9))), o.At(), tok.BatchID)
	return result(out, tok, AttemptPrepared), err
}

// NoteArmPending is the Desktop bridge's durable barrier: prepared ->
// arm_pending with a bridge_arm_lease. A retry with the same
// bridge_request_id gets the same lease back (already-pending); another
// request id gets lease-held and no lease.
func NoteArmPending(o *Op, tok Token, bridgeRequestID string) (Result, error) {
	h, ok, err := loadHead(o, tok)
	if err != nil || !ok {
		return result(OutcomeStaleOrSuperseded, tok, ""), err
	}
	if h.armExpired(o.Now) {
		return result(OutcomeStaleOrSuperseded, tok, h.attemptState), nil
	}
	if h.attemptState == AttemptArmPending {
		if h.bridgeReq.String == bridgeRequestID {
			r := result(OutcomeAlreadyPending, tok, h.attemptState)
			r.BridgeArmLeaseID, r.BridgeArmLeaseDead = h.lease.String, h.leaseDead.String
			return r, nil
		}
		return result(OutcomeLeaseHeld, tok, h.attemptState), nil
	}
	if h.replay != ReplayAutomatic {
		return result(OutcomeManualResolutionOnly, tok, h.attemptState), nil
	}
	if h.attemptState == AttemptPrepared && !h.eligibleOK {
		return result(OutcomeTransientNotReady, tok, h.attemptState), nil
	}
	lease, dead := ids.Lease("lease_"), store.TS(o.Now.Add(o.Cfg.ArmPendingWindow))
	out, err := casAttempt(o, AttemptCAS{AttemptID: tok.AttemptID, Generation: tok.Generation, From: h.attemptState,
		To: AttemptArmPending, Reason: "bridge arm pending", Sets: []Set{{"bridge_request_id", bridgeRequestID},
			{"bridge_arm_lease_id", lease}, {"bridge_arm_lease_deadline", dead}, {"arm_pending_since", o.At()},
			{"arm_pending_deadline", dead}}})
	r := result(out, tok, stateAfter(out, AttemptArmPending, h.attemptState))
	if out == OutcomeOK {
		r.BridgeArmLeaseID, r.BridgeArmLeaseDead = lease, dead
	}
	return r, err
}

// Accepted describes the channel's acceptance of an attempt.
type Accepted struct {
	Mode            DeliveryMode
	DeliveryTurnID  string // CLI
	BridgeRequestID string // Desktop: must match the durable lease owner
	BridgeLeaseID   string
}

// NoteAccepted records that the delivery channel accepted the attempt
// (Desktop note-arm, or CLI turn/start|turn/steer accepted): the attempt
// moves to cooldown, delivery_attempt_count increments exactly once, the
// minimum interval starts, and the ready_cursor advances. A repeat on an
// attempt already in cooldown is already-armed and changes nothing.
func NoteAccepted(o *Op, tok Token, a Accepted) (Result, error) {
	h, ok, err := loadHead(o, tok)
	switch {
	case err != nil:
		return Result{}, err
	case !ok:
		return result(OutcomeStaleOrSuperseded, tok, ""), nil
	case h.attemptState == AttemptCooldown:
		return result(OutcomeAlreadyArmed, tok, h.attemptState), nil
	case h.armExpired(o.Now):
		return result(OutcomeStaleOrSuperseded, tok, h.attemptState), nil
	case h.attemptState == AttemptArmPending && (a.BridgeRequestID != h.bridgeReq.String || a.BridgeLeaseID != h.lease.String):
		return result(OutcomeLeaseHeld, tok, h.attemptState), nil
	}
	sets := []Set{{"cooldown_until", store.TS(o.Now.Add(o.Cfg.CooldownWindow))}, {"delivery_accepted_at", o.At()}}
	if h.attemptState == AttemptAcceptPending {
		sets = append(sets, Set{"delivery_rpc_state", "accepted"}, Set{"delivery_turn_id", a.DeliveryTurnID},
			Set{"delivery_observation_state", "tracking"},
			Set{"delivery_observation_deadline", store.TS(o.Now.Add(o.Cfg.MaxTurnObservationWindow))},
			Set{"last_observed_turn_event", nil}, Set{"last_observed_turn_event_at", nil})
	}
	out, err := casAttempt(o, AttemptCAS{AttemptID: tok.AttemptID, Generation: tok.Generation, From: h.attemptState,
		To: AttemptCooldown, Reason: "channel accepted (" + string(a.Mode) + ")", Sets: sets})
	if err != nil || out != OutcomeOK {
		return result(out, tok, h.attemptState), err
	}
	next := store.TS(o.Now.Add(o.Cfg.MinDeliveryInterval))
	bout, err := casBatch(o, BatchCAS{BatchID: tok.BatchID, From: h.batchState, To: BatchCooldown, Reason: "attempt accepted",
		Sets: []Set{{"delivery_attempt_count", sqlExpr("delivery_attempt_count + 1")}, {"last_delivery_attempt_at", o.At()},
			{"next_delivery_not_before", next}, {"delivery_mode", a.Mode}}})
	if err != nil {
		return Result{}, err
	}
	if bout != OutcomeOK {
		return Result{}, errInvariant("batch %s not in %s while its attempt was accepted", tok.BatchID, h.batchState)
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE threads SET last_delivery_at = ?, next_delivery_not_before = ?,
		updated_at = ? WHERE source_thread_id = ?`, o.At(), next, o.At(), tok.SourceThreadID); err != nil {
		return Result{}, err
	}
	return result(OutcomeOK, tok, AttemptCooldown), advanceCursor(o, h.target, tok.SourceThreadID)
}
