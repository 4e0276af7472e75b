package desktop

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// envelope is the boundary_recovery_envelope (seed "Boundary recovery
// envelope retention", minimum schema): operator-only evidence of a
// handoff, enough to recover the payload after a lost post-boundary answer.
type envelope struct {
	BatchID              string        `json:"batch_id"`
	SourceThreadID       string        `json:"source_thread_id"`
	AttemptID            string        `json:"attempt_id"`
	Generation           int64         `json:"generation"`
	SnapshotRevision     string        `json:"snapshot_revision"`
	ClosedAt             string        `json:"closed_at"`
	CloseReason          string        `json:"close_reason"`
	InlinePayloadSummary string        `json:"inline_payload_summary"`
	InlinePayload        *Continuation `json:"inline_payload,omitempty"`
	InlinePayloadRef     *string       `json:"inline_payload_ref,omitempty"`
	ArtifactManifestRefs []string      `json:"artifact_manifest_refs"`
	ArtifactIDs          []string      `json:"artifact_ids"`
	CreatedAt            string        `json:"created_at"`
	RetentionUntil       string        `json:"retention_until"`
}

func (e *envelope) fillManifests(o *delivery.Op) error {
	for _, id := range e.ArtifactIDs {
		a, err := artifacts.Get(o.Ctx, o.Tx, id)
		if err != nil {
			return err
		}
		e.ArtifactManifestRefs = append(e.ArtifactManifestRefs, a.ManifestPath)
	}
	return nil
}

// retainEnvelope sets boundary_recovery_retention_until to the largest of
// closed_at + post_close_ttl, the retention_until of every artifact the
// envelope refers to and the operator pin, on the batch and the envelope.
// The payload recovery artifact is pinned as long, so it never goes first.
func retainEnvelope(o *delivery.Op, batchID string, e *envelope, payload *artifacts.Staged) error {
	closed, _ := store.ParseTS(e.ClosedAt)
	until := closed.Add(o.Cfg.PostCloseTTL)
	var pin *string
	if err := o.Tx.QueryRowContext(o.Ctx, `SELECT boundary_recovery_operator_pin_until FROM batches WHERE batch_id = ?`,
		batchID).Scan(&pin); err != nil {
		return err
	}
	if pin != nil {
		until = laterTS(until, *pin)
	}
	ids := append([]string{}, e.ArtifactIDs...)
	if payload != nil {
		if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE artifacts SET last_batch_closed_at = ? WHERE artifact_id = ?`,
			e.ClosedAt, payload.ArtifactID); err != nil {
			return err
		}
		if err := artifacts.Recompute(o.Ctx, o.Tx, payload.ArtifactID, o.Cfg); err != nil {
			return err
		}
		ids = append(ids, payload.ArtifactID)
	}
	for _, id := range ids {
		a, err := artifacts.Get(o.Ctx, o.Tx, id)
		if err != nil {
			return err
		}
		if a.RetentionUntil != nil {
			until = laterTS(until, *a.RetentionUntil)
		}
	}
	e.RetentionUntil = store.TS(until)
	if payload != nil {
		if err := artifacts.Pin(o.Ctx, o.Tx, payload.ArtifactID, until, o.Cfg); err != nil {
			return err
		}
	}
	body, _ := json.Marshal(e)
	if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE boundary_recovery_envelopes SET envelope_json = ?, envelope_bytes = ?,
		retention_until = ? WHERE batch_id = ?`, string(body), len(body), e.RetentionUntil, batchID); err != nil {
		return err
	}
	return delivery.SetBoundaryRecoveryRetention(o, batchID, e.RetentionUntil)
}

func laterTS(t time.Time, s string) time.Time {
	if u, err := store.ParseTS(s); err == nil && u.After(t) {
		return u
	}
	return t
}

