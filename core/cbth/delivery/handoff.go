package delivery

import (
	"database/sql"

	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Head is what an adapter may check about the head a token names before it
// asks for a transition: the Desktop helpers add their binding gates on top.
type Head struct {
	BatchState           BatchState
	ReplayPolicy         ReplayPolicy
	TargetKind           TargetKind
	AttemptState         AttemptState
	BridgeRequestID      string
	BridgeArmLeaseID     string
	BridgeArmLeaseDead   string
	SnapshotRevision     string // the attempt's materialized snapshot revision
	BoundaryState        string
	RequiresArtifactRead bool
	EligibleNow          bool // past eligible_after and the thread's minimum interval
}

// LoadHead reads the head tok names; ok=false means tok is stale (not the
// thread's head batch, head attempt and generation).
func LoadHead(o *Op, tok Token) (Head, bool, error) {
	h, ok, err := loadHead(o, tok)
	if err != nil || !ok {
		return Head{}, ok, err
	}
	out := Head{BatchState: h.batchState, ReplayPolicy: h.replay, TargetKind: h.target, AttemptState: h.attemptState,
		BridgeRequestID: h.bridgeReq.String, BridgeArmLeaseID: h.lease.String, BridgeArmLeaseDead: h.leaseDead.String,
		EligibleNow: h.eligibleOK}
	var rev sql.NullString
	var rar sql.NullBool
	err = o.Tx.QueryRowContext(o.Ctx, `SELECT a.snapshot_revision, b.continuation_boundary_state, b.requires_artifact_read
		FROM attempts a JOIN batches b ON b.batch_id = a.batch_id WHERE a.attempt_id = ?`, tok.AttemptID).
		Scan(&rev, &out.BoundaryState, &rar)
	out.SnapshotRevision, out.RequiresArtifactRead = rev.String, rar.Bool
	return out, true, err
}

// Handoff is what note-boundary-crossed records on the batch it closes.
type Handoff struct {
	SnapshotRevision string
	EnvelopeRef      string
	EnvelopeBytes    int64
}

// RecordHandoff is the boundary crossing: only while tok still names the
// head, the attempt is in cooldown, the batch is automatic and not crossed
// and its snapshot revision is h.SnapshotRevision, it durably moves the
// batch to continuation_boundary_state=crossed_unacknowledged +
// replay_policy=manual_resolution_only with the boundary fields and the
// recovery envelope reference, then closes it handoff_recorded (the attempt
// cooldown -> closed, the FIFO moves on). Anything else changes nothing.
func RecordHandoff(o *Op, tok Token, h Handoff) (Result, error) {
	head, ok, err := LoadHead(o, tok)
	switch {
	case err != nil:
		return Result{}, err
	case !ok || head.SnapshotRevision != h.SnapshotRevision || head.ReplayPolicy != ReplayAutomatic:
		return result(OutcomeStaleOrSuperseded, tok, head.AttemptState), nil
	case head.BoundaryState != "not_crossed":
		return result(OutcomeAlreadyCrossed, tok, head.AttemptState), nil
	case head.AttemptState != AttemptCooldown:
		return result(OutcomeTransientNotReady, tok, head.AttemptState), nil
	}
	res, err := o.Tx.ExecContext(o.Ctx, `UPDATE batches SET continuation_boundary_state = 'crossed_unacknowledged',
		continuation_boundary_crossed_at = ?, boundary_attempt_id = ?, boundary_generation = ?,
		boundary_snapshot_revision = ?, boundary_recovery_envelope_ref = ?, boundary_recovery_envelope_bytes = ?,
		updated_at = ? WHERE batch_id = ? AND continuation_boundary_state = 'not_crossed' AND state = ?`,
		o.At(), tok.AttemptID, tok.Generation, h.SnapshotRevision, h.EnvelopeRef, h.EnvelopeBytes, o.At(),
		tok.BatchID, head.BatchState)
	if err != nil {
		return Result{}, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return Result{}, errInvariant("batch %s changed under its own transaction", tok.BatchID)
	}
	if err := setManualOnly(o, tok.BatchID, "continuation boundary crossed"); err != nil {
		return Result{}, err
	}
	out, err := closeBatch(o, tok.BatchID, head.BatchState, CloseHandoffRecorded, "note-boundary-crossed fresh success")
	if err != nil {
		return Result{}, err
	}
	if out != OutcomeOK {
		return Result{}, errInvariant("batch %s did not close handoff_recorded: %s", tok.BatchID, out)
	}
	return result(OutcomeOK, tok, AttemptClosed), advanceCursor(o, head.TargetKind, tok.SourceThreadID)
}

// SetBoundaryRecoveryRetention records when the batch's recovery envelope
// may be collected (never before its own close rules allow).
func SetBoundaryRecoveryRetention(o *Op, batchID, until string) error {
	_, err := o.Tx.ExecContext(o.Ctx, `UPDATE batches SET boundary_recovery_retention_until = ?, updated_at = ?
		WHERE batch_id = ?`, until, o.At(), batchID)
	return err
}

// MarkManualOnly moves an open automatic batch to manual_resolution_only
// (with its audit row); a batch already manual or closed is left alone.
func MarkManualOnly(o *Op, batchID, reason string) error { return setManualOnly(o, batchID, reason) }

// ForceFreshAttempt switches the thread's head batch to a fresh attempt
// with a new generation: the live attempt (if any) is superseded, a batch in
// cooldown is materialized again, and a new prepared attempt is created; a
// late wake of the old generation then meets a stale token. A manual batch
// is never given a fresh attempt (manual_resolution_only), a queued head
// gets its first attempt when it materializes (ok, nothing to do), and a
// batch whose budget is used up closes max_attempts_exhausted.
func ForceFreshAttempt(o *Op, thread, reason string) (Outcome, Token, error) {
	id, state, err := headBatch(o, thread)
	if err != nil || id == "" {
		return OutcomeOK, Token{}, err // no head: nothing to fence
	}
	if state == BatchQueued {
		return OutcomeOK, Token{}, nil
	}
	var replay ReplayPolicy
	var count, maxAttempts int
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT replay_policy, delivery_attempt_count, max_delivery_attempts
		FROM batches WHERE batch_id = ?`, id).Scan(&replay, &count, &maxAttempts); err != nil {
		return "", Token{}, err
	}
	if replay != ReplayAutomatic {
		return OutcomeManualResolutionOnly, Token{}, nil
	}
	var live string
	var gen int64
	var aState AttemptState
	err = o.Tx.QueryRowContext(o.Ctx, `SELECT attempt_id, generation, state FROM attempts WHERE batch_id = ?
		AND state IN ('prepared','accept_pending','arm_pending','cooldown')`, id).Scan(&live, &gen, &aState)
	if err != nil && !store.IsNoRows(err) {
		return "", Token{}, err
	}
	if live != "" {
		out, err := casAttempt(o, AttemptCAS{AttemptID: live, Generation: gen, From: aState, To: AttemptSuperseded, Reason: reason})
		if err != nil || out != OutcomeOK {
			return out, Token{}, err
		}
	}
	if count >= maxAttempts {
		out, err := closeBatch(o, id, state, CloseMaxAttemptsExhausted, "delivery_attempt_count reached max_delivery_attempts")
		return out, Token{}, err
	}
	if state == BatchCooldown {
		if out, err := casBatch(o, BatchCAS{BatchID: id, From: BatchCooldown, To: BatchMaterialized, Reason: reason}); err != nil || out != OutcomeOK {
			return out, Token{}, err
		}
	}
	att, err := createAttempt(o, id, thread)
	if err != nil {
		return "", Token{}, err
	}
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT generation FROM attempts WHERE attempt_id = ?`, att).Scan(&gen); err != nil {
		return "", Token{}, err
	}
	return OutcomeOK, Token{SourceThreadID: thread, BatchID: id, AttemptID: att, Generation: gen}, nil
}
