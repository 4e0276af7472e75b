package delivery

import (
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// TurnEvent is the v1 canonical last_observed_turn_event.
type TurnEvent string

const (
	TurnStarted     TurnEvent = "turn_started"
	TurnCompleted   TurnEvent = "turn_completed"
	TurnFailed      TurnEvent = "turn_failed"
	TurnInterrupted TurnEvent = "turn_interrupted"
	TurnReplaced    TurnEvent = "turn_replaced"
)

// NoteTurnEvent records an event observed on the accepted attempt's
// delivery_turn_id. turn_completed closes the batch as delivered only while
// the attempt is head, tracking, automatic and within its observation
// deadline; a negative terminal event abandons the attempt and moves the
// batch to manual_resolution_only. A late event is kept as evidence only.
func NoteTurnEvent(o *Op, tok Token, turnID string, ev TurnEvent) (Result, error) {
	h, ok, err := loadHead(o, tok)
	if err != nil || !ok {
		return result(OutcomeStaleOrSuperseded, tok, ""), err
	}
	var durableTurn string
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT COALESCE(delivery_turn_id,'') FROM attempts WHERE attempt_id = ?`,
		tok.AttemptID).Scan(&durableTurn); err != nil {
		return Result{}, err
	}
	if h.attemptState != AttemptCooldown || durableTurn == "" || durableTurn != turnID {
		return result(OutcomeStaleOrSuperseded, tok, h.attemptState), nil
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE attempts SET last_observed_turn_event = ?, last_observed_turn_event_at = ?,
		updated_at = ? WHERE attempt_id = ?`, ev, o.At(), o.At(), tok.AttemptID); err != nil {
		return Result{}, err
	}
	live := h.observation.String == "tracking" && h.replay == ReplayAutomatic && h.obsDeadline.String >= o.At()
	switch ev {
	case TurnStarted:
		return result(OutcomeOK, tok, h.attemptState), nil
	case TurnCompleted:
		if !live {
			return result(OutcomeStaleOrSuperseded, tok, h.attemptState), nil
		}
		out, err := closeBatch(o, tok.BatchID, h.batchState, CloseDelivered, "turn_completed observed")
		if err == nil && out == OutcomeOK {
			err = advanceCursor(o, h.target, tok.SourceThreadID)
		}
		return result(out, tok, stateAfter(out, AttemptClosed, h.attemptState)), err
	default:
		return abandon(o, tok, h, true, "observed "+string(ev), "lost")
	}
}

// Abandon ends the head attempt (any non-terminal state -> abandoned).
// manual=true also moves the batch to replay_policy=manual_resolution_only,
// as the seed requires whenever acceptance or continuity cannot be proven.
func Abandon(o *Op, tok Token, manual bool, reason string) (Result, error) {
	h, ok, err := loadHead(o, tok)
	if err != nil || !ok {
		return result(OutcomeStaleOrSuperseded, tok, ""), err
	}
	return abandon(o, tok, h, manual, reason, "")
}

func abandon(o *Op, tok Token, h headView, manual bool, reason, observation string) (Result, error) {
	sets := []Set{}
	if observation != "" && h.observation.Valid {
		sets = append(sets, Set{"delivery_observation_state", observation})
	}
	if h.attemptState == AttemptAcceptPending {
		sets = append(sets, Set{"delivery_rpc_state", "acceptance_unknown"})
	}
	out, err := casAttempt(o, AttemptCAS{AttemptID: tok.AttemptID, Generation: tok.Generation, From: h.attemptState,
		To: AttemptAbandoned, Reason: reason, Sets: sets})
	if err != nil || out != OutcomeOK {
		return result(out, tok, h.attemptState), err
	}
	if manual {
		if err := setManualOnly(o, tok.BatchID, reason); err != nil {
			return Result{}, err
		}
	}
	return result(OutcomeOK, tok, AttemptAbandoned), nil
}

