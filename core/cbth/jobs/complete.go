package jobs

import (
	"context"
	"database/sql"
	"os"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// CompleteRequest is `cbth job complete`.
type CompleteRequest struct {
	JobID   string `json:"job_id"`
	Summary string `json:"summary"`
	// ResultFile is the name the submitter gave (kept in the manifest);
	// the daemon never opens it. Result is the file itself, opened by the
	// client and passed as a descriptor.
	ResultFile string   `json:"result_file,omitempty"`
	Result     *os.File `json:"-"`
}

// Complete ingests the result file (copy + sha256 + manifest) into the
// artifact store, then in one transaction moves the job running -> ready,
// records the artifact and enqueues the job. Once Complete returns the
// original file is no longer needed.
func (sv *Service) Complete(ctx context.Context, actor audit.Actor, r CompleteRequest) (*Job, error) {
	if err := validText("--summary", r.Summary, 4096, true); err != nil {
		return nil, err
	}
	return sv.finish(ctx, actor, Finishing{JobID: r.JobID, To: Ready, Reason: "complete", Text: r.Summary},
		r.ResultFile, r.Result)
}

// Finishing is one end of a running job: completed (Ready, Text is the
// result summary) or Failed (Text is the failure reason), with its staged
// result artifact if any.
type Finishing struct {
	JobID  string
	To     Status
	Reason string // audit reason
	Text   string
	Staged *artifacts.Staged
}

// Stage copies a result file into the artifact store (outside any
// transaction: copying may be slow). The caller records it with FinishOp
// or discards it.
func (sv *Service) Stage(jobID, name string, f *os.File) (*artifacts.Staged, error) {
	if name != "" && f == nil {
		return nil, abi.Errorf(abi.EINVAL, "result file %s was not passed as an open descriptor", name)
	}
	if f == nil {
		return nil, nil
	}
	return artifacts.Stage(sv.ArtifactsDir, f, name, jobID, sv.Store.Now(), sv.Cfg.MaxResultBytes)
}

// finish stages the result, then in one transaction checks the job is
// still running, records the artifact, moves the job and enqueues it for
// delivery. A failed transaction discards the staged copy.
func (sv *Service) finish(ctx context.Context, actor audit.Actor, f Finishing, name string, file *os.File) (*Job, error) {
	if err := validID("--job-id", f.JobID); err != nil {
		return nil, err
	}
	var err error
	if f.Staged, err = sv.Stage(f.JobID, name, file); err != nil {
		return nil, err
	}
	err = delivery.Run(ctx, sv.Store, sv.Cfg, actor, func(o *delivery.Op) error {
		ok, st, err := sv.FinishOp(o, f)
		if err == nil && !ok {
			err = notRunning(f.JobID, st)
		}
		return err
	})
	if err != nil {
		if f.Staged != nil {
			f.Staged.Discard()
		}
		return nil, err
	}
	return Get(ctx, sv.Store.DB, f.JobID)
}

// FinishOp ends a running job in o's transaction: the artifact is
// recorded, the job moves to ready or failed and joins its thread's FIFO.
// A job that is no longer running is left alone: ok=false with its status.
func (sv *Service) FinishOp(o *delivery.Op, f Finishing) (ok bool, st Status, err error) {
	if st, err = currentStatus(o, f.JobID); err != nil || st != Running {
		return false, st, err
	}
	var artID any
	var size int64
	if f.Staged != nil {
		if err := artifacts.Insert(o.Ctx, o.Tx, f.Staged, sv.Cfg); err != nil {
			return false, st, err
		}
		artID, size = f.Staged.ArtifactID, f.Staged.SizeBytes
	}
	column := "result_summary"
	if f.To == Failed {
		column = "failure_reason"
	}
	// column is one of two constants of this function, never input.
	done, err := casJob(o, f.JobID, Running, f.To, f.Reason, `, `+column+` = ?, artifact_id = ?,
		ready_at = ?, completed_at = ?`, f.Text, artID, o.At(), o.At())
	if err != nil || !done {
		return false, st, orStale(err, f.JobID)
	}
	return true, f.To, enqueue(o, f.JobID, size)
}

func orStale(err error, id string) error {
	if err != nil {
		return err
	}
	return abi.Errorf(abi.EEXIST, "job %s changed concurrently (stale_or_superseded)", id)
}

func enqueue(o *delivery.Op, jobID string, artifactBytes int64) error {
	var thread, target, summary string
	var result, reason sql.NullString
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT source_thread_id, target_kind, task_summary, result_summary,
		failure_reason FROM jobs WHERE job_id = ?`, jobID).Scan(&thread, &target, &summary, &result, &reason); err != nil {
		return err
	}
	bytes := int64(len(summary)+len(result.String)+len(reason.String)) + artifactBytes
	_, err := delivery.Enqueue(o, delivery.ReadyJob{JobID: jobID, SourceThreadID: thread,
		TargetKind: delivery.TargetKind(target), Bytes: bytes})
	return err
}

// FailRequest is `cbth job fail`.
type FailRequest struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason"`
	// ResultFile/Result optionally carry output, as for CompleteRequest.
	ResultFile string   `json:"result_file,omitempty"`
	Result     *os.File `json:"-"`
}

// Fail moves a running job to failed and enqueues it: the caller wants to
// know about failures too.
func (sv *Service) Fail(ctx context.Context, actor audit.Actor, r FailRequest) (*Job, error) {
	if err := validText("--reason", r.Reason, 4096, true); err != nil {
		return nil, err
	}
	return sv.finish(ctx, actor, Finishing{JobID: r.JobID, To: Failed, Reason: r.Reason, Text: r.Reason},
		r.ResultFile, r.Result)
}

// CancelRequest is `cbth job cancel`.
type CancelRequest struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason,omitempty"`
}

