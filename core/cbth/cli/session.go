// Package cli is cbth's CLI adapter: daemon-owned Codex app-servers, one
// per managed session, the capability probe, the session permission
// profile, turn/start delivery of the head batch and the observation of
// the accepted turn, on top of the shared delivery core.
package cli

import (
	"context"
	"database/sql"
	"maps"
	"slices"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// SessionState is a managed session's session_state.
type SessionState string

const (
	StateLive     SessionState = "live"
	StateDetached SessionState = "detached"
	StateParked   SessionState = "parked"
	StateStale    SessionState = "stale"
	StateRetired  SessionState = "retired"
)

// Refusal reasons of attach (seed vocabulary).
const (
	ReasonProfileMismatch         = "session_profile_mismatch"
	ReasonPendingManualResolution = "session_pending_manual_resolution"
)

// SessionPrefix prefixes managed_session_id.
const SessionPrefix = "ms_"

// Session is a managed session record (seed "Managed session 关键字段"
// plus the adapter's supervision fields).
type Session struct {
	ManagedSessionID              string       `json:"managed_session_id"`
	BoundThreadID                 *string      `json:"bound_thread_id"`
	SessionEpoch                  int64        `json:"session_epoch"`
	SessionState                  SessionState `json:"session_state"`
	SessionAllowsApproval         *bool        `json:"session_allows_approval"`
	SessionAllowsNetwork          *bool        `json:"session_allows_network"`
	SessionAllowsWriteAccess      *bool        `json:"session_allows_write_access"`
	StartupSessionAllowsApproval  *bool        `json:"startup_session_allows_approval"`
	StartupSessionAllowsNetwork   *bool        `json:"startup_session_allows_network"`
	StartupSessionAllowsWrite     *bool        `json:"startup_session_allows_write_access"`
	StartupPermissionSnapshotJSON *string      `json:"startup_permission_snapshot_json"`
	LastPermissionSnapshotJSON    *string      `json:"last_permission_snapshot_json"`
	PermissionSnapshotRevision    int64        `json:"permission_snapshot_revision"`
	RequestedAllowsApproval       string       `json:"requested_allows_approval"`
	RequestedAllowsNetwork        string       `json:"requested_allows_network"`
	RequestedAllowsWriteAccess    string       `json:"requested_allows_write_access"`
	AutoDeliveryPolicy            string       `json:"auto_delivery_policy"`
	EnableTurnSteer               bool         `json:"enable_turn_steer"`
	CodexBin                      *string      `json:"codex_bin"`
	Cwd                           *string      `json:"cwd"`
	AppServerPID                  *int64       `json:"app_server_pid"`
	AppServerURL                  *string      `json:"app_server_url"`
	AppServerStartedAt            *string      `json:"app_server_started_at"`
	CapabilityState               string       `json:"capability_state"`
	CapabilityReason              *string      `json:"capability_reason"`
	CapabilityJSON                *string      `json:"capability_json"`
	CapabilityProbedAt            *string      `json:"capability_probed_at"`
	LeaseID                       *string      `json:"lease_id"`
	LeasePID                      *int64       `json:"lease_pid"`
	LeaseDeadline                 *string      `json:"lease_deadline"`
	DeliveryBlockedReason         *string      `json:"delivery_blocked_reason"`
	LastThreadStatus              *string      `json:"last_thread_status"`
	CreatedAt                     string       `json:"created_at"`
	UpdatedAt                     string       `json:"updated_at"`
}

const sessionColumns = `managed_session_id, bound_thread_id, session_epoch, session_state, session_allows_approval,
	session_allows_network, session_allows_write_access, startup_session_allows_approval,
	startup_session_allows_network, startup_session_allows_write_access, startup_permission_snapshot_json,
	last_permission_snapshot_json, permission_snapshot_revision, requested_allows_approval, requested_allows_network,
	requested_allows_write_access, auto_delivery_policy, enable_turn_steer, codex_bin, cwd, app_server_pid,
	app_server_url, app_server_started_at, capability_state, capability_reason, capability_json,
	capability_probed_at, lease_id, lease_pid, lease_deadline, delivery_blocked_reason, last_thread_status,
	created_at, updated_at`

func scanSession(row interface{ Scan(...any) error }) (*Session, error) {
	s := &Session{}
	err := row.Scan(&s.ManagedSessionID, &s.BoundThreadID, &s.SessionEpoch, &s.SessionState, &s.SessionAllowsApproval,
		&s.SessionAllowsNetwork, &s.SessionAllowsWriteAccess, &s.StartupSessionAllowsApproval,
		&s.StartupSessionAllowsNetwork, &s.StartupSessionAllowsWrite, &s.StartupPermissionSnapshotJSON,
		&s.LastPermissionSnapshotJSON, &s.PermissionSnapshotRevision, &s.RequestedAllowsApproval,
		&s.RequestedAllowsNetwork, &s.RequestedAllowsWriteAccess, &s.AutoDeliveryPolicy, &s.EnableTurnSteer,
		&s.CodexBin, &s.Cwd, &s.AppServerPID, &s.AppServerURL, &s.AppServerStartedAt, &s.CapabilityState,
		&s.CapabilityReason, &s.CapabilityJSON, &s.CapabilityProbedAt, &s.LeaseID, &s.LeasePID, &s.LeaseDeadline,
		&s.DeliveryBlockedReason, &s.LastThreadStatus, &s.CreatedAt, &s.UpdatedAt)
	return s, err
}

// GetSession loads one session.
func GetSession(ctx context.Context, q delivery.Querier, id string) (*Session, error) {
	s, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM managed_sessions
		WHERE managed_session_id = ?`, id))
	if store.IsNoRows(err) {
		return nil, abi.Errorf(abi.ENOENT, "no managed session %q", id)
	}
	return s, err
}

// SessionForThread loads the non-retired session bound to thread, or nil.
func SessionForThread(ctx context.Context, q delivery.Querier, thread string) (*Session, error) {
	s, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM managed_sessions
		WHERE bound_thread_id = ? AND session_state != 'retired'`, thread))
	if store.IsNoRows(err) {
		return nil, nil
	}
	return s, err
}

