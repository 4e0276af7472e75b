package delivery

import (
	"context"
	"sort"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

func errInvalid(format string, args ...any) error { return abi.Errorf(abi.EINVAL, format, args...) }

// ReadyEntry is one thread of the fair-ready order: the caller prompt
// tokens, the bridge-side gating metadata and the ready time.
type ReadyEntry struct {
	Token
	SnapshotRevision     string `json:"snapshot_revision"`
	RequiresArtifactRead bool   `json:"requires_artifact_read"`
	FirstReadyAt         string `json:"first_ready_at"`
}

// advanceCursor moves the scope's durable ready_cursor past thread; it runs
// only when a fresh delivery is accepted or a head batch is closed/skipped.
func advanceCursor(o *Op, scope TargetKind, thread string) error {
	_, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO ready_cursors(scope, last_source_thread_id, last_ready_at, updated_at)
		VALUES (?,?,?,?) ON CONFLICT(scope) DO UPDATE SET last_source_thread_id = excluded.last_source_thread_id,
		last_ready_at = excluded.last_ready_at, updated_at = excluded.updated_at`, scope, thread, o.At(), o.At())
	return err
}

// ReadyOrder is a pure peek at the canonical fair-ready order of a scope:
// threads whose head batch is materialized, automatic, has a prepared head
// attempt and is past eligible_after and the thread's minimum interval;
// Desktop threads also need a bound binding whose armed generation is
// quiesced. Threads are taken round-robin starting after the durable
// ready_cursor, in stable source_thread_id order.
func ReadyOrder(ctx context.Context, s *store.Store, scope TargetKind) ([]ReadyEntry, error) {
	return ReadyOrderAt(ctx, s.DB, store.TS(s.Now()), scope)
}

// ReadyOrderAt is ReadyOrder read through q (a transaction, for a view
// consistent with other reads) at the stored time at.
func ReadyOrderAt(ctx context.Context, q Querier, at string, scope TargetKind) ([]ReadyEntry, error) {
	sel := `SELECT b.source_thread_id, b.batch_id, a.attempt_id, a.generation, COALESCE(a.snapshot_revision,''),
		COALESCE(b.requires_artifact_read, 0), b.first_ready_at
		FROM batches b JOIN attempts a ON a.attempt_id = b.head_attempt_id
		JOIN threads t ON t.source_thread_id = b.source_thread_id
		WHERE b.target_kind = ? AND b.state = 'materialized' AND b.replay_policy = 'automatic'
		AND a.state = 'prepared' AND (b.eligible_after IS NULL OR b.eligible_after <= ?)
		AND (t.next_delivery_not_before IS NULL OR t.next_delivery_not_before <= ?)
		AND b.seq = (SELECT MIN(seq) FROM batches h WHERE h.source_thread_id = b.source_thread_id AND h.state != 'closed')`
	if scope == TargetDesktop {
		sel += ` AND EXISTS (SELECT 1 FROM desktop_bindings d WHERE d.source_thread_id = b.source_thread_id
			AND d.binding_state = 'bound' AND (d.armed_generation IS NULL OR d.armed_generation_quiesced_at IS NOT NULL)
			AND (d.pause_deadline IS NULL OR d.pause_deadline > ?))`
	}
	args := []any{scope, at, at}
	if scope == TargetDesktop {
		args = append(args, at)
	}
	rows, err := q.QueryContext(ctx, sel, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ReadyEntry{}
	for rows.Next() {
		var e ReadyEntry
		if err := rows.Scan(&e.SourceThreadID, &e.BatchID, &e.AttemptID, &e.Generation, &e.SnapshotRevision,
			&e.RequiresArtifactRead, &e.FirstReadyAt); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var cursor string
	err = q.QueryRowContext(ctx, `SELECT COALESCE(last_source_thread_id,'') FROM ready_cursors WHERE scope = ?`, scope).Scan(&cursor)
	if err != nil && !store.IsNoRows(err) {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SourceThreadID < out[j].SourceThreadID })
	k := sort.Search(len(out), func(i int) bool { return out[i].SourceThreadID > cursor })
	return append(out[k:], out[:k]...), nil
}