// Cancel cancels a running job, or withdraws a ready/failed job whose batch
// is still queued (closing that batch as cancelled if it empties). A job
// already materialized for delivery is EBUSY: use batch close-head.
func (sv *Service) Cancel(ctx context.Context, actor audit.Actor, r CancelRequest) (*Job, error) {
	if err := validID("--job-id", r.JobID); err != nil {
		return nil, err
	}
	err := delivery.Run(ctx, sv.Store, sv.Cfg, actor, func(o *delivery.Op) error {
		return sv.CancelOp(o, r.JobID, r.Reason)
	})
	if err != nil {
		return nil, err
	}
	return Get(ctx, sv.Store.DB, r.JobID)
}

// CancelOp is Cancel in o's transaction.
func (sv *Service) CancelOp(o *delivery.Op, jobID, reason string) error {
	if reason == "" {
		reason = "cancelled"
	}
	st, err := currentStatus(o, jobID)
	if err != nil {
		return err
	}
	if st == Cancelled {
		return abi.Errorf(abi.EEXIST, "job %s is already cancelled", jobID)
	}
	if st != Running {
		if err := withdraw(o, jobID); err != nil {
			return err
		}
	}
	ok, err := casJob(o, jobID, st, Cancelled, reason, "")
	if err != nil || !ok {
		return orStale(err, jobID)
	}
	var art sql.NullString
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT artifact_id FROM jobs WHERE job_id = ?`, jobID).Scan(&art); err != nil {
		return err
	}
	if art.Valid {
		return artifacts.Recompute(o.Ctx, o.Tx, art.String, sv.Cfg)
	}
	return nil
}
func withdraw(o *delivery.Op, jobID string) error {
	var batch string
	var state delivery.BatchState
	var count int
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT b.batch_id, b.state, b.job_count FROM batch_jobs bj
		JOIN batches b ON b.batch_id = bj.batch_id WHERE bj.job_id = ?`, jobID).Scan(&batch, &state, &count)
	if store.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if state != delivery.BatchQueued {
		return abi.Errorf(abi.EBUSY, "job %s is in batch %s which is already %s; use cbth batch close-head", jobID, batch, state)
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `DELETE FROM batch_jobs WHERE job_id = ?`, jobID); err != nil {
		return err
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE batches SET job_count = job_count - 1, updated_at = ? WHERE batch_id = ?`,
		o.At(), batch); err != nil {
		return err
	}
	if count == 1 {
		_, err = delivery.CloseBatch(o, batch, delivery.CloseCancelled, "its only job was cancelled")
	}
	return err
}
