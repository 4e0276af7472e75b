// Package delivery is the shared delivery core: per-thread FIFO of ready
// jobs, delivery batches, delivery attempts and their state machine, the
// minimum delivery interval and the durable fair-ready order. Every state
// change is a compare-and-swap in one transaction with its audit row.
package delivery

// AttemptState is a delivery attempt's durable state (seed "Attempt 状态").
type AttemptState string

const (
	AttemptPrepared      AttemptState = "prepared"
	AttemptAcceptPending AttemptState = "accept_pending"
	AttemptArmPending    AttemptState = "arm_pending"
	AttemptCooldown      AttemptState = "cooldown"
	AttemptClosed        AttemptState = "closed"
	AttemptSuperseded    AttemptState = "superseded"
	AttemptAbandoned     AttemptState = "abandoned"
)

// AttemptStates is the full set, in the seed's order.
var AttemptStates = []AttemptState{AttemptPrepared, AttemptAcceptPending, AttemptArmPending,
	AttemptCooldown, AttemptClosed, AttemptSuperseded, AttemptAbandoned}

// Terminal reports whether no transition leaves s.
func (s AttemptState) Terminal() bool {
	return s == AttemptClosed || s == AttemptSuperseded || s == AttemptAbandoned
}

// attemptTransitions is the seed's "Attempt 迁移" table, the only place
// attempt transitions are defined. casAttempt refuses any other pair.
var attemptTransitions = map[AttemptState][]AttemptState{
	AttemptPrepared:      {AttemptArmPending, AttemptAcceptPending, AttemptAbandoned, AttemptSuperseded},
	AttemptArmPending:    {AttemptCooldown, AttemptAbandoned, AttemptSuperseded},
	AttemptAcceptPending: {AttemptCooldown, AttemptPrepared, AttemptAbandoned, AttemptSuperseded},
	AttemptCooldown:      {AttemptClosed, AttemptAbandoned, AttemptSuperseded},
}

// AttemptAllowed reports whether from -> to is in the transition table.
func AttemptAllowed(from, to AttemptState) bool {
	for _, t := range attemptTransitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// BatchState is a delivery batch's durable state.
type BatchState string

const (
	BatchQueued       BatchState = "queued"
	BatchMaterialized BatchState = "materialized"
	BatchCooldown     BatchState = "cooldown"
	BatchClosed       BatchState = "closed"
)

// BatchStates is the full set.
var BatchStates = []BatchState{BatchQueued, BatchMaterialized, BatchCooldown, BatchClosed}

// batchTransitions: a queued batch is materialized when it becomes a due
// head; an accepted attempt moves it to cooldown; a fresh attempt after
// cooldown re-materializes it; any open batch may close.
var batchTransitions = map[BatchState][]BatchState{
	BatchQueued:       {BatchMaterialized, BatchClosed},
	BatchMaterialized: {BatchCooldown, BatchClosed},
	BatchCooldown:     {BatchMaterialized, BatchClosed},
}

// BatchAllowed reports whether from -> to is a legal batch transition.
func BatchAllowed(from, to BatchState) bool {
	for _, t := range batchTransitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// CloseReason is the seed's canonical close_reason.
type CloseReason string

const (
	CloseDelivered                 CloseReason = "delivered"
	CloseSuperseded                CloseReason = "superseded"
	CloseOperatorConfirmedDelivery CloseReason = "operator_confirmed_delivery"
	CloseOperatorClosedUnconfirmed CloseReason = "operator_closed_unconfirmed"
	CloseCancelled                 CloseReason = "cancelled"
	CloseRedeliveryWindowExhausted CloseReason = "redelivery_window_exhausted"
	CloseManualResolutionExpired   CloseReason = "manual_resolution_expired"
	CloseMaxAttemptsExhausted      CloseReason = "max_attempts_exhausted"
	CloseHandoffRecorded           CloseReason = "handoff_recorded"
)

// CloseReasons is all nine.
var CloseReasons = []CloseReason{CloseDelivered, CloseSuperseded, CloseOperatorConfirmedDelivery,
	CloseOperatorClosedUnconfirmed, CloseCancelled, CloseRedeliveryWindowExhausted,
	CloseManualResolutionExpired, CloseMaxAttemptsExhausted, CloseHandoffRecorded}

// Valid reports whether r is canonical.
func (r CloseReason) Valid() bool {
	for _, c := range CloseReasons {
		if c == r {
			return true
		}
	}
	return false
}

// ReplayPolicy is the durable batch-level replay contract.
type ReplayPolicy string

const (
	ReplayAutomatic            ReplayPolicy = "automatic"
	ReplayManualResolutionOnly ReplayPolicy = "manual_resolution_only"
)

// Outcome is how a CAS helper ended, spelled exactly as the seed writes it
// (a success, the note-boundary-crossed non-success list, note-arm-pending's
// already-pending / lease-held, note-arm's already-armed). Non-success is
// reported, never a silent change: the store is untouched unless Outcome is
// OutcomeOK.
type Outcome string

const (
	OutcomeOK                  Outcome = "success"
	OutcomeStaleOrSuperseded   Outcome = "stale_or_superseded"
	OutcomeTransientNotReady   Outcome = "transient_not_ready"
	OutcomeAlreadyCrossed      Outcome = "already_crossed_or_handoff_recorded"
	OutcomeBindingInvalid      Outcome = "binding_or_capability_invalid"
	OutcomeUnknownAfterFailure Outcome = "unknown_after_helper_failure"
	OutcomeAlreadyPending      Outcome = "already-pending"
	OutcomeLeaseHeld           Outcome = "lease-held"
	OutcomeAlreadyArmed        Outcome = "already-armed"
	// OutcomeManualResolutionOnly refuses an automatic step on a batch whose
	// replay_policy is manual_resolution_only (the seed's name for it).
	OutcomeManualResolutionOnly Outcome = "manual_resolution_only"
)

// Outcomes is every outcome a helper can report.
var Outcomes = []Outcome{OutcomeOK, OutcomeStaleOrSuperseded, OutcomeTransientNotReady, OutcomeAlreadyCrossed,
	OutcomeBindingInvalid, OutcomeUnknownAfterFailure, OutcomeAlreadyPending, OutcomeLeaseHeld, OutcomeAlreadyArmed,
	OutcomeManualResolutionOnly}

// TargetKind is a job's delivery target; it is also the ready_cursor scope.
type TargetKind string

const (
	TargetCLI     TargetKind = "cli"
	TargetDesktop TargetKind = "desktop"
)

// Valid reports whether k is cli or desktop.
func (k TargetKind) Valid() bool { return k == TargetCLI || k == TargetDesktop }

// DeliveryMode is how an accepted attempt reached the caller.
type DeliveryMode string

const (
	ModeDesktopHeartbeat DeliveryMode = "desktop_heartbeat"
	ModeCLITurnStart     DeliveryMode = "cli_turn_start"
	ModeCLITurnSteer     DeliveryMode = "cli_turn_steer"
)
