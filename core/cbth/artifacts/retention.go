package artifacts

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// openRefs counts non-terminal batches whose jobs carry the artifact.
const openRefs = `SELECT COUNT(*) FROM batch_jobs bj JOIN batches b ON b.batch_id = bj.batch_id
	JOIN jobs j ON j.job_id = bj.job_id WHERE j.artifact_id = ? AND b.state != 'closed'`

// Recompute sets gc_eligible_at and retention_until from the seed's rule:
// NULL while any non-terminal batch refers to the artifact, else the max of
// created_at + min_artifact_ttl, last_batch_closed_at + post_close_ttl and
// operator_pin_until.
func Recompute(ctx context.Context, tx *sql.Tx, id string, cfg config.Config) error {
	a, err := Get(ctx, tx, id)
	if err != nil {
		return err
	}
	var refs int
	if err := tx.QueryRowContext(ctx, openRefs, id).Scan(&refs); err != nil {
		return err
	}
	var eligible any
	if refs == 0 {
		t, _ := store.ParseTS(a.MinRetentionUntil)
		if a.LastBatchClosedAt != nil {
			c, _ := store.ParseTS(*a.LastBatchClosedAt)
			t = later(t, c.Add(cfg.PostCloseTTL))
		}
		if a.OperatorPinUntil != nil {
			p, _ := store.ParseTS(*a.OperatorPinUntil)
			t = later(t, p)
		}
		eligible = store.TS(t)
	}
	_, err = tx.ExecContext(ctx, `UPDATE artifacts SET gc_eligible_at = ?, retention_until = ? WHERE artifact_id = ?`,
		eligible, eligible, id)
	return err
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// OnBatchClosed records last_batch_closed_at for every artifact of a batch
// that no other open batch still refers to, then recomputes retention.
func OnBatchClosed(ctx context.Context, tx *sql.Tx, batchID, at string, cfg config.Config) error {
	ids, err := idsOfBatch(ctx, tx, batchID)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE artifacts SET last_batch_closed_at = ? WHERE artifact_id = ?
			AND (`+openRefs+`) = 0`, at, id, id); err != nil {
			return err
		}
		if err := Recompute(ctx, tx, id, cfg); err != nil {
			return err
		}
	}
	return nil
}

func idsOfBatch(ctx context.Context, tx *sql.Tx, batchID string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT j.artifact_id FROM batch_jobs bj JOIN jobs j ON j.job_id = bj.job_id
		WHERE bj.batch_id = ? AND j.artifact_id IS NOT NULL ORDER BY bj.position`, batchID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Pin sets operator_pin_until (the zero time clears it) and recomputes.
func Pin(ctx context.Context, tx *sql.Tx, id string, until time.Time, cfg config.Config) error {
	res, err := tx.ExecContext(ctx, `UPDATE artifacts SET operator_pin_until = ? WHERE artifact_id = ? AND gc_at IS NULL`,
		store.NullTS(until), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return abi.Errorf(abi.ENOENT, "no live artifact %q", id)
	}
	return Recompute(ctx, tx, id, cfg)
}

// Due lists artifacts whose gc_eligible_at has passed and that no open
// batch refers to (checked again, so a stale gc_eligible_at cannot win).
func Due(ctx context.Context, tx Querier, at string) ([]Artifact, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+columns+` FROM artifacts a WHERE gc_at IS NULL
		AND gc_eligible_at IS NOT NULL AND gc_eligible_at <= ? AND NOT EXISTS (
		SELECT 1 FROM batch_jobs bj JOIN batches b ON b.batch_id = bj.batch_id JOIN jobs j ON j.job_id = bj.job_id
		WHERE j.artifact_id = a.artifact_id AND b.state != 'closed') ORDER BY artifact_id`, at)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		a, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// MarkCollected records gc_at and removes the artifact's directory.
func MarkCollected(ctx context.Context, tx *sql.Tx, a Artifact, at string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE artifacts SET gc_at = ? WHERE artifact_id = ? AND gc_at IS NULL`,
		at, a.ArtifactID); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Dir(a.ManagedPath))
}

// Orphans lists artifact directories under root with no store row that are
// older than grace: copies staged by a daemon that died before recording.
func Orphans(ctx context.Context, q Querier, root string, now time.Time, grace time.Duration) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM artifacts WHERE artifact_id = ?`, e.Name()).Scan(&n); err != nil {
			return nil, err
		}
		fi, err := e.Info()
		if n == 0 && err == nil && now.Sub(fi.ModTime()) > grace {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out, nil
}

// PinRequest is `cbth artifact pin`: operator_pin_until set to Until (RFC
// 3339), or cleared.
type PinRequest struct {
	ArtifactID string `json:"artifact_id"`
	Until      string `json:"until,omitempty"`
	Clear      bool   `json:"clear,omitempty"`
}

// Validate checks the request against now: a pin lies in the future.
func (r PinRequest) Validate(now time.Time) (time.Time, error) {
	if r.ArtifactID == "" {
		return time.Time{}, abi.Errorf(abi.EINVAL, "--artifact-id is required")
	}
	if r.Clear == (r.Until != "") {
		return time.Time{}, abi.Errorf(abi.EINVAL, "give exactly one of --until TIME, --for DURATION or --clear")
	}
	if r.Clear {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, r.Until)
	if err != nil {
		return time.Time{}, abi.Errorf(abi.EINVAL, "--until %q is not an RFC 3339 time", r.Until)
	}
	if !t.After(now) {
		return time.Time{}, abi.Errorf(abi.EINVAL, "--until %s is not in the future", r.Until)
	}
	return t.UTC(), nil
}
