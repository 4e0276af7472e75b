package desktop

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// MarkerKind is what a relay marker asks the consumer to do.
type MarkerKind string

const (
	MarkerArmPending  MarkerKind = "arm-pending"  // note-arm-pending
	MarkerArmAccepted MarkerKind = "arm-accepted" // note-arm
)

// MarkerKinds is both, in the seed's order.
var MarkerKinds = []MarkerKind{MarkerArmPending, MarkerArmAccepted}

// markerText is how a marker appears in the bridge's transcript.
const markerText = "cbth-relay/v1/"

// MarkerRequest is `cbth desktop relay marker issue`.
type MarkerRequest struct {
	BridgeThreadID  string     `json:"bridge_thread_id"`
	Kind            MarkerKind `json:"kind"`
	SourceThreadID  string     `json:"source_thread_id"`
	AttemptID       string     `json:"attempt_id"`
	Generation      int64      `json:"generation"`
	BridgeRequestID string     `json:"bridge_request_id"`
}

// MarkerResult is the marker the bridge writes into its assistant message.
type MarkerResult struct {
	Outcome         delivery.Outcome      `json:"outcome"`
	Marker          string                `json:"marker,omitempty"`
	MarkerID        string                `json:"marker_id,omitempty"`
	Kind            MarkerKind            `json:"kind"`
	BridgeThreadID  string                `json:"bridge_thread_id"`
	Token           delivery.Token        `json:"token"`
	BridgeRequestID string                `json:"bridge_request_id"`
	AttemptState    delivery.AttemptState `json:"attempt_state,omitempty"`
	ExpiresAt       string                `json:"expires_at,omitempty"`
}

