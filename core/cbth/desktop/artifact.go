package desktop

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// MaxReadChunk bounds one read-artifact chunk so that its base64 answer
// stays inside one IPC frame.
const MaxReadChunk = 512 << 10

// recoveryScope lists the artifacts an operator of the batch may read: the
// jobs' artifacts and the envelope's payload recovery artifact.
func recoveryScope(o *delivery.Op, batchID string) (map[string]bool, bool, error) {
	scope := map[string]bool{}
	rows, err := o.Tx.QueryContext(o.Ctx, `SELECT j.artifact_id FROM batch_jobs bj JOIN jobs j ON j.job_id = bj.job_id
		WHERE bj.batch_id = ? AND j.artifact_id IS NOT NULL`, batchID)
	if err != nil {
		return nil, false, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, false, err
		}
		scope[id] = true
	}
	rows.Close()
	var payload *string
	var live int
	err = o.Tx.QueryRowContext(o.Ctx, `SELECT payload_artifact_id, gc_at IS NULL FROM boundary_recovery_envelopes
		WHERE batch_id = ?`, batchID).Scan(&payload, &live)
	if err != nil && !store.IsNoRows(err) {
		return nil, false, err
	}
	if payload != nil {
		scope[*payload] = true
	}
	return scope, live == 1, nil
}

// inspectRecovery is the Desktop part of `cbth batch inspect --batch-id`:
// the boundary_recovery_envelope of a handed-off batch and, when the batch
// has artifacts an operator may need (a recovery payload artifact or a
// batch that required an artifact read), a short-lived
// artifact_recovery_lease_id + deadline for read-artifact. A live lease
// with at least half its life left is returned again; otherwise a new one
// replaces (rotates out) the old.
func (sv *Service) inspectRecovery(ctx context.Context, a audit.Actor, b *delivery.Batch) error {
	return sv.run(ctx, a, func(o *delivery.Op) error {
		var body *string
		err := o.Tx.QueryRowContext(o.Ctx, `SELECT envelope_json FROM boundary_recovery_envelopes WHERE batch_id = ?`,
			b.BatchID).Scan(&body)
		if err != nil && !store.IsNoRows(err) {
			return err
		}
		if body != nil {
			b.BoundaryRecoveryEnvelope = json.RawMessage(*body)
		}
		scope, envLive, err := recoveryScope(o, b.BatchID)
		if err != nil || len(scope) == 0 {
			return err
		}
		needLease := envLive || (b.RequiresArtifactRead != nil && *b.RequiresArtifactRead)
		if !needLease {
			return nil
		}
		ttl := o.Cfg.Desktop.ArtifactRecoveryLeaseTTL
		var id, dead string
		err = o.Tx.QueryRowContext(o.Ctx, `SELECT lease_id, deadline FROM artifact_read_leases WHERE batch_id = ?
			AND revoked_at IS NULL AND deadline > ? ORDER BY deadline DESC LIMIT 1`, b.BatchID,
			store.TS(o.Now.Add(ttl/2))).Scan(&id, &dead)
		if err == nil {
			b.ArtifactRecoveryLeaseID, b.ArtifactRecoveryLeaseDeadline = &id, &dead
			return nil
		}
		if !store.IsNoRows(err) {
			return err
		}
		if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE artifact_read_leases SET revoked_at = ?, revoke_reason = 'rotated'
			WHERE batch_id = ? AND revoked_at IS NULL`, o.At(), b.BatchID); err != nil {
			return err
		}
		id, dead = ids.Lease(LeasePrefix), store.TS(o.Now.Add(ttl))
		if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO artifact_read_leases(lease_id, kind, batch_id, issued_at, deadline)
			VALUES (?, 'artifact_recovery', ?, ?, ?)`, id, b.BatchID, o.At(), dead); err != nil {
			return err
		}
		b.ArtifactRecoveryLeaseID, b.ArtifactRecoveryLeaseDeadline = &id, &dead
		return o.Audit(audit.Entry{Action: "desktop.artifact_recovery_lease", EntityKind: "batch", EntityID: b.BatchID,
			SourceThreadID: b.SourceThreadID, Outcome: string(delivery.OutcomeOK),
			Detail: map[string]any{"deadline": dead, "artifacts": len(scope)}})
	})
}

// ReadRequest is read-artifact.
type ReadRequest struct {
	ArtifactID          string `json:"artifact_id"`
	ArtifactReadLeaseID string `json:"artifact_read_lease_id"`
	Offset              int64  `json:"offset"`
	MaxBytes            int64  `json:"max_bytes"`
}