// collect removes what the retention contract lets go: recovery envelopes
// past boundary_recovery_retention_until (recomputed now, so a later pin
// still counts), artifact read leases past their deadline, relay markers
// past their TTL and snapshot revisions no reader can still need.
func (sv *Service) collect(ctx context.Context, a audit.Actor, rep *ReconcileReport) error {
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		rows, err := o.Tx.QueryContext(o.Ctx, `SELECT e.batch_id, COALESCE(b.boundary_recovery_retention_until, e.retention_until),
			COALESCE(b.boundary_recovery_operator_pin_until, '') FROM boundary_recovery_envelopes e
			JOIN batches b ON b.batch_id = e.batch_id WHERE e.gc_at IS NULL AND e.retention_until <= ?`, o.At())
		if err != nil {
			return err
		}
		type due struct{ id, until, pin string }
		var list []due
		for rows.Next() {
			var d due
			if err := rows.Scan(&d.id, &d.until, &d.pin); err != nil {
				rows.Close()
				return err
			}
			list = append(list, d)
		}
		rows.Close()
		for _, d := range list {
			if d.until > o.At() || d.pin > o.At() {
				continue
			}
			// An artifact of the envelope pinned (or kept) longer since the
			// handoff extends the envelope with it: the retention is the max
			// over every related artifact's retention_until, now.
			later, err := artifactsRetainedAfter(o, d.id)
			if err != nil {
				return err
			}
			if later != "" {
				if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE boundary_recovery_envelopes SET retention_until = ?
					WHERE batch_id = ?`, later, d.id); err != nil {
					return err
				}
				if err := delivery.SetBoundaryRecoveryRetention(o, d.id, later); err != nil {
					return err
				}
				continue
			}
			if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE boundary_recovery_envelopes SET envelope_json = NULL, gc_at = ?
				WHERE batch_id = ? AND gc_at IS NULL`, o.At(), d.id); err != nil {
				return err
			}
			if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE artifact_read_leases SET revoked_at = ?,
				revoke_reason = 'envelope collected' WHERE batch_id = ? AND revoked_at IS NULL`, o.At(), d.id); err != nil {
				return err
			}
			rep.EnvelopesCollected++
			if err := o.Audit(audit.Entry{Action: "desktop.envelope.gc", EntityKind: "batch", EntityID: d.id,
				Reason: "boundary_recovery_retention_until passed", Outcome: string(delivery.OutcomeOK)}); err != nil {
				return err
			}
		}
		// Leases and markers are short-lived rows: expired ones are deleted
		// once the longest of their windows has passed twice over.
		res, err := o.Tx.ExecContext(o.Ctx, `DELETE FROM artifact_read_leases WHERE deadline <= ?`,
			store.TS(o.Now.Add(-o.Cfg.Desktop.ArtifactRecoveryLeaseTTL)))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		rep.LeasesExpired = int(n)
		res, err = o.Tx.ExecContext(o.Ctx, `DELETE FROM relay_markers WHERE expires_at <= ?`,
			store.TS(o.Now.Add(-o.Cfg.Desktop.RelayMarkerTTL)))
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		rep.MarkersCollected = int(n)
		return nil
	})
	if err != nil {
		return err
	}
	return sv.collectSnapshots(ctx, rep)
}

// artifactsRetainedAfter returns the latest retention_until (or pin) of
// the envelope's artifacts, the batch's jobs' and its payload artifact,
// when it is still in the future; "" when none keeps the envelope.
func artifactsRetainedAfter(o *delivery.Op, batchID string) (string, error) {
	var until *string
	err := o.Tx.QueryRowContext(o.Ctx, `SELECT MAX(MAX(COALESCE(a.retention_until, ''), COALESCE(a.operator_pin_until, '')))
		FROM artifacts a WHERE a.gc_at IS NULL AND (a.artifact_id IN (SELECT j.artifact_id FROM batch_jobs bj
		JOIN jobs j ON j.job_id = bj.job_id WHERE bj.batch_id = ?) OR a.artifact_id = (SELECT payload_artifact_id
		FROM boundary_recovery_envelopes WHERE batch_id = ?))`, batchID, batchID).Scan(&until)
	if err != nil || until == nil || *until <= o.At() {
		return "", err
	}
	return *until, nil
}
