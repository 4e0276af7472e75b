package delivery

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Op is one transaction's context: the transaction, its clock reading,
// the actor to audit and the configuration in force.
type Op struct {
	Ctx   context.Context
	Tx    *sql.Tx
	Now   time.Time
	Actor audit.Actor
	Cfg   config.Config
}

// At is Now formatted for the store.
func (o *Op) At() string { return store.TS(o.Now) }

// Audit writes one audit row in o's transaction.
func (o *Op) Audit(e audit.Entry) error { return audit.Write(o.Ctx, o.Tx, o.At(), o.Actor, e) }

// Run opens a transaction on s and runs fn with an Op.
func Run(ctx context.Context, s *store.Store, cfg config.Config, actor audit.Actor, fn func(o *Op) error) error {
	return RunEach(ctx, s, cfg, actor, []func(o *Op) error{fn})[0]
}

// RunEach runs each fn as by its own Run (its own Op and clock reading; a
// failing fn undoes only itself) and returns once all are durable or
// failed: errs[i] is fns[i]'s outcome. The store commits them together.
func RunEach(ctx context.Context, s *store.Store, cfg config.Config, actor audit.Actor, fns []func(o *Op) error) []error {
	// The store checks ctx before it runs a function; once running, its
	// statements are not interruptible: an interrupted statement rolls
	// back the whole transaction, which others may share. (It also spares
	// the driver a watcher goroutine per statement.)
	sctx := context.WithoutCancel(ctx)
	txs := make([]func(*sql.Tx) error, len(fns))
	for i, fn := range fns {
		txs[i] = func(tx *sql.Tx) error {
			return fn(&Op{Ctx: sctx, Tx: tx, Now: s.Now().UTC(), Actor: actor, Cfg: cfg})
		}
	}
	return s.TxEach(ctx, txs)
}

// Set is one extra column assignment made together with a transition.
// Column names are always constants in this package, never input.
type Set struct {
	Col string
	Val any
}

// sqlExpr is a Set value written as SQL (a constant of this package, such
// as "delivery_attempt_count + 1").
type sqlExpr string

func setClause(sets []Set) (string, []any) {
	var b strings.Builder
	var args []any
	for _, s := range sets {
		b.WriteString(", ")
		b.WriteString(s.Col)
		if e, ok := s.Val.(sqlExpr); ok {
			b.WriteString(" = " + string(e))
			continue
		}
		b.WriteString(" = ?")
		args = append(args, s.Val)
	}
	return b.String(), args
}

func errInvariant(format string, args ...any) error {
	return abi.Errorf(abi.EIO, "delivery: invariant broken: "+format, args...)
}

// AttemptCAS is one attempt transition: it applies only if the attempt
// still has Generation and is still in From.
type AttemptCAS struct {
	AttemptID  string
	Generation int64
	From, To   AttemptState
	Reason     string
	Sets       []Set
}

// casAttempt is the single place an attempt changes state. An illegal
// pair is a bug, refused (EIO) before touching the store; a stale
// expectation (other state or generation) changes nothing and is reported
// as stale_or_superseded.
func casAttempt(o *Op, c AttemptCAS) (Outcome, error) {
	if !AttemptAllowed(c.From, c.To) {
		return "", errInvariant("attempt %s: %s -> %s is not in the seed's transition table", c.AttemptID, c.From, c.To)
	}
	extra, args := setClause(c.Sets)
	q := `UPDATE attempts SET state = ?, updated_at = ?` + extra +
		` WHERE attempt_id = ? AND generation = ? AND state = ?`
	args = append([]any{c.To, o.At()}, args...)
	args = append(args, c.AttemptID, c.Generation, c.From)
	res, err := o.Tx.ExecContext(o.Ctx, q, args...)
	if err != nil {
		return "", fmt.Errorf("delivery: attempt %s %s->%s: %w", c.AttemptID, c.From, c.To, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return OutcomeStaleOrSuperseded, nil
	}
	var thread, batch string
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT source_thread_id, batch_id FROM attempts WHERE attempt_id = ?`,
		c.AttemptID).Scan(&thread, &batch); err != nil {
		return "", err
	}
	return OutcomeOK, o.Audit(audit.Entry{Action: "attempt.transition", EntityKind: "attempt", EntityID: c.AttemptID,
		SourceThreadID: thread, From: string(c.From), To: string(c.To), Reason: c.Reason, Outcome: string(OutcomeOK),
		Detail: map[string]any{"batch_id": batch, "generation": c.Generation}})
}

// BatchCAS is one batch transition, applied only while the batch is in From.
type BatchCAS struct {
	BatchID  string
	From, To BatchState
	Reason   string
	Sets     []Set
}

// casBatch is the single place a batch changes state.
func casBatch(o *Op, c BatchCAS) (Outcome, error) {
	if !BatchAllowed(c.From, c.To) {
		return "", errInvariant("batch %s: %s -> %s is not a legal batch transition", c.BatchID, c.From, c.To)
	}
	extra, args := setClause(c.Sets)
	q := `UPDATE batches SET state = ?, updated_at = ?` + extra + ` WHERE batch_id = ? AND state = ?`
	args = append([]any{c.To, o.At()}, args...)
	args = append(args, c.BatchID, c.From)
	res, err := o.Tx.ExecContext(o.Ctx, q, args...)
	if err != nil {
		return "", fmt.Errorf("delivery: batch %s %s->%s: %w", c.BatchID, c.From, c.To, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return OutcomeStaleOrSuperseded, nil
	}
	var thread string
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT source_thread_id FROM batches WHERE batch_id = ?`, c.BatchID).Scan(&thread); err != nil {
		return "", err
	}
	return OutcomeOK, o.Audit(audit.Entry{Action: "batch.transition", EntityKind: "batch", EntityID: c.BatchID,
		SourceThreadID: thread, From: string(c.From), To: string(c.To), Reason: c.Reason, Outcome: string(OutcomeOK)})
}

// setReplayPolicy moves an open batch to manual_resolution_only (the only
// direction v1 allows) with its audit row.
func setManualOnly(o *Op, batchID, reason string) error {
	res, err := o.Tx.ExecContext(o.Ctx, `UPDATE batches SET replay_policy = ?, updated_at = ?
		WHERE batch_id = ? AND state != 'closed' AND replay_policy = ?`,
		ReplayManualResolutionOnly, o.At(), batchID, ReplayAutomatic)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return o.Audit(audit.Entry{Action: "batch.replay_policy", EntityKind: "batch", EntityID: batchID,
			SourceThreadID: threadOfBatch(o, batchID), From: string(ReplayAutomatic),
			To: string(ReplayManualResolutionOnly), Reason: reason, Outcome: string(OutcomeOK)})
	}
	return nil
}

func threadOfBatch(o *Op, batchID string) string {
	var t string
	_ = o.Tx.QueryRowContext(o.Ctx, `SELECT source_thread_id FROM batches WHERE batch_id = ?`, batchID).Scan(&t)
	return t
}
