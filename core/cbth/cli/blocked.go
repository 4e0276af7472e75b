package cli

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// StrictSafeSessionFlags are the cbth new/resume flags that give a session
// the profile strict-safe automatic delivery needs.
const StrictSafeSessionFlags = "--session-allows-approval false --session-allows-network false --session-allows-write-access false"

// ReadOnlyJobFlags are the job submit / task run flags of a read-only job.
const ReadOnlyJobFlags = "--delivery-read-only true --delivery-requires-approval false --delivery-requires-network false " +
	"--delivery-requires-write-access false"

func init() {
	daemon.RegisterBlockedHook(func(ctx context.Context, d *daemon.Daemon, b *delivery.Batch) (string, error) {
		return BlockedReason(ctx, d.Store.DB, b)
	})
}

// BlockedReason says why an open CLI batch is not delivered automatically,
// in words a user can act on (the flags or command that unblock it), or
// "" when nothing blocks it: it is delivered once its thread is idle under
// a live or detached managed session.
func BlockedReason(ctx context.Context, q delivery.Querier, b *delivery.Batch) (string, error) {
	if b == nil || b.State == delivery.BatchClosed {
		return "", nil
	}
	if b.ReplayPolicy == delivery.ReplayManualResolutionOnly {
		var why sql.NullString
		err := q.QueryRowContext(ctx, `SELECT reason FROM audit WHERE entity_id = ? AND action = 'batch.replay_policy'
			ORDER BY audit_id DESC LIMIT 1`, b.BatchID).Scan(&why)
		if err != nil && err != sql.ErrNoRows {
			return "", err
		}
		if !why.Valid || why.String == "" {
			why.String = "automatic delivery could not be proven safe"
		}
		return fmt.Sprintf("manual_resolution_only: %s; the operator closes it with cbth batch close-head "+
			"--source-thread-id %s --reason operator_confirmed_delivery|operator_closed_unconfirmed", why.String, b.SourceThreadID), nil
	}
	if b.TargetKind != delivery.TargetCLI {
		return "", nil
	}
	s, err := SessionForThread(ctx, q, b.SourceThreadID)
	if err != nil || s == nil {
		return fmt.Sprintf("no cbth CLI session is bound to thread %s: results are delivered while codex runs under "+
			"cbth for it (cbth resume %s %s)", b.SourceThreadID, b.SourceThreadID, StrictSafeSessionFlags), err
	}
	if s.SessionState == StateParked || s.SessionState == StateStale {
		return fmt.Sprintf("managed session %s is %s: cbth resume %s", s.ManagedSessionID, s.SessionState, b.SourceThreadID), nil
	}
	if s.CapabilityState == "missing" && s.CapabilityReason != nil {
		return "codex lacks what delivery needs: " + *s.CapabilityReason + " (cbth doctor cli)", nil
	}
	if s.DeliveryBlockedReason != nil {
		return *s.DeliveryBlockedReason, nil
	}
	return policyGate(s, sessionProfile(s), b), nil
}

// sessionProfile is what the session's durable record says it allows: an
// explicit false is false, a pinned value is itself, anything unknown
// counts as allowed (fail closed).
func sessionProfile(s *Session) Profile {
	allowed := func(pinned *bool, requested string) bool {
		return requested != "false" && (pinned == nil || *pinned)
	}
	return Profile{Approval: allowed(s.SessionAllowsApproval, s.RequestedAllowsApproval),
		Network: allowed(s.SessionAllowsNetwork, s.RequestedAllowsNetwork),
		Write:   allowed(s.SessionAllowsWriteAccess, s.RequestedAllowsWriteAccess)}
}

// BlockedBatch is one open CLI batch and why it waits (cbth doctor cli).
type BlockedBatch struct {
	SourceThreadID string `json:"source_thread_id"`
	BatchID        string `json:"batch_id"`
	Reason         string `json:"delivery_blocked_reason"`
}

// blockedBatches lists every open batch whose delivery is blocked.
func blockedBatches(ctx context.Context, q delivery.Querier) ([]BlockedBatch, error) {
	rows, err := q.QueryContext(ctx, `SELECT batch_id FROM batches WHERE state != 'closed' ORDER BY created_at`)
	if err != nil {
		return nil, err
	}
	var idsList []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		idsList = append(idsList, id)
	}
	rows.Close()
	out := []BlockedBatch{}
	for _, id := range idsList {
		b, err := delivery.Inspect(ctx, q, id)
		if err != nil {
			return nil, err
		}
		why, err := BlockedReason(ctx, q, b)
		if err != nil {
			return nil, err
		}
		if why != "" {
			out = append(out, BlockedBatch{SourceThreadID: b.SourceThreadID, BatchID: b.BatchID, Reason: why})
		}
	}
	return out, nil
}
