package delivery

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// BatchPrefix and AttemptPrefix prefix the ids.
const (
	BatchPrefix   = "bat_"
	AttemptPrefix = "att_"
)

// ReadyJob is what the FIFO needs of a job that became ready (or failed:
// failures are delivered too).
type ReadyJob struct {
	JobID          string
	SourceThreadID string
	TargetKind     TargetKind
	Bytes          int64 // summary + result summary + artifact size
}

// Enqueue appends a ready job to its thread's FIFO, in o's transaction: it
// joins the thread's newest queued batch when that batch is still within
// max_jobs_per_batch, max_total_bytes and max_wait_window and has the same
// target; otherwise it opens a new batch. It then materializes the head if
// due. It returns the batch id.
func Enqueue(o *Op, j ReadyJob) (string, error) {
	if err := ensureThread(o, j.SourceThreadID); err != nil {
		return "", err
	}
	id, _, ok, err := joinableBatch(o, j)
	if err != nil {
		return "", err
	}
	if !ok {
		if id, err = newBatch(o, j); err != nil {
			return "", err
		}
	}
	// The position follows the batch's last one, not its job count: a job
	// withdrawn from a queued batch lowers the count but not the positions
	// still taken.
	var pos int
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT COALESCE(MAX(position) + 1, 0) FROM batch_jobs WHERE batch_id = ?`,
		id).Scan(&pos); err != nil {
		return "", err
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO batch_jobs(batch_id, job_id, position) VALUES (?,?,?)`,
		id, j.JobID, pos); err != nil {
		return "", fmt.Errorf("delivery: enqueue %s: %w", j.JobID, err)
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE batches SET job_count = job_count + 1, total_bytes = total_bytes + ?,
		last_ready_at = ?, updated_at = ? WHERE batch_id = ?`, j.Bytes, o.At(), o.At(), id); err != nil {
		return "", err
	}
	if err := o.Audit(audit.Entry{Action: "batch.enqueue", EntityKind: "batch", EntityID: id,
		SourceThreadID: j.SourceThreadID, Outcome: string(OutcomeOK),
		Detail: map[string]any{"job_id": j.JobID, "position": pos}}); err != nil {
		return "", err
	}
	_, err = MaterializeHead(o, j.SourceThreadID)
	return id, err
}

func ensureThread(o *Op, thread string) error {
	_, err := o.Tx.ExecContext(o.Ctx, `INSERT OR IGNORE INTO threads(source_thread_id, updated_at) VALUES (?, ?)`,
		thread, o.At())
	return err
}

// joinableBatch finds the thread's last batch if it is queued and j fits.
func joinableBatch(o *Op, j ReadyJob) (id string, count int, ok bool, err error) {
	var target, first string
	var total int64
	err = o.Tx.QueryRowContext(o.Ctx, `SELECT batch_id, target_kind, job_count, total_bytes, first_ready_at
		FROM batches WHERE source_thread_id = ? AND state = 'queued' AND seq = (
		SELECT MAX(seq) FROM batches WHERE source_thread_id = ?)`, j.SourceThreadID, j.SourceThreadID).
		Scan(&id, &target, &count, &total, &first)
	if store.IsNoRows(err) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	firstAt, _ := store.ParseTS(first)
	fits := TargetKind(target) == j.TargetKind && count < o.Cfg.MaxJobsPerBatch &&
		total+j.Bytes <= o.Cfg.MaxTotalBytes && !o.Now.After(firstAt.Add(o.Cfg.MaxWaitWindow))
	return id, count, fits, nil
}

func newBatch(o *Op, j ReadyJob) (string, error) {
	var seq int64
	if err := o.Tx.QueryRowContext(o.Ctx, `UPDATE threads SET next_batch_seq = next_batch_seq + 1, updated_at = ?
		WHERE source_thread_id = ? RETURNING next_batch_seq - 1`, o.At(), j.SourceThreadID).Scan(&seq); err != nil {
		return "", err
	}
	id := ids.New(BatchPrefix)
	// The redelivery window and the attempt budget are durable from the
	// first ready job on: a batch queued behind a head that waits for an
	// operator (or for a session to attach) still expires on its own.
	_, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO batches(batch_id, seq, source_thread_id, target_kind, state,
		first_ready_at, last_ready_at, redelivery_window_ends_at, max_delivery_attempts, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?)`, id, seq, j.SourceThreadID, j.TargetKind, BatchQueued, o.At(), o.At(),
		store.TS(o.Now.Add(o.Cfg.RedeliveryWindow)), o.Cfg.MaxDeliveryAttempts, o.At(), o.At())
	if err != nil {
		return "", err
	}
	return id, o.Audit(audit.Entry{Action: "batch.create", EntityKind: "batch", EntityID: id,
		SourceThreadID: j.SourceThreadID, To: string(BatchQueued), Outcome: string(OutcomeOK)})
}

