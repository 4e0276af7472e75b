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
	return sv.finish(ctx, actor, finishing{jobID: r.JobID, resultName: r.ResultFile, result: r.Result, to: Ready,
		reason: "complete", column: "result_summary", text: r.Summary})
}

// finishing is one end of a running job: completed (ready) or failed.
type finishing struct {
	jobID, resultName string
	result            *os.File
	to                Status
	reason            string // audit reason
	column, text      string // result_summary or failure_reason, and its text
}

// finish stages the result file outside the transaction (copying may be
// slow), then in one transaction checks the job is still running, records
// the artifact, moves the job and enqueues it for delivery. A failed
// transaction discards the staged copy.
func (sv *Service) finish(ctx context.Context, actor audit.Actor, f finishing) (*Job, error) {
	if err := validID("--job-id", f.jobID); err != nil {
		return nil, err
	}
	if f.resultName != "" && f.result == nil {
		return nil, abi.Errorf(abi.EINVAL, "result file %s was not passed as an open descriptor", f.resultName)
	}
	var staged *artifacts.Staged
	if f.result != nil {
		var err error
		if staged, err = artifacts.Stage(sv.ArtifactsDir, f.result, f.resultName, f.jobID, sv.Store.Now(),
			sv.Cfg.MaxResultBytes); err != nil {
			return nil, err
		}
	}
	err := delivery.Run(ctx, sv.Store, sv.Cfg, actor, func(o *delivery.Op) error {
		st, err := currentStatus(o, f.jobID)
		if err != nil {
			return err
		}
		if st != Running {
			return notRunning(f.jobID, st)
		}
		var artID any
		var size int64
		if staged != nil {
			if err := artifacts.Insert(ctx, o.Tx, staged, sv.Cfg); err != nil {
				return err
			}
			artID, size = staged.ArtifactID, staged.SizeBytes
		}
		// f.column is one of two constants of this file, never input.
		ok, err := casJob(o, f.jobID, Running, f.to, f.reason, `, `+f.column+` = ?, artifact_id = ?,
			ready_at = ?, completed_at = ?`, f.text, artID, o.At(), o.At())
		if err != nil || !ok {
			return orStale(err, f.jobID)
		}
		return enqueue(o, f.jobID, size)
	})
	if err != nil {
		if staged != nil {
			staged.Discard()
		}
		return nil, err
	}
	return Get(ctx, sv.Store.DB, f.jobID)
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
	// ResultFile/Result optionally carry output (a supervised task's
	// stream), as for CompleteRequest.
	ResultFile string   `json:"result_file,omitempty"`
	Result     *os.File `json:"-"`
}

// Fail moves a running job to failed and enqueues it: the caller wants to
// know about failures too.
func (sv *Service) Fail(ctx context.Context, actor audit.Actor, r FailRequest) (*Job, error) {
	if err := validText("--reason", r.Reason, 4096, true); err != nil {
		return nil, err
	}
	return sv.finish(ctx, actor, finishing{jobID: r.JobID, resultName: r.ResultFile, result: r.Result, to: Failed,
		reason: r.Reason, column: "failure_reason", text: r.Reason})
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
	reason := r.Reason
	if reason == "" {
		reason = "cancelled"
	}
	err := delivery.Run(ctx, sv.Store, sv.Cfg, actor, func(o *delivery.Op) error {
		st, err := currentStatus(o, r.JobID)
		if err != nil {
			return err
		}
		if st == Cancelled {
			return abi.Errorf(abi.EEXIST, "job %s is already cancelled", r.JobID)
		}
		if st != Running {
			if err := withdraw(o, r.JobID); err != nil {
				return err
			}
		}
		ok, err := casJob(o, r.JobID, st, Cancelled, reason, "")
		if err != nil || !ok {
			return orStale(err, r.JobID)
		}
		var art sql.NullString
		if err := o.Tx.QueryRowContext(ctx, `SELECT artifact_id FROM jobs WHERE job_id = ?`, r.JobID).Scan(&art); err != nil {
			return err
		}
		if art.Valid {
			return artifacts.Recompute(ctx, o.Tx, art.String, sv.Cfg)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return Get(ctx, sv.Store.DB, r.JobID)
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
