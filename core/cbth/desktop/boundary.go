package desktop

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// BoundaryRequest is note-boundary-crossed: the caller's full prompt token.
type BoundaryRequest struct {
	SourceThreadID           string `json:"source_thread_id"`
	BatchID                  string `json:"batch_id"`
	AttemptID                string `json:"attempt_id"`
	Generation               int64  `json:"generation"`
	ExpectedSnapshotRevision string `json:"expected_snapshot_revision"`
	// NotAfter is when the caller stops waiting for the answer (its client
	// deadline). A request the daemon reaches later is refused unchanged,
	// so once NotAfter has passed a caller that got no answer can prove
	// from the batch alone whether the boundary was crossed.
	NotAfter string `json:"not_after,omitempty"`
}

// BoundaryResult echoes the token; on fresh success it carries the inline
// continuation, the only place the automatic caller path ever sees it.
type BoundaryResult struct {
	Outcome                     delivery.Outcome      `json:"outcome"`
	SourceThreadID              string                `json:"source_thread_id"`
	BatchID                     string                `json:"batch_id"`
	AttemptID                   string                `json:"attempt_id"`
	Generation                  int64                 `json:"generation"`
	SnapshotRevision            string                `json:"snapshot_revision"`
	AttemptState                delivery.AttemptState `json:"attempt_state,omitempty"`
	Continuation                *Continuation         `json:"continuation,omitempty"`
	BoundaryRecoveryEnvelopeRef string                `json:"boundary_recovery_envelope_ref,omitempty"`
	NotAutomaticBecause         []string              `json:"not_automatic_because,omitempty"`
	// NotAfter (with unknown_after_helper_failure): from then on the batch
	// alone proves whether the boundary was crossed.
	NotAfter string `json:"not_after,omitempty"`
}

// Continuation is the inline continuation payload: the batch summary and
// every job's result, with small artifacts inline.
type Continuation struct {
	BatchID        string            `json:"batch_id"`
	SourceThreadID string            `json:"source_thread_id"`
	Summary        string            `json:"summary"`
	Jobs           []ContinuationJob `json:"jobs"`
}

// ContinuationJob is one job of the batch.
type ContinuationJob struct {
	JobID         string          `json:"job_id"`
	Status        string          `json:"status"`
	TaskKind      string          `json:"task_kind"`
	TaskSummary   string          `json:"task_summary"`
	ResultSummary *string         `json:"result_summary,omitempty"`
	FailureReason *string         `json:"failure_reason,omitempty"`
	Artifact      *InlineArtifact `json:"artifact,omitempty"`
}

// InlineArtifact is an artifact small enough to travel inline: UTF-8 text
// as text, anything else as base64.
type InlineArtifact struct {
	ArtifactID  string  `json:"artifact_id"`
	ContentType string  `json:"content_type"`
	SizeBytes   int64   `json:"size_bytes"`
	SHA256      string  `json:"sha256"`
	Text        *string `json:"text,omitempty"`
	Base64      *string `json:"base64,omitempty"`
}

// maxContinuation keeps the answer inside one IPC frame (1 MiB).
const maxContinuation = 768 << 10