// ReadResult is one chunk: the payload never leaves as a path, only as
// bytes (base64), with the whole artifact's size and sha256 to check.
type ReadResult struct {
	Outcome     delivery.Outcome `json:"outcome"`
	ArtifactID  string           `json:"artifact_id"`
	ContentType string           `json:"content_type,omitempty"`
	SizeBytes   int64            `json:"size_bytes"`
	SHA256      string           `json:"sha256,omitempty"`
	Offset      int64            `json:"offset"`
	Bytes       int              `json:"bytes"`
	EOF         bool             `json:"eof"`
	DataBase64  string           `json:"data_base64"`
	Why         string           `json:"why,omitempty"`
}

// ReadArtifact returns one chunk of an artifact under a live artifact read
// lease whose batch covers it. A lease that expired, was rotated or
// revoked, or whose artifact was collected is stale_or_superseded: a stale
// wake holding an old artifact_id cannot read past the boundary.
func (sv *Service) ReadArtifact(ctx context.Context, r ReadRequest) (*ReadResult, error) {
	if err := validID("--artifact-id", r.ArtifactID); err != nil {
		return nil, err
	}
	if err := validID("--artifact-read-lease-id", r.ArtifactReadLeaseID); err != nil {
		return nil, err
	}
	if r.Offset < 0 || r.MaxBytes < 1 || r.MaxBytes > MaxReadChunk {
		return nil, errInvalid("--offset must be >= 0 and --max-bytes in [1, %d]", MaxReadChunk)
	}
	res := &ReadResult{ArtifactID: r.ArtifactID, Offset: r.Offset, Outcome: delivery.OutcomeStaleOrSuperseded}
	var art artifacts.Artifact
	err := sv.run(ctx, audit.Actor{Name: "read"}, func(o *delivery.Op) error {
		var batch string
		var dead string
		var revoked *string
		err := o.Tx.QueryRowContext(o.Ctx, `SELECT batch_id, deadline, revoke_reason FROM artifact_read_leases
			WHERE lease_id = ?`, r.ArtifactReadLeaseID).Scan(&batch, &dead, &revoked)
		switch {
		case store.IsNoRows(err):
			res.Why = "unknown lease"
			return nil
		case err != nil:
			return err
		case revoked != nil:
			res.Why = "lease " + *revoked
			return nil
		case dead <= o.At():
			res.Why = "lease expired at " + dead
			return nil
		}
		scope, _, err := recoveryScope(o, batch)
		if err != nil {
			return err
		}
		if !scope[r.ArtifactID] {
			res.Why = "artifact is not covered by this lease"
			return nil
		}
		if art, err = artifacts.Get(o.Ctx, o.Tx, r.ArtifactID); err != nil {
			return err
		}
		if art.GCAt != nil {
			res.Why = "artifact was collected"
			return nil
		}
		res.Outcome = delivery.OutcomeOK
		return nil
	})
	if err != nil || res.Outcome != delivery.OutcomeOK {
		return res, err
	}
	f, err := openManaged(art.ManagedPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != art.SizeBytes {
		return nil, abi.Errorf(abi.EIO, "desktop: artifact %s does not have its recorded size", art.ArtifactID)
	}
	buf := make([]byte, min(r.MaxBytes, max(art.SizeBytes-r.Offset, 0)))
	n, err := f.ReadAt(buf, r.Offset)
	if err != nil && err != io.EOF {
		return nil, abi.Errorf(abi.EIO, "desktop: read %s: %v", art.ArtifactID, err)
	}
	res.ContentType, res.SizeBytes, res.SHA256 = art.ContentType, art.SizeBytes, art.SHA256
	res.Bytes, res.EOF, res.DataBase64 = n, r.Offset+int64(n) >= art.SizeBytes, base64.StdEncoding.EncodeToString(buf[:n])
	return res, nil
}

// RevokeRequest is revoke-artifact-lease.
type RevokeRequest struct {
	ArtifactReadLeaseID string `json:"artifact_read_lease_id"`
}

// RevokeLease ends a lease now (operator); a lease already ended is
// stale_or_superseded.
func (sv *Service) RevokeLease(ctx context.Context, a audit.Actor, r RevokeRequest) (map[string]any, error) {
	if err := validID("--artifact-read-lease-id", r.ArtifactReadLeaseID); err != nil {
		return nil, err
	}
	out := map[string]any{"outcome": delivery.OutcomeStaleOrSuperseded, "artifact_read_lease_id": r.ArtifactReadLeaseID}
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		res, err := o.Tx.ExecContext(o.Ctx, `UPDATE artifact_read_leases SET revoked_at = ?, revoke_reason = 'revoked'
			WHERE lease_id = ? AND revoked_at IS NULL AND deadline > ?`, o.At(), r.ArtifactReadLeaseID, o.At())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		out["outcome"] = delivery.OutcomeOK
		return o.Audit(audit.Entry{Action: "desktop.artifact_recovery_lease.revoke", EntityKind: "lease",
			EntityID: r.ArtifactReadLeaseID, Outcome: string(delivery.OutcomeOK)})
	})
	return out, err
}
