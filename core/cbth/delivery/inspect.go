package delivery

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Batch is a delivery batch as the operator sees it (seed "Delivery batch
// 关键字段"), with its jobs, artifacts and attempts.
type Batch struct {
	BatchID                          string       `json:"batch_id"`
	SourceThreadID                   string       `json:"source_thread_id"`
	TargetKind                       TargetKind   `json:"target_kind"`
	JobIDs                           []string     `json:"job_ids"`
	State                            BatchState   `json:"state"`
	ArtifactIDs                      []string     `json:"artifact_ids"`
	Summary                          *string      `json:"summary"`
	FirstReadyAt                     string       `json:"first_ready_at"`
	LastReadyAt                      string       `json:"last_ready_at"`
	MaterializedAt                   *string      `json:"materialized_at"`
	LastDeliveryAttemptAt            *string      `json:"last_delivery_attempt_at"`
	NextDeliveryNotBefore            *string      `json:"next_delivery_not_before"`
	EligibleAfter                    *string      `json:"eligible_after"`
	RedeliveryWindowEndsAt           *string      `json:"redelivery_window_ends_at"`
	MaxDeliveryAttempts              int          `json:"max_delivery_attempts"`
	DeliveryAttemptCount             int          `json:"delivery_attempt_count"`
	HeadAttemptID                    *string      `json:"head_attempt_id"`
	Generation                       int64        `json:"generation"`
	SnapshotRevision                 *string      `json:"snapshot_revision"`
	ContinuationBoundaryState        string       `json:"continuation_boundary_state"`
	ContinuationBoundaryCrossedAt    *string      `json:"continuation_boundary_crossed_at"`
	BoundaryAttemptID                *string      `json:"boundary_attempt_id"`
	BoundaryGeneration               *int64       `json:"boundary_generation"`
	BoundarySnapshotRevision         *string      `json:"boundary_snapshot_revision"`
	BoundaryRecoveryEnvelopeRef      *string      `json:"boundary_recovery_envelope_ref"`
	BoundaryRecoveryEnvelopeBytes    *int64       `json:"boundary_recovery_envelope_bytes"`
	BoundaryRecoveryRetentionUntil   *string      `json:"boundary_recovery_retention_until"`
	BoundaryRecoveryOperatorPinUntil *string      `json:"boundary_recovery_operator_pin_until"`
	ReplayPolicy                     ReplayPolicy `json:"replay_policy"`
	ClosedAt                         *string      `json:"closed_at"`
	CloseReason                      *string      `json:"close_reason"`
	DeliveryMode                     *string      `json:"delivery_mode"`
	DeliveryReadOnly                 *bool        `json:"delivery_read_only"`
	DeliveryRequiresApproval         *bool        `json:"delivery_requires_approval"`
	DeliveryRequiresNetwork          *bool        `json:"delivery_requires_network"`
	DeliveryRequiresWriteAccess      *bool        `json:"delivery_requires_write_access"`
	InlinePayloadBytes               *int64       `json:"inline_payload_bytes"`
	ArtifactCount                    *int64       `json:"artifact_count"`
	RequiresArtifactRead             *bool        `json:"requires_artifact_read"`
	TotalBytes                       int64        `json:"total_bytes"`
	CreatedAt                        string       `json:"created_at"`
	UpdatedAt                        string       `json:"updated_at"`
	HeadAttempt                      *Attempt     `json:"head_attempt"`
	// Why an open batch is not delivered automatically, with the command
	// or flags that unblock it; null when nothing blocks it (computed by
	// the daemon's adapters, never stored).
	DeliveryBlockedReason *string   `json:"delivery_blocked_reason"`
	Attempts              []Attempt `json:"attempts"`
	// The operator recovery surface of a Desktop handoff, filled in by the
	// Desktop adapter for `cbth batch inspect --batch-id`.
	BoundaryRecoveryEnvelope      json.RawMessage `json:"boundary_recovery_envelope,omitempty"`
	ArtifactRecoveryLeaseID       *string         `json:"artifact_recovery_lease_id,omitempty"`
	ArtifactRecoveryLeaseDeadline *string         `json:"artifact_recovery_lease_deadline,omitempty"`
}

const batchColumns = `batch_id, source_thread_id, target_kind, state, summary, first_ready_at, last_ready_at,
	materialized_at, last_delivery_attempt_at, next_delivery_not_before, eligible_after, redelivery_window_ends_at,
	max_delivery_attempts, delivery_attempt_count, head_attempt_id, generation, snapshot_revision,
	continuation_boundary_state, continuation_boundary_crossed_at, boundary_attempt_id, boundary_generation,
	boundary_snapshot_revision, boundary_recovery_envelope_ref, boundary_recovery_envelope_bytes,
	boundary_recovery_retention_until, boundary_recovery_operator_pin_until, replay_policy, closed_at, close_reason,
	delivery_mode, delivery_read_only, delivery_requires_approval, delivery_requires_network,
	delivery_requires_write_access, inline_payload_bytes, artifact_count, requires_artifact_read, total_bytes,
	created_at, updated_at`

func scanBatch(row interface{ Scan(...any) error }) (*Batch, error) {
	b := &Batch{}
	err := row.Scan(&b.BatchID, &b.SourceThreadID, &b.TargetKind, &b.State, &b.Summary, &b.FirstReadyAt, &b.LastReadyAt,
		&b.MaterializedAt, &b.LastDeliveryAttemptAt, &b.NextDeliveryNotBefore, &b.EligibleAfter, &b.RedeliveryWindowEndsAt,
		&b.MaxDeliveryAttempts, &b.DeliveryAttemptCount, &b.HeadAttemptID, &b.Generation, &b.SnapshotRevision,
		&b.ContinuationBoundaryState, &b.ContinuationBoundaryCrossedAt, &b.BoundaryAttemptID, &b.BoundaryGeneration,
		&b.BoundarySnapshotRevision, &b.BoundaryRecoveryEnvelopeRef, &b.BoundaryRecoveryEnvelopeBytes,
		&b.BoundaryRecoveryRetentionUntil, &b.BoundaryRecoveryOperatorPinUntil, &b.ReplayPolicy, &b.ClosedAt, &b.CloseReason,
		&b.DeliveryMode, &b.DeliveryReadOnly, &b.DeliveryRequiresApproval, &b.DeliveryRequiresNetwork,
		&b.DeliveryRequiresWriteAccess, &b.InlinePayloadBytes, &b.ArtifactCount, &b.RequiresArtifactRead, &b.TotalBytes,
		&b.CreatedAt, &b.UpdatedAt)
	return b, err
}

// Attempt is a delivery attempt (seed "Attempt 关键字段").
type Attempt struct {
	AttemptID                    string       `json:"attempt_id"`
	SourceThreadID               string       `json:"source_thread_id"`
	BatchID                      string       `json:"batch_id"`
	Generation                   int64        `json:"generation"`
	State                        AttemptState `json:"state"`
	BridgeArmLeaseDeadline       *string      `json:"bridge_arm_lease_deadline"`
	ArmPendingSince              *string      `json:"arm_pending_since"`
	ArmPendingDeadline           *string      `json:"arm_pending_deadline"`
	DeliveryRPCRequestID         *string      `json:"delivery_rpc_request_id"`
	DeliveryRPCKind              *string      `json:"delivery_rpc_kind"`
	DeliveryRPCStartedAt         *string      `json:"delivery_rpc_started_at"`
	DeliveryRPCState             *string      `json:"delivery_rpc_state"`
	DeliveryRPCCorrelationMarker *string      `json:"delivery_rpc_correlation_marker"`
	DeliveryTurnID               *string      `json:"delivery_turn_id"`
	ManagedSessionID             *string      `json:"managed_session_id"`
	SessionEpoch                 *int64       `json:"session_epoch"`
	DeliveryAcceptedAt           *string      `json:"delivery_accepted_at"`
	DeliveryObservationState     *string      `json:"delivery_observation_state"`
	DeliveryObservationDeadline  *string      `json:"delivery_observation_deadline"`
	LastObservedTurnEvent        *string      `json:"last_observed_turn_event"`
	LastObservedTurnEventAt      *string      `json:"last_observed_turn_event_at"`
	BindingID                    *string      `json:"binding_id"`
	AutomationID                 *string      `json:"automation_id"`
	AutomationBindingState       string       `json:"automation_binding_state"`
	SnapshotPath                 *string      `json:"snapshot_path"`
	SnapshotRevision             *string      `json:"snapshot_revision"`
	DeliveryDeadline             *string      `json:"delivery_deadline"`
	CooldownUntil                *string      `json:"cooldown_until"`
	CreatedAt                    string       `json:"created_at"`
	UpdatedAt                    string       `json:"updated_at"`
}

const attemptColumns = `attempt_id, source_thread_id, batch_id, generation, state, bridge_arm_lease_deadline,
	arm_pending_since, arm_pending_deadline, delivery_rpc_request_id, delivery_rpc_kind, delivery_rpc_started_at,
	delivery_rpc_state, delivery_rpc_correlation_marker, delivery_turn_id, managed_session_id, session_epoch,
	delivery_accepted_at, delivery_observation_state, delivery_observation_deadline, last_observed_turn_event,
	last_observed_turn_event_at, binding_id, automation_id, automation_binding_state, snapshot_path, snapshot_revision,
	delivery_deadline, cooldown_until, created_at, updated_at`

func scanAttempt(row interface{ Scan(...any) error }) (Attempt, error) {
	var a Attempt
	err := row.Scan(&a.AttemptID, &a.SourceThreadID, &a.BatchID, &a.Generation, &a.State, &a.BridgeArmLeaseDeadline,
		&a.ArmPendingSince, &a.ArmPendingDeadline, &a.DeliveryRPCRequestID, &a.DeliveryRPCKind, &a.DeliveryRPCStartedAt,
		&a.DeliveryRPCState, &a.DeliveryRPCCorrelationMarker, &a.DeliveryTurnID, &a.ManagedSessionID, &a.SessionEpoch,
		&a.DeliveryAcceptedAt, &a.DeliveryObservationState, &a.DeliveryObservationDeadline, &a.LastObservedTurnEvent,
		&a.LastObservedTurnEventAt, &a.BindingID, &a.AutomationID, &a.AutomationBindingState, &a.SnapshotPath,
		&a.SnapshotRevision, &a.DeliveryDeadline, &a.CooldownUntil, &a.CreatedAt, &a.UpdatedAt)
	return a, err
}

// Querier is a *sql.DB or *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// Inspect loads a batch by id, open or closed.
func Inspect(ctx context.Context, q Querier, batchID string) (*Batch, error) {
	b, err := scanBatch(q.QueryRowContext(ctx, `SELECT `+batchColumns+` FROM batches WHERE batch_id = ?`, batchID))
	if store.IsNoRows(err) {
		return nil, abi.Errorf(abi.ENOENT, "no batch %q", batchID)
	}
	if err != nil {
		return nil, err
	}
	return b, fill(ctx, q, b)
}

// InspectHead loads the thread's head (oldest open) batch; nil if none.
func InspectHead(ctx context.Context, q Querier, thread string) (*Batch, error) {
	b, err := scanBatch(q.QueryRowContext(ctx, `SELECT `+batchColumns+` FROM batches WHERE source_thread_id = ?
		AND state != 'closed' ORDER BY seq LIMIT 1`, thread))
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return b, fill(ctx, q, b)
}

func fill(ctx context.Context, q Querier, b *Batch) error {
	rows, err := q.QueryContext(ctx, `SELECT bj.job_id, j.artifact_id FROM batch_jobs bj JOIN jobs j ON j.job_id = bj.job_id
		WHERE bj.batch_id = ? ORDER BY bj.position`, b.BatchID)
	if err != nil {
		return err
	}
	b.JobIDs, b.ArtifactIDs, b.Attempts = []string{}, []string{}, []Attempt{}
	for rows.Next() {
		var job string
		var art sql.NullString
		if err := rows.Scan(&job, &art); err != nil {
			rows.Close()
			return err
		}
		b.JobIDs = append(b.JobIDs, job)
		if art.Valid {
			b.ArtifactIDs = append(b.ArtifactIDs, art.String)
		}
	}
	rows.Close()
	rows, err = q.QueryContext(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE batch_id = ? ORDER BY generation`, b.BatchID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return err
		}
		b.Attempts = append(b.Attempts, a)
		if b.HeadAttemptID != nil && a.AttemptID == *b.HeadAttemptID {
			h := a
			b.HeadAttempt = &h
		}
	}
	return rows.Err()
}

// GetAttempt loads one attempt.
func GetAttempt(ctx context.Context, q Querier, id string) (Attempt, error) {
	a, err := scanAttempt(q.QueryRowContext(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE attempt_id = ?`, id))
	if store.IsNoRows(err) {
		return a, abi.Errorf(abi.ENOENT, "no attempt %q", id)
	}
	return a, err
}
