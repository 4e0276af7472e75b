package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Job is a job as `cbth job query` shows it (seed "Job 关键字段"), with
// its delivery batch and artifact.
type Job struct {
	JobID          string              `json:"job_id"`
	TargetKind     string              `json:"target_kind"`
	SourceThreadID string              `json:"source_thread_id"`
	Status         Status              `json:"status"`
	TaskKind       string              `json:"task_kind"`
	TaskSummary    string              `json:"task_summary"`
	MetadataRef    *string             `json:"metadata_ref"`
	Metadata       json.RawMessage     `json:"metadata,omitempty"`
	ArtifactID     *string             `json:"artifact_id"`
	ResultSummary  *string             `json:"result_summary"`
	FailureReason  *string             `json:"failure_reason"`
	DedupeKey      *string             `json:"dedupe_key"`
	Policy                             // delivery_* fields
	PolicySources  json.RawMessage     `json:"delivery_policy_sources"`
	TaskID         *string             `json:"task_id"`
	CreatedAt      string              `json:"created_at"`
	AcceptedAt     string              `json:"accepted_at"`
	ReadyAt        *string             `json:"ready_at"`
	UpdatedAt      string              `json:"updated_at"`
	CompletedAt    *string             `json:"completed_at"`
	BatchID        *string             `json:"batch_id"`
	BatchState     *string             `json:"batch_state"`
	Artifact       *artifacts.Artifact `json:"artifact,omitempty"`
	Deduplicated   bool                `json:"deduplicated,omitempty"`
}

// Querier is a *sql.DB or *sql.Tx.
type Querier = artifacts.Querier

// Get loads one job.
func Get(ctx context.Context, q Querier, id string) (*Job, error) {
	j := &Job{}
	var meta sql.NullString
	var src string
	err := q.QueryRowContext(ctx, `SELECT j.job_id, j.target_kind, j.source_thread_id, j.status, j.task_kind,
		j.task_summary, j.metadata_ref, j.metadata_json, j.artifact_id, j.result_summary, j.failure_reason, j.dedupe_key,
		j.delivery_read_only, j.delivery_requires_approval, j.delivery_requires_network, j.delivery_requires_write_access,
		j.delivery_policy_sources, j.task_id, j.created_at, j.ready_at, j.updated_at, j.completed_at, bj.batch_id, b.state
		FROM jobs j LEFT JOIN batch_jobs bj ON bj.job_id = j.job_id LEFT JOIN batches b ON b.batch_id = bj.batch_id
		WHERE j.job_id = ?`, id).Scan(&j.JobID, &j.TargetKind, &j.SourceThreadID, &j.Status, &j.TaskKind, &j.TaskSummary,
		&j.MetadataRef, &meta, &j.ArtifactID, &j.ResultSummary, &j.FailureReason, &j.DedupeKey, &j.ReadOnly,
		&j.RequiresApproval, &j.RequiresNetwork, &j.RequiresWriteAccess, &src, &j.TaskID, &j.CreatedAt, &j.ReadyAt,
		&j.UpdatedAt, &j.CompletedAt, &j.BatchID, &j.BatchState)
	if store.IsNoRows(err) {
		return nil, abi.Errorf(abi.ENOENT, "no job %q", id)
	}
	if err != nil {
		return nil, err
	}
	j.AcceptedAt = j.CreatedAt
	j.PolicySources = json.RawMessage(src)
	if meta.Valid {
		j.Metadata = json.RawMessage(meta.String)
	}
	if j.ArtifactID != nil {
		a, err := artifacts.Get(ctx, q, *j.ArtifactID)
		if err != nil {
			return nil, err
		}
		j.Artifact = &a
	}
	return j, nil
}

// ActiveCount is the number of running jobs (they keep the daemon alive).
func ActiveCount(ctx context.Context, q Querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE status = 'running'`).Scan(&n)
	return n, err
}

// ListFilter selects jobs for `cbth job list`.
type ListFilter struct {
	SourceThreadID string `json:"source_thread_id,omitempty"`
	Status         string `json:"status,omitempty"`
	Limit          int    `json:"limit"`
}

// List returns jobs, newest first, without their artifacts' details.
func List(ctx context.Context, q Querier, f ListFilter) ([]*Job, error) {
	if f.Status != "" && !slices.Contains([]Status{Running, Ready, Failed, Cancelled}, Status(f.Status)) {
		return nil, abi.Errorf(abi.EINVAL, "--status must be running, ready, failed or cancelled, not %q", f.Status)
	}
	if f.Limit < 1 || f.Limit > 1_000_000 {
		return nil, abi.Errorf(abi.EINVAL, "--limit must be between 1 and 1000000, not %d", f.Limit)
	}
	rows, err := q.QueryContext(ctx, `SELECT job_id FROM jobs WHERE (? = '' OR source_thread_id = ?)
		AND (? = '' OR status = ?) ORDER BY job_id DESC LIMIT ?`, f.SourceThreadID, f.SourceThreadID, f.Status, f.Status, f.Limit)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	out := []*Job{}
	for _, id := range ids {
		j, err := Get(ctx, q, id)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}