// NoteBoundaryCrossed is the gated continuation helper. Before any change
// it checks the whole token against the head batch, head attempt and
// materialized snapshot revision (stale_or_superseded), that the batch was
// not already crossed or handed off (already_crossed_or_handoff_recorded),
// that the attempt is in cooldown (transient_not_ready), and that the
// binding is bound with armed_generation equal to this generation, its
// mirror equal to the installation state, the fingerprint unchanged and
// read and writeback validated (binding_or_capability_invalid). Only then,
// in one transaction, it writes the inline handoff payload and the
// operator-only boundary_recovery_envelope, moves the batch to
// crossed_unacknowledged + manual_resolution_only and closes it
// handoff_recorded, and returns the continuation.
func (sv *Service) NoteBoundaryCrossed(ctx context.Context, a audit.Actor, r BoundaryRequest) (*BoundaryResult, error) {
	tok := delivery.Token{SourceThreadID: r.SourceThreadID, BatchID: r.BatchID, AttemptID: r.AttemptID, Generation: r.Generation}
	if err := validToken(tok); err != nil {
		return nil, err
	}
	if err := validID("--batch-id", r.BatchID); err != nil {
		return nil, err
	}
	if err := validID("--expected-snapshot-revision", r.ExpectedSnapshotRevision); err != nil {
		return nil, err
	}
	if r.NotAfter != "" {
		t, err := time.Parse(time.RFC3339Nano, r.NotAfter)
		if err != nil {
			return nil, errInvalid("not_after %q is not an RFC 3339 time", r.NotAfter)
		}
		r.NotAfter = store.TS(t)
	}
	observed := sv.Observe().Fingerprint()
	res := &BoundaryResult{SourceThreadID: r.SourceThreadID, BatchID: r.BatchID, AttemptID: r.AttemptID,
		Generation: r.Generation, SnapshotRevision: r.ExpectedSnapshotRevision}
	var staged *artifacts.Staged
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		var err error
		staged, err = sv.noteBoundary(o, tok, r.ExpectedSnapshotRevision, r.NotAfter, observed, res)
		return err
	})
	if err != nil || res.Outcome != delivery.OutcomeOK {
		if staged != nil {
			staged.Discard()
		}
		res.Continuation, res.BoundaryRecoveryEnvelopeRef = nil, ""
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (sv *Service) boundaryCheck(o *delivery.Op, tok delivery.Token, rev, observed string, res *BoundaryResult) (bool, error) {
	var thread, closeReason, boundary sql.NullString
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT source_thread_id, close_reason, continuation_boundary_state
		FROM batches WHERE batch_id = ?`, tok.BatchID).Scan(&thread, &closeReason, &boundary)
	if err != nil && !store.IsNoRows(err) {
		return false, err
	}
	res.Outcome = delivery.OutcomeStaleOrSuperseded
	if thread.String != tok.SourceThreadID {
		return false, nil
	}
	if closeReason.String == string(delivery.CloseHandoffRecorded) || (boundary.Valid && boundary.String != "not_crossed") {
		res.Outcome = delivery.OutcomeAlreadyCrossed
		return false, nil
	}
	h, ok, err := delivery.LoadHead(o, tok)
	if err != nil || !ok || h.SnapshotRevision != rev || h.ReplayPolicy != delivery.ReplayAutomatic {
		return false, err
	}
	res.AttemptState = h.AttemptState
	switch h.AttemptState {
	case delivery.AttemptAbandoned, delivery.AttemptClosed, delivery.AttemptSuperseded:
		return false, nil // an attempt that ended is stale, never "not ready yet"
	}
	b, why, err := sv.gate(o, tok.SourceThreadID, observed)
	if err != nil {
		return false, err
	}
	if h.AttemptState != delivery.AttemptCooldown {
		// Not armed yet: transient_not_ready (replay may follow) only
		// while the binding could still carry it.
		if len(why) > 0 {
			res.Outcome, res.NotAutomaticBecause = delivery.OutcomeBindingInvalid, why
		} else {
			res.Outcome = delivery.OutcomeTransientNotReady
		}
		return false, nil
	}
	if b != nil && (b.ArmedGeneration == nil || *b.ArmedGeneration != tok.Generation) {
		why = append(why, "armed_generation is not this generation")
	}
	if h.TargetKind != delivery.TargetDesktop || h.RequiresArtifactRead {
		why = append(why, "batch is not on the Desktop automatic caller path")
	}
	if len(why) > 0 {
		res.Outcome, res.NotAutomaticBecause = delivery.OutcomeBindingInvalid, why
		return false, nil
	}
	return true, nil
}

func (sv *Service) noteBoundary(o *delivery.Op, tok delivery.Token, rev, notAfter, observed string, res *BoundaryResult) (*artifacts.Staged, error) {
	if notAfter != "" && notAfter < o.At() {
		res.Outcome, res.NotAutomaticBecause = delivery.OutcomeTransientNotReady,
			[]string{"the request arrived after its not_after " + notAfter + "; nothing was changed"}
		return nil, nil
	}
	if ok, err := sv.boundaryCheck(o, tok, rev, observed, res); err != nil || !ok {
		return nil, err
	}
	cont, err := buildContinuation(o, tok, o.Cfg.MaxInlineArtifactBytes)
	if err != nil {
		return nil, err
	}
	payload, _ := json.Marshal(cont)
	if len(payload) > maxContinuation {
		return nil, abi.Errorf(abi.EMSGSIZE, "continuation of batch %s is %d bytes, more than %d: close it as an operator",
			tok.BatchID, len(payload), maxContinuation)
	}
	env := envelope{BatchID: tok.BatchID, SourceThreadID: tok.SourceThreadID, AttemptID: tok.AttemptID,
		Generation: tok.Generation, SnapshotRevision: rev, ClosedAt: o.At(), CloseReason: string(delivery.CloseHandoffRecorded),
		InlinePayloadSummary: cont.Summary, ArtifactIDs: []string{}, ArtifactManifestRefs: []string{}, CreatedAt: o.At()}
	var staged *artifacts.Staged
	if int64(len(payload)) <= o.Cfg.Desktop.MaxBoundaryRecoveryInlineBytes {
		env.InlinePayload = cont
	} else {
		// Too large to keep inline: the payload becomes a managed recovery
		// artifact and the envelope keeps only its reference.
		if staged, err = artifacts.StageBytes(sv.Home.Artifacts(), payload, "boundary-recovery-"+tok.BatchID+".json",
			"application/json", cont.Jobs[0].JobID, o.Now); err != nil {
			return nil, err
		}
		if err := artifacts.Insert(o.Ctx, o.Tx, staged, o.Cfg); err != nil {
			return staged, err
		}
		env.InlinePayloadRef = ptr("artifact:" + staged.ArtifactID)
	}
	for _, j := range cont.Jobs {
		if j.Artifact != nil {
			env.ArtifactIDs = append(env.ArtifactIDs, j.Artifact.ArtifactID)
		}
	}
	if err := env.fillManifests(o); err != nil {
		return staged, err
	}
	ref := "boundary_recovery_envelopes/" + tok.BatchID
	body, _ := json.Marshal(env)
	var payloadArt any
	if staged != nil {
		payloadArt = staged.ArtifactID
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO boundary_recovery_envelopes(batch_id, source_thread_id, envelope_json,
		envelope_bytes, inline_payload_bytes, payload_artifact_id, created_at, retention_until) VALUES (?,?,?,?,?,?,?,?)`,
		tok.BatchID, tok.SourceThreadID, string(body), len(body), len(payload), payloadArt, o.At(), o.At()); err != nil {
		return staged, err
	}
	dr, err := delivery.RecordHandoff(o, tok, delivery.Handoff{SnapshotRevision: rev, EnvelopeRef: ref, EnvelopeBytes: int64(len(body))})
	if err != nil {
		return staged, err
	}
	if dr.Outcome != delivery.OutcomeOK {
		return staged, abi.Errorf(abi.EIO, "desktop: handoff of %s refused after its checks passed: %s", tok.BatchID, dr.Outcome)
	}
	if err := retainEnvelope(o, tok.BatchID, &env, staged); err != nil {
		return staged, err
	}
	if err := o.Audit(audit.Entry{Action: "desktop.boundary_crossed", EntityKind: "batch", EntityID: tok.BatchID,
		SourceThreadID: tok.SourceThreadID, To: string(delivery.CloseHandoffRecorded), Outcome: string(delivery.OutcomeOK),
		Detail: map[string]any{"attempt_id": tok.AttemptID, "generation": tok.Generation, "snapshot_revision": rev,
			"inline_payload_bytes": len(payload), "envelope_ref": ref}}); err != nil {
		return staged, err
	}
	res.Outcome, res.AttemptState, res.Continuation, res.BoundaryRecoveryEnvelopeRef = delivery.OutcomeOK, dr.AttemptState, cont, ref
	return staged, nil
}