// ReviveOrExhaust runs when a head batch's attempt has left the live set
// (abandoned with automatic replay) or finished its cooldown: if the batch
// used up max_delivery_attempts it closes as max_attempts_exhausted,
// otherwise a fresh attempt with the next generation supersedes the old one
// and the batch is materialized again. It never replays a manual batch.
func ReviveOrExhaust(o *Op, batchID string) (Outcome, error) {
	var thread string
	var state BatchState
	var replay ReplayPolicy
	var count, maxAttempts int
	var headAttempt string
	var gen int64
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT source_thread_id, state, replay_policy, delivery_attempt_count,
		max_delivery_attempts, COALESCE(head_attempt_id,''), generation FROM batches WHERE batch_id = ?`, batchID).
		Scan(&thread, &state, &replay, &count, &maxAttempts, &headAttempt, &gen)
	if err != nil {
		return "", err
	}
	head, _, err := headBatch(o, thread)
	if err != nil || head != batchID || state == BatchClosed || state == BatchQueued || replay != ReplayAutomatic {
		return OutcomeStaleOrSuperseded, err
	}
	var aState AttemptState
	var cooldownUntil, obs string
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT state, COALESCE(cooldown_until,''), COALESCE(delivery_observation_state,'')
		FROM attempts WHERE attempt_id = ?`, headAttempt).Scan(&aState, &cooldownUntil, &obs); err != nil {
		return "", err
	}
	switch {
	case aState == AttemptCooldown && (cooldownUntil > o.At() || obs == "tracking"):
		return OutcomeTransientNotReady, nil
	case aState != AttemptCooldown && aState != AttemptAbandoned:
		return OutcomeTransientNotReady, nil
	}
	if count >= maxAttempts {
		return closeBatch(o, batchID, state, CloseMaxAttemptsExhausted, "delivery_attempt_count reached max_delivery_attempts")
	}
	if aState == AttemptCooldown {
		out, err := casAttempt(o, AttemptCAS{AttemptID: headAttempt, Generation: gen, From: AttemptCooldown,
			To: AttemptSuperseded, Reason: "cooldown ended; fresh attempt"})
		if err != nil || out != OutcomeOK {
			return out, err
		}
	}
	if state == BatchCooldown {
		if out, err := casBatch(o, BatchCAS{BatchID: batchID, From: BatchCooldown, To: BatchMaterialized,
			Reason: "redelivery: fresh attempt"}); err != nil || out != OutcomeOK {
			return out, err
		}
	}
	_, err = createAttempt(o, batchID, thread)
	return OutcomeOK, err
}

// CloseHead is the operator's close of a thread's head batch with
// operator_closed_unconfirmed or operator_confirmed_delivery, or with
// superseded: the seed keeps the batch-level superseded for a batch that a
// new batch, a compaction result or an operator decision replaced, and
// this is the operator's decision (a new attempt on the same batch never
// closes it superseded).
func CloseHead(o *Op, thread string, reason CloseReason) (string, Outcome, error) {
	if reason != CloseOperatorClosedUnconfirmed && reason != CloseOperatorConfirmedDelivery && reason != CloseSuperseded {
		return "", "", errInvalid("close-head --reason must be operator_closed_unconfirmed, operator_confirmed_delivery "+
			"or superseded, not %q", reason)
	}
	id, state, err := headBatch(o, thread)
	if err != nil {
		return "", "", err
	}
	if id == "" {
		return "", "", abi.Errorf(abi.ENOENT, "thread %q has no open batch to close", thread)
	}
	var target TargetKind
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT target_kind FROM batches WHERE batch_id = ?`, id).Scan(&target); err != nil {
		return "", "", err
	}
	out, err := closeBatch(o, id, state, reason, "operator")
	if err == nil && out == OutcomeOK {
		err = advanceCursor(o, target, thread)
	}
	return id, out, err
}

// CloseBatch closes a specific open batch (used by the sweep and by job
// cancellation); a batch already closed is stale_or_superseded.
func CloseBatch(o *Op, batchID string, reason CloseReason, why string) (Outcome, error) {
	var state BatchState
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT state FROM batches WHERE batch_id = ?`, batchID).Scan(&state); err != nil {
		if store.IsNoRows(err) {
			return OutcomeStaleOrSuperseded, nil
		}
		return "", err
	}
	if state == BatchClosed {
		return OutcomeStaleOrSuperseded, nil
	}
	return closeBatch(o, batchID, state, reason, why)
}
