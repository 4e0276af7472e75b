// Package jobs is cbth's job orchestrator: submit (with delivery-policy
// normalization and dedupe), complete (with artifact ingest), fail, cancel
// and query. Ready and failed jobs enter their thread's delivery FIFO.
package jobs

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"unicode"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/inputs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// Prefix of job ids.
const Prefix = "job_"

// Status is a job's state (seed "Job 状态").
type Status string

const (
	Running   Status = "running"
	Ready     Status = "ready"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// jobTransitions is the only definition of legal job status changes.
var jobTransitions = map[Status][]Status{
	Running: {Ready, Failed, Cancelled},
	Ready:   {Cancelled},
	Failed:  {Cancelled},
}

// Allowed reports whether from -> to is a legal job transition.
func Allowed(from, to Status) bool {
	for _, t := range jobTransitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// Service runs job operations against one store.
type Service struct {
	Store        *store.Store
	Cfg          config.Config
	ArtifactsDir string
}

// SubmitRequest is `cbth job submit`.
type SubmitRequest struct {
	TargetKind     string      `json:"target"`
	SourceThreadID string      `json:"thread_id"`
	TaskKind       string      `json:"task_kind"`
	Summary        string      `json:"summary"`
	MetadataFile   string      `json:"metadata_file,omitempty"` // as given: metadata_ref
	Metadata       *os.File    `json:"-"`                       // the file, opened by the client
	DedupeKey      string      `json:"dedupe_key,omitempty"`
	Policy         PolicyInput `json:"delivery_policy"`
	TaskID         string      `json:"-"`
}

func validText(name, s string, max int, required bool) error {
	if s == "" && required {
		return abi.Errorf(abi.EINVAL, "%s is required", name)
	}
	if len(s) > max {
		return abi.Errorf(abi.EINVAL, "%s is longer than %d bytes", name, max)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r == 0 || r == unicode.ReplacementChar }) {
		return abi.Errorf(abi.EINVAL, "%s contains NUL or invalid UTF-8", name)
	}
	return nil
}

func validID(name, s string) error {
	if err := validText(name, s, 256, true); err != nil {
		return err
	}
	if strings.ContainsFunc(s, unicode.IsControl) || strings.TrimSpace(s) != s {
		return abi.Errorf(abi.EINVAL, "%s %q has control characters or surrounding spaces", name, s)
	}
	return nil
}

func (r *SubmitRequest) validate() error {
	if !delivery.TargetKind(r.TargetKind).Valid() {
		return abi.Errorf(abi.EINVAL, "--target must be cli or desktop, not %q", r.TargetKind)
	}
	if err := validID("--thread-id", r.SourceThreadID); err != nil {
		return err
	}
	if err := validID("--task-kind", r.TaskKind); err != nil {
		return err
	}
	if err := validText("--summary", r.Summary, 4096, true); err != nil {
		return err
	}
	if r.DedupeKey != "" {
		return validID("--dedupe-key", r.DedupeKey)
	}
	return nil
}

// Submit creates a running job, or returns the existing job for a repeated
// dedupe key (Deduplicated=true). Bad input never touches the store.
func (sv *Service) Submit(ctx context.Context, actor audit.Actor, r SubmitRequest) (*Job, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	var meta Metadata
	if r.MetadataFile != "" && r.Metadata == nil {
		return nil, abi.Errorf(abi.EINVAL, "metadata file %s was not passed as an open descriptor", r.MetadataFile)
	}
	if r.Metadata != nil {
		data, err := inputs.ReadAll(r.Metadata, MaxMetadata)
		if err != nil {
			return nil, err
		}
		if meta, err = ParseMetadata(data); err != nil {
			return nil, err
		}
	}
	pol, src := Normalize(r.Policy, meta.DeliveryPolicy)
	srcJSON, _ := json.Marshal(src)
	var id string
	deduped := false
	err := delivery.Run(ctx, sv.Store, sv.Cfg, actor, func(o *delivery.Op) error {
		if r.DedupeKey != "" {
			err := o.Tx.QueryRowContext(ctx, `SELECT job_id FROM jobs WHERE dedupe_key = ?`, r.DedupeKey).Scan(&id)
			if err == nil {
				deduped = true
				return nil
			}
			if !store.IsNoRows(err) {
				return err
			}
		}
		id = ids.New(Prefix)
		var metaRef, metaJSON, dedupe, task any
		if r.MetadataFile != "" {
			metaRef, metaJSON = r.MetadataFile, string(meta.Raw)
		}
		if r.DedupeKey != "" {
			dedupe = r.DedupeKey
		}
		if r.TaskID != "" {
			task = r.TaskID
		}
		if _, err := o.Tx.ExecContext(ctx, `INSERT INTO jobs(job_id, target_kind, source_thread_id, status, task_kind,
			task_summary, metadata_ref, metadata_json, dedupe_key, delivery_read_only, delivery_requires_approval,
			delivery_requires_network, delivery_requires_write_access, delivery_policy_sources, task_id, created_at,
			updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, id, r.TargetKind, r.SourceThreadID, Running,
			r.TaskKind, r.Summary, metaRef, metaJSON, dedupe, pol.ReadOnly, pol.RequiresApproval, pol.RequiresNetwork,
			pol.RequiresWriteAccess, string(srcJSON), task, o.At(), o.At()); err != nil {
			return err
		}
		return o.Audit(audit.Entry{Action: "job.submit", EntityKind: "job", EntityID: id,
			SourceThreadID: r.SourceThreadID, To: string(Running), Outcome: "ok",
			Detail: map[string]any{"delivery_policy": pol, "delivery_policy_sources": src}})
	})
	if err != nil {
		return nil, err
	}
	j, err := Get(ctx, sv.Store.DB, id)
	if j != nil {
		j.Deduplicated = deduped
	}
	return j, err
}

// casJob moves a job from -> to with extra assignments and an audit row;
// a job no longer in from is a no-op reported by ok=false.
func casJob(o *delivery.Op, id string, from, to Status, reason string, sets string, args ...any) (bool, error) {
	if !Allowed(from, to) {
		return false, nil
	}
	q := `UPDATE jobs SET status = ?, updated_at = ?` + sets + ` WHERE job_id = ? AND status = ?`
	all := append([]any{to, o.At()}, args...)
	res, err := o.Tx.ExecContext(o.Ctx, q, append(all, id, from)...)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return false, nil
	}
	var thread string
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT source_thread_id FROM jobs WHERE job_id = ?`, id).Scan(&thread); err != nil {
		return false, err
	}
	return true, o.Audit(audit.Entry{Action: "job.transition", EntityKind: "job", EntityID: id, SourceThreadID: thread,
		From: string(from), To: string(to), Reason: reason, Outcome: "ok"})
}

func currentStatus(o *delivery.Op, id string) (Status, error) {
	var st Status
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT status FROM jobs WHERE job_id = ?`, id).Scan(&st)
	if store.IsNoRows(err) {
		return "", abi.Errorf(abi.ENOENT, "no job %q", id)
	}
	return st, err
}

func notRunning(id string, st Status) error {
	return abi.Errorf(abi.EEXIST, "job %s is %s, not running", id, st)
}
