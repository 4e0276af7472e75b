// Package jobs is cbth's job orchestrator: submit (with delivery-policy
// normalization and dedupe), complete (with artifact ingest), fail, cancel
// and query. Ready and failed jobs enter their thread's delivery FIFO.
package jobs

import (
	"context"
	"database/sql"
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
	TargetKind     string   `json:"target"`
	SourceThreadID string   `json:"thread_id"`
	TaskKind       string   `json:"task_kind"`
	Summary        string   `json:"summary"`
	MetadataFile   string   `json:"metadata_file,omitempty"` // as given: metadata_ref
	Metadata       *os.File `json:"-"`                       // the file, opened by the client
	// MetadataInline is the metadata document itself, as a bulk submit's
	// line carries it (inline, or read by the client from metadata_file).
	MetadataInline json.RawMessage `json:"metadata_inline,omitempty"`
	DedupeKey      string          `json:"dedupe_key,omitempty"`
	Policy         PolicyInput     `json:"delivery_policy"`
	TaskID         string          `json:"-"`
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
	p, err := sv.Prepare(r)
	if err != nil {
		return nil, err
	}
	var id string
	deduped := false
	err = delivery.Run(ctx, sv.Store, sv.Cfg, actor, func(o *delivery.Op) (err error) {
		id, deduped, err = p.Insert(o)
		return err
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

// Prepared is a validated submit whose metadata has been read and whose
// delivery policy is normalized, ready to be inserted in a transaction.
type Prepared struct {
	r       SubmitRequest
	meta    Metadata
	hasMeta bool
	pol     Policy
	src     Source
}

// Prepare validates r and reads its metadata file, outside any transaction.
func (sv *Service) Prepare(r SubmitRequest) (*Prepared, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	p := &Prepared{r: r}
	if r.MetadataFile != "" && r.Metadata == nil && len(r.MetadataInline) == 0 {
		return nil, abi.Errorf(abi.EINVAL, "metadata file %s was not passed as an open descriptor", r.MetadataFile)
	}
	if r.Metadata != nil && len(r.MetadataInline) > 0 {
		return nil, abi.Errorf(abi.EINVAL, "metadata comes as a descriptor or inline, not both")
	}
	data := []byte(r.MetadataInline)
	if r.Metadata != nil {
		var err error
		if data, err = inputs.ReadAll(r.Metadata, MaxMetadata); err != nil {
			return nil, err
		}
	}
	if r.Metadata != nil || len(r.MetadataInline) > 0 {
		var err error
		if p.meta, err = ParseMetadata(data); err != nil {
			return nil, err
		}
		p.hasMeta = true
	}
	p.pol, p.src = Normalize(r.Policy, p.meta.DeliveryPolicy)
	return p, nil
}

// Insert records the job in o's transaction (a task run inserts its task
// row in the same one). A dedupe key already used by the same request
// returns that job (deduped); used by a different request (another thread,
// target, kind, summary, policy or metadata) it is EEXIST: the key must
// never route one request's result to another's thread.
func (p *Prepared) Insert(o *delivery.Op) (id string, deduped bool, err error) {
	r := p.r
	var metaJSON any
	if p.hasMeta {
		metaJSON = string(p.meta.Raw)
	}
	if r.DedupeKey != "" {
		var prev struct {
			id, target, thread, kind, summary string
			meta                              sql.NullString
			pol                               Policy
		}
		err := o.Tx.QueryRowContext(o.Ctx, `SELECT job_id, target_kind, source_thread_id, task_kind, task_summary,
			metadata_json, delivery_read_only, delivery_requires_approval, delivery_requires_network,
			delivery_requires_write_access FROM jobs WHERE dedupe_key = ?`, r.DedupeKey).Scan(&prev.id, &prev.target,
			&prev.thread, &prev.kind, &prev.summary, &prev.meta, &prev.pol.ReadOnly, &prev.pol.RequiresApproval,
			&prev.pol.RequiresNetwork, &prev.pol.RequiresWriteAccess)
		switch {
		case err == nil:
			same := prev.target == r.TargetKind && prev.thread == r.SourceThreadID && prev.kind == r.TaskKind &&
				prev.summary == r.Summary && prev.pol == p.pol && prev.meta.String == string(p.meta.Raw) &&
				prev.meta.Valid == (metaJSON != nil)
			if !same {
				return "", false, abi.Errorf(abi.EEXIST, "--dedupe-key %q is already used by job %s (thread %s) "+
					"for a different request; use a new key", r.DedupeKey, prev.id, prev.thread)
			}
			return prev.id, true, nil
		case !store.IsNoRows(err):
			return "", false, err
		}
	}
	id = ids.New(Prefix)
	var metaRef, dedupe, task any
	if r.MetadataFile != "" {
		metaRef = r.MetadataFile
	}
	if r.DedupeKey != "" {
		dedupe = r.DedupeKey
	}
	if r.TaskID != "" {
		task = r.TaskID
	}
	srcJSON, _ := json.Marshal(p.src)
	if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO jobs(job_id, target_kind, source_thread_id, status, task_kind,
		task_summary, metadata_ref, metadata_json, dedupe_key, delivery_read_only, delivery_requires_approval,
		delivery_requires_network, delivery_requires_write_access, delivery_policy_sources, task_id, created_at,
		updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, id, r.TargetKind, r.SourceThreadID, Running,
		r.TaskKind, r.Summary, metaRef, metaJSON, dedupe, p.pol.ReadOnly, p.pol.RequiresApproval, p.pol.RequiresNetwork,
		p.pol.RequiresWriteAccess, string(srcJSON), task, o.At(), o.At()); err != nil {
		return "", false, err
	}
	return id, false, o.Audit(audit.Entry{Action: "job.submit", EntityKind: "job", EntityID: id,
		SourceThreadID: r.SourceThreadID, To: string(Running), Outcome: "ok",
		Detail: map[string]any{"delivery_policy": p.pol, "delivery_policy_sources": p.src}})
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