// buildContinuation reads the batch's jobs and their (small) artifacts.
func buildContinuation(o *delivery.Op, tok delivery.Token, maxInline int64) (*Continuation, error) {
	b, err := delivery.Inspect(o.Ctx, o.Tx, tok.BatchID)
	if err != nil {
		return nil, err
	}
	c := &Continuation{BatchID: tok.BatchID, SourceThreadID: tok.SourceThreadID, Jobs: []ContinuationJob{}}
	if b.Summary != nil {
		c.Summary = *b.Summary
	}
	rows, err := o.Tx.QueryContext(o.Ctx, `SELECT j.job_id, j.status, j.task_kind, j.task_summary, j.result_summary,
		j.failure_reason, j.artifact_id FROM batch_jobs bj JOIN jobs j ON j.job_id = bj.job_id WHERE bj.batch_id = ?
		ORDER BY bj.position`, tok.BatchID)
	if err != nil {
		return nil, err
	}
	var arts []*string
	for rows.Next() {
		var j ContinuationJob
		var art *string
		if err := rows.Scan(&j.JobID, &j.Status, &j.TaskKind, &j.TaskSummary, &j.ResultSummary, &j.FailureReason, &art); err != nil {
			rows.Close()
			return nil, err
		}
		c.Jobs, arts = append(c.Jobs, j), append(arts, art)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(c.Jobs) == 0 {
		return nil, abi.Errorf(abi.EIO, "desktop: batch %s has no jobs", tok.BatchID)
	}
	for i, id := range arts {
		if id == nil {
			continue
		}
		a, err := artifacts.Get(o.Ctx, o.Tx, *id)
		if err != nil {
			return nil, err
		}
		if c.Jobs[i].Artifact, err = inlineArtifact(a, maxInline); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// inlineArtifact reads a managed artifact of at most maxInline bytes and
// checks it against its recorded size and sha256.
func inlineArtifact(a artifacts.Artifact, maxInline int64) (*InlineArtifact, error) {
	if a.GCAt != nil || a.SizeBytes > maxInline {
		return nil, abi.Errorf(abi.EIO, "desktop: artifact %s cannot travel inline", a.ArtifactID)
	}
	f, err := openManaged(a.ManagedPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInline+1))
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "desktop: read artifact %s: %v", a.ArtifactID, err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != a.SizeBytes || hex.EncodeToString(sum[:]) != a.SHA256 {
		return nil, abi.Errorf(abi.EIO, "desktop: artifact %s does not match its recorded size and sha256", a.ArtifactID)
	}
	ia := &InlineArtifact{ArtifactID: a.ArtifactID, ContentType: a.ContentType, SizeBytes: a.SizeBytes, SHA256: a.SHA256}
	if utf8.Valid(data) {
		ia.Text = ptr(string(data))
	} else {
		ia.Base64 = ptr(base64.StdEncoding.EncodeToString(data))
	}
	return ia, nil
}

// openManaged opens a managed artifact payload without following a
// symlink and without blocking on a FIFO, and refuses non-regular files.
func openManaged(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "desktop: open artifact: %v", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, abi.Errorf(abi.EIO, "desktop: artifact %s is not a regular file", p)
	}
	return f, nil
}
