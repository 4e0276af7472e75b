// Package audit writes and lists cbth's audit rows: who (uid/pid) moved
// what from which state to which, why, and with what outcome. Rows are
// written inside the transaction of the change they record.
package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Actor is who caused a change: a peer process (uid/pid from SO_PEERCRED)
// or the daemon itself (Name "daemon", "sweep", "task").
type Actor struct {
	Name string `json:"actor"`
	UID  int64  `json:"actor_uid"`
	PID  int64  `json:"actor_pid"`
}

// Entry is one audit row.
type Entry struct {
	ID             int64          `json:"audit_id"`
	At             string         `json:"at"`
	Actor          string         `json:"actor"`
	ActorUID       *int64         `json:"actor_uid"`
	ActorPID       *int64         `json:"actor_pid"`
	Action         string         `json:"action"`
	EntityKind     string         `json:"entity_kind,omitempty"`
	EntityID       string         `json:"entity_id,omitempty"`
	SourceThreadID string         `json:"source_thread_id,omitempty"`
	From           string         `json:"from_state,omitempty"`
	To             string         `json:"to_state,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	Outcome        string         `json:"outcome,omitempty"`
	Detail         map[string]any `json:"detail,omitempty"`
}

// Execer is a *sql.Tx or *sql.DB.
type Execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// Write inserts e stamped with the actor and at.
func Write(ctx context.Context, x Execer, at string, a Actor, e Entry) error {
	var detail any
	if len(e.Detail) > 0 {
		b, err := json.Marshal(e.Detail)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		detail = string(b)
	}
	name := a.Name
	if name == "" {
		name = "client"
	}
	uid, pid := a.UID, a.PID
	_, err := x.ExecContext(ctx, `INSERT INTO audit(at, actor, actor_uid, actor_pid, action, entity_kind, entity_id,
		source_thread_id, from_state, to_state, reason, outcome, detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		at, name, uid, pid, e.Action, nz(e.EntityKind), nz(e.EntityID), nz(e.SourceThreadID),
		nz(e.From), nz(e.To), nz(e.Reason), nz(e.Outcome), detail)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

func nz(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Filter selects audit rows; zero values select everything.
type Filter struct {
	SourceThreadID string `json:"source_thread_id,omitempty"`
	EntityID       string `json:"entity_id,omitempty"`
	Action         string `json:"action,omitempty"`
	Limit          int    `json:"limit,omitempty"`
}

// MaxLimit bounds --limit of list commands; a larger reply may still be
// refused as EMSGSIZE by the protocol, with a hint.
const MaxLimit = 1_000_000

// CheckLimit validates a --limit: never a silent cap.
func CheckLimit(n int) (int, error) {
	if n < 1 || n > MaxLimit {
		return 0, abi.Errorf(abi.EINVAL, "--limit must be between 1 and %d, not %d", MaxLimit, n)
	}
	return n, nil
}

// List returns the newest rows matching f, oldest first.
func List(ctx context.Context, s *store.Store, f Filter) ([]Entry, error) {
	var err error
	if f.Limit, err = CheckLimit(f.Limit); err != nil {
		return nil, err
	}
	q := `SELECT audit_id, at, actor, actor_uid, actor_pid, action, COALESCE(entity_kind,''), COALESCE(entity_id,''),
		COALESCE(source_thread_id,''), COALESCE(from_state,''), COALESCE(to_state,''), COALESCE(reason,''),
		COALESCE(outcome,''), COALESCE(detail,'') FROM audit WHERE 1=1`
	var args []any
	if f.SourceThreadID != "" {
		q += ` AND source_thread_id = ?`
		args = append(args, f.SourceThreadID)
	}
	if f.EntityID != "" {
		q += ` AND entity_id = ?`
		args = append(args, f.EntityID)
	}
	if f.Action != "" {
		q += ` AND action = ?`
		args = append(args, f.Action)
	}
	q += ` ORDER BY audit_id DESC LIMIT ?`
	args = append(args, f.Limit)
	rows, err := s.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		var uid, pid sql.NullInt64
		var detail string
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &uid, &pid, &e.Action, &e.EntityKind, &e.EntityID,
			&e.SourceThreadID, &e.From, &e.To, &e.Reason, &e.Outcome, &detail); err != nil {
			return nil, err
		}
		if uid.Valid {
			e.ActorUID, e.ActorPID = &uid.Int64, &pid.Int64
		}
		if detail != "" {
			_ = json.Unmarshal([]byte(detail), &e.Detail)
		}
		out = append(out, e)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, rows.Err()
}