// ListSessions returns every session, newest first.
func ListSessions(ctx context.Context, q delivery.Querier) ([]*Session, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+sessionColumns+` FROM managed_sessions ORDER BY created_at DESC`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Session{}
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// setSession updates columns of one session with an audit row, in o's tx.
// Column names are constants of this package.
func setSession(o *delivery.Op, id, action, reason string, cols map[string]any) error {
	q := `UPDATE managed_sessions SET updated_at = ?`
	args := []any{o.At()}
	for _, c := range slices.Sorted(maps.Keys(cols)) {
		q += ", " + c + " = ?"
		args = append(args, cols[c])
	}
	q += ` WHERE managed_session_id = ?`
	if _, err := o.Tx.ExecContext(o.Ctx, q, append(args, id)...); err != nil {
		return err
	}
	if action == "" {
		return nil
	}
	return o.Audit(audit.Entry{Action: action, EntityKind: "managed_session", EntityID: id, Reason: reason,
		Outcome: "ok", Detail: cols})
}

// transition moves a session between states (CAS on the current state).
func transition(o *delivery.Op, id string, from, to SessionState, reason string, cols map[string]any) (bool, error) {
	res, err := o.Tx.ExecContext(o.Ctx, `UPDATE managed_sessions SET session_state = ?, updated_at = ?
		WHERE managed_session_id = ? AND session_state = ?`, to, o.At(), id, from)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return false, nil
	}
	var thread sql.NullString
	_ = o.Tx.QueryRowContext(o.Ctx, `SELECT bound_thread_id FROM managed_sessions WHERE managed_session_id = ?`, id).Scan(&thread)
	if err := o.Audit(audit.Entry{Action: "cli.session.transition", EntityKind: "managed_session", EntityID: id,
		SourceThreadID: thread.String, From: string(from), To: string(to), Reason: reason, Outcome: "ok"}); err != nil {
		return false, err
	}
	if len(cols) > 0 {
		return true, setSession(o, id, "", "", cols)
	}
	return true, nil
}

// unresolvedWork reports the bound thread's delivery work that keeps a
// session from being retired or reused with another profile: an open
// manual batch, or a non-terminal attempt.
func unresolvedWork(ctx context.Context, q delivery.Querier, thread string) (manual, active bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT
		EXISTS(SELECT 1 FROM batches WHERE source_thread_id = ? AND state != 'closed' AND replay_policy = 'manual_resolution_only'),
		EXISTS(SELECT 1 FROM attempts WHERE source_thread_id = ? AND state IN ('accept_pending','cooldown'))`,
		thread, thread).Scan(&manual, &active)
	return
}