// IssueMarker records a relay marker for one writeback step so that a
// bridge that may not run mutating helpers can ask for it in its
// transcript. It changes no delivery state. The token must still name the
// head attempt; an arm-accepted marker also needs the attempt arm_pending
// under the same bridge request (lease-held otherwise).
func (sv *Service) IssueMarker(ctx context.Context, a audit.Actor, r MarkerRequest) (*MarkerResult, error) {
	if r.Kind != MarkerArmPending && r.Kind != MarkerArmAccepted {
		return nil, errInvalid("--kind must be arm-pending or arm-accepted, not %q", r.Kind)
	}
	if err := validID("--bridge-thread-id", r.BridgeThreadID); err != nil {
		return nil, err
	}
	if err := (ArmRequest{SourceThreadID: r.SourceThreadID, AttemptID: r.AttemptID, Generation: r.Generation,
		BridgeRequestID: r.BridgeRequestID}).validate(false); err != nil {
		return nil, err
	}
	res := &MarkerResult{Outcome: delivery.OutcomeStaleOrSuperseded, Kind: r.Kind, BridgeThreadID: r.BridgeThreadID,
		BridgeRequestID: r.BridgeRequestID}
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		tok, ok, err := tokenOf(o, r.SourceThreadID, r.AttemptID, r.Generation)
		res.Token = tok
		if err != nil || !ok {
			return err
		}
		h, ok, err := delivery.LoadHead(o, tok)
		if err != nil || !ok {
			return err
		}
		res.AttemptState = h.AttemptState
		switch {
		case r.Kind == MarkerArmPending && h.AttemptState != delivery.AttemptPrepared && h.AttemptState != delivery.AttemptArmPending:
			return nil
		case r.Kind == MarkerArmAccepted && h.AttemptState != delivery.AttemptArmPending:
			return nil
		case h.AttemptState == delivery.AttemptArmPending && h.BridgeRequestID != r.BridgeRequestID:
			res.Outcome = delivery.OutcomeLeaseHeld
			return nil
		}
		id := ids.Lease(MarkerPrefix)
		res.Marker, res.MarkerID, res.ExpiresAt = markerText+id, id, store.TS(o.Now.Add(o.Cfg.Desktop.RelayMarkerTTL))
		if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO relay_markers(marker_id, marker, bridge_thread_id, kind,
			source_thread_id, batch_id, attempt_id, generation, bridge_request_id, issued_at, expires_at)
			VALUES (?,?,?,?,?,?,?,?,?,?,?)`, id, res.Marker, r.BridgeThreadID, r.Kind, tok.SourceThreadID, tok.BatchID,
			tok.AttemptID, tok.Generation, r.BridgeRequestID, o.At(), res.ExpiresAt); err != nil {
			return err
		}
		res.Outcome = delivery.OutcomeOK
		return o.Audit(audit.Entry{Action: "desktop.relay.marker", EntityKind: "marker", EntityID: id,
			SourceThreadID: tok.SourceThreadID, Outcome: string(delivery.OutcomeOK),
			Detail: map[string]any{"kind": r.Kind, "bridge_thread_id": r.BridgeThreadID, "attempt_id": tok.AttemptID,
				"generation": tok.Generation, "bridge_request_id": r.BridgeRequestID}})
	})
	return res, err
}

// ConsumeRequest is what `cbth desktop relay consume-transcript` sends the
// daemon: the marker and what the client found in the rollout (the client
// reads the rollout itself, with its own view and rights).
type ConsumeRequest struct {
	Marker   string   `json:"marker"`
	Evidence Evidence `json:"evidence"`
}

// ConsumeResult is the CAS the marker asked for, performed or not.
type ConsumeResult struct {
	Outcome        delivery.Outcome `json:"outcome"`
	Marker         string           `json:"marker"`
	Kind           MarkerKind       `json:"kind"`
	BridgeThreadID string           `json:"bridge_thread_id"`
	Evidence       Evidence         `json:"evidence"`
	Result         *ArmResult       `json:"result,omitempty"`
	ConsumedAt     *string          `json:"consumed_at,omitempty"`
	Why            string           `json:"why,omitempty"`
}

// ConsumeTranscript performs the marker's CAS (note-arm-pending or
// note-arm, the latter with the lease of the request the marker names)
// once the marker was found in an assistant message of the bridge
// thread's own rollout. Not found yet is transient_not_ready; an expired
// marker is stale_or_superseded; a rollout of another thread is EINVAL.
// Repeating it is idempotent: the CAS answers already-pending or
// already-armed and the first consumption stays recorded.
func (sv *Service) ConsumeTranscript(ctx context.Context, a audit.Actor, r ConsumeRequest) (*ConsumeResult, error) {
	if !strings.HasPrefix(r.Marker, markerText) || validID("--marker", r.Marker) != nil {
		return nil, errInvalid("--marker %q is not a cbth relay marker", r.Marker)
	}
	observed := sv.Observe().Fingerprint()
	res := &ConsumeResult{Marker: r.Marker, Evidence: r.Evidence, Outcome: delivery.OutcomeStaleOrSuperseded}
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		var m MarkerRequest
		var expires string
		var consumed *string
		err := o.Tx.QueryRowContext(o.Ctx, `SELECT bridge_thread_id, kind, source_thread_id, attempt_id, generation,
			bridge_request_id, expires_at, consumed_at FROM relay_markers WHERE marker = ?`, r.Marker).Scan(
			&m.BridgeThreadID, &m.Kind, &m.SourceThreadID, &m.AttemptID, &m.Generation, &m.BridgeRequestID, &expires, &consumed)
		if store.IsNoRows(err) {
			return abi.Errorf(abi.ENOENT, "no relay marker %q (never issued, or collected)", r.Marker)
		}
		if err != nil {
			return err
		}
		res.Kind, res.BridgeThreadID, res.ConsumedAt = m.Kind, m.BridgeThreadID, consumed
		if r.Evidence.SessionID != m.BridgeThreadID {
			return errInvalid("the rollout is thread %q, the marker was issued for bridge thread %q",
				r.Evidence.SessionID, m.BridgeThreadID)
		}
		switch {
		case !r.Evidence.Found:
			res.Outcome, res.Why = delivery.OutcomeTransientNotReady, "marker not in an assistant message of the rollout yet"
			return nil
		case consumed == nil && expires <= o.At():
			res.Why = "marker expired at " + expires
			return nil
		}
		req := ArmRequest{SourceThreadID: m.SourceThreadID, AttemptID: m.AttemptID, Generation: m.Generation,
			BridgeRequestID: m.BridgeRequestID}
		var arm ArmResult
		if m.Kind == MarkerArmPending {
			arm, err = sv.noteArmPending(o, req, observed)
		} else {
			arm, err = sv.noteArm(o, req, observed, true)
		}
		if err != nil {
			return err
		}
		res.Result, res.Outcome = &arm, arm.Outcome
		if arm.Outcome != delivery.OutcomeOK && arm.Outcome != delivery.OutcomeAlreadyPending &&
			arm.Outcome != delivery.OutcomeAlreadyArmed {
			return nil
		}
		if consumed != nil {
			return nil
		}
		evidence, _ := json.Marshal(r.Evidence)
		res.ConsumedAt = ptr(o.At())
		if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE relay_markers SET consumed_at = ?, consume_outcome = ?,
			evidence_json = ? WHERE marker = ? AND consumed_at IS NULL`, o.At(), arm.Outcome, string(evidence), r.Marker); err != nil {
			return err
		}
		return o.Audit(audit.Entry{Action: "desktop.relay.consume", EntityKind: "marker", EntityID: r.Marker,
			SourceThreadID: m.SourceThreadID, Outcome: string(arm.Outcome),
			Detail: map[string]any{"kind": m.Kind, "line": r.Evidence.Line, "timestamp": r.Evidence.Timestamp}})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