// headBatch returns the thread's oldest open batch id and state.
func headBatch(o *Op, thread string) (id string, state BatchState, err error) {
	err = o.Tx.QueryRowContext(o.Ctx, `SELECT batch_id, state FROM batches WHERE source_thread_id = ?
		AND state != 'closed' ORDER BY seq LIMIT 1`, thread).Scan(&id, &state)
	if store.IsNoRows(err) {
		return "", "", nil
	}
	return id, state, err
}

// MaterializeHead turns the thread's head batch from queued into
// materialized when it is due: max_wait_window has passed since its first
// ready job, it is full, or a later batch exists (so nothing more can join).
// Materialization derives the batch's payload fields and creates its first
// attempt. It reports whether it materialized.
func MaterializeHead(o *Op, thread string) (bool, error) {
	id, state, err := headBatch(o, thread)
	if err != nil || id == "" || state != BatchQueued {
		return false, err
	}
	var count int
	var total int64
	var first string
	var later int
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT job_count, total_bytes, first_ready_at,
		(SELECT COUNT(*) FROM batches b2 WHERE b2.source_thread_id = b.source_thread_id AND b2.seq > b.seq)
		FROM batches b WHERE batch_id = ?`, id).Scan(&count, &total, &first, &later); err != nil {
		return false, err
	}
	firstAt, _ := store.ParseTS(first)
	due := !o.Now.Before(firstAt.Add(o.Cfg.MaxWaitWindow)) || count >= o.Cfg.MaxJobsPerBatch ||
		total >= o.Cfg.MaxTotalBytes || later > 0
	if !due {
		return false, nil
	}
	p, err := derivePayload(o, id)
	if err != nil {
		return false, err
	}
	out, err := casBatch(o, BatchCAS{BatchID: id, From: BatchQueued, To: BatchMaterialized, Reason: "head due",
		Sets: []Set{{"materialized_at", o.At()}, {"summary", p.summary}, {"artifact_count", len(p.artifactIDs)},
			{"inline_payload_bytes", p.inlineBytes}, {"requires_artifact_read", p.requiresArtifactRead},
			{"delivery_read_only", p.readOnly}, {"delivery_requires_approval", p.approval},
			{"delivery_requires_network", p.network}, {"delivery_requires_write_access", p.write}}})
	if err != nil || out != OutcomeOK {
		return false, err
	}
	_, err = createAttempt(o, id, thread)
	return err == nil, err
}

type payload struct {
	summary                            string
	artifactIDs                        []string
	inlineBytes                        int64
	requiresArtifactRead               bool
	readOnly, approval, network, write bool
}

// derivePayload computes inline_payload_bytes and requires_artifact_read
// (never submitter input) and the batch's combined delivery policy: the
// batch is read-only only if every job is, and requires approval, network
// or write access if any job does.
func derivePayload(o *Op, batchID string) (payload, error) {
	rows, err := o.Tx.QueryContext(o.Ctx, `SELECT j.job_id, j.status, j.task_kind, j.task_summary,
		COALESCE(j.result_summary, ''), COALESCE(j.failure_reason, ''), j.artifact_id, COALESCE(a.size_bytes, 0),
		j.delivery_read_only, j.delivery_requires_approval, j.delivery_requires_network, j.delivery_requires_write_access
		FROM batch_jobs bj JOIN jobs j ON j.job_id = bj.job_id LEFT JOIN artifacts a ON a.artifact_id = j.artifact_id
		WHERE bj.batch_id = ? ORDER BY bj.position`, batchID)
	if err != nil {
		return payload{}, err
	}
	defer rows.Close()
	p := payload{readOnly: true}
	var lines []string
	for rows.Next() {
		var jobID, status, kind, summary, result, reason string
		var art sql.NullString
		var size int64
		var ro, ap, nw, wr bool
		if err := rows.Scan(&jobID, &status, &kind, &summary, &result, &reason, &art, &size, &ro, &ap, &nw, &wr); err != nil {
			return payload{}, err
		}
		text := result
		if status == "failed" {
			text = reason
		}
		lines = append(lines, fmt.Sprintf("%s [%s] %s: %s", jobID, status, kind, oneLine(summary, text)))
		p.inlineBytes += int64(len(summary) + len(text))
		if art.Valid {
			p.artifactIDs = append(p.artifactIDs, art.String)
			if size > o.Cfg.MaxInlineArtifactBytes {
				p.requiresArtifactRead = true
			} else {
				p.inlineBytes += size
			}
		}
		p.readOnly, p.approval, p.network, p.write = p.readOnly && ro, p.approval || ap, p.network || nw, p.write || wr
	}
	p.summary = truncate(strings.Join(lines, "\n"), 4096)
	return p, rows.Err()
}

func oneLine(summary, result string) string {
	if result == "" {
		return summary
	}
	return summary + " -> " + result
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// createAttempt atomically binds a new prepared attempt to the batch,
// increments the thread's generation, records a new snapshot revision and
// points head_attempt_id at it. Generations grow per thread, not per batch,
// so a Desktop binding's armed_generation fences an old caller heartbeat
// across batches too (a later batch never reuses an armed number). The
// store's partial unique index refuses a second non-terminal attempt on the
// same thread.
func createAttempt(o *Op, batchID, thread string) (string, error) {
	var gen int64
	if err := o.Tx.QueryRowContext(o.Ctx, `UPDATE threads SET attempt_generation = MAX(attempt_generation,
		(SELECT generation FROM batches WHERE batch_id = ?)) + 1, updated_at = ? WHERE source_thread_id = ?
		RETURNING attempt_generation`, batchID, o.At(), thread).Scan(&gen); err != nil {
		return "", fmt.Errorf("delivery: next generation of %s: %w", thread, err)
	}
	id, rev := ids.New(AttemptPrefix), ids.New("rev_")
	if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO attempts(attempt_id, source_thread_id, batch_id, generation,
		state, snapshot_revision, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?)`,
		id, thread, batchID, gen, AttemptPrepared, rev, o.At(), o.At()); err != nil {
		return "", fmt.Errorf("delivery: create attempt on %s: %w", batchID, err)
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE batches SET head_attempt_id = ?, generation = ?, snapshot_revision = ?,
		updated_at = ? WHERE batch_id = ?`, id, gen, rev, o.At(), batchID); err != nil {
		return "", err
	}
	return id, o.Audit(audit.Entry{Action: "attempt.create", EntityKind: "attempt", EntityID: id,
		SourceThreadID: thread, To: string(AttemptPrepared), Outcome: string(OutcomeOK),
		Detail: map[string]any{"batch_id": batchID, "generation": gen, "snapshot_revision": rev}})
}

// closeBatch closes an open batch with reason: its live head attempt ends
// (cooldown -> closed; earlier states -> abandoned), artifact retention is
// recorded, and the thread's next batch is materialized if due.
func closeBatch(o *Op, batchID string, from BatchState, reason CloseReason, why string) (Outcome, error) {
	if !reason.Valid() {
		return "", errInvalid("close_reason %q is not one of the seed's", reason)
	}
	out, err := casBatch(o, BatchCAS{BatchID: batchID, From: from, To: BatchClosed, Reason: string(reason) + ": " + why,
		Sets: []Set{{"closed_at", o.At()}, {"close_reason", reason}}})
	if err != nil || out != OutcomeOK {
		return out, err
	}
	if err := endLiveAttempt(o, batchID, why); err != nil {
		return "", err
	}
	if err := artifacts.OnBatchClosed(o.Ctx, o.Tx, batchID, o.At(), o.Cfg); err != nil {
		return "", err
	}
	thread := threadOfBatch(o, batchID)
	_, err = MaterializeHead(o, thread)
	return OutcomeOK, err
}

func endLiveAttempt(o *Op, batchID, why string) error {
	var id string
	var gen int64
	var state AttemptState
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT attempt_id, generation, state FROM attempts WHERE batch_id = ?
		AND state IN ('prepared','accept_pending','arm_pending','cooldown')`, batchID).Scan(&id, &gen, &state)
	if store.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	to := AttemptAbandoned
	if state == AttemptCooldown {
		to = AttemptClosed
	}
	_, err = casAttempt(o, AttemptCAS{AttemptID: id, Generation: gen, From: state, To: to, Reason: "batch closed: " + why})
	return err
}
