// Package sweep is the deterministic overdue sweep the daemon runs on every
// start before serving any request, and periodically while it runs:
// expired deadlines, redelivery windows (auto-close), cooldown ends,
// queued heads, artifact GC and reconcile of state a dead daemon left.
package sweep

import (
	"context"
	"os"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Report counts what one sweep did.
type Report struct {
	At                    string         `json:"at"`
	Startup               bool           `json:"startup"`
	AcceptPendingAbandons int            `json:"accept_pending_abandoned"`
	ObservationsLost      int            `json:"observations_lost"`
	ObservationsExpired   int            `json:"observations_expired"`
	ArmPendingExpired     int            `json:"arm_pending_expired"`
	Closed                map[string]int `json:"closed"`
	Revived               int            `json:"revived"`
	Materialized          int            `json:"materialized"`
	ArtifactsCollected    int            `json:"artifacts_collected"`
	OrphansRemoved        int            `json:"orphans_removed"`
}

// Sweeper runs sweeps against one store.
type Sweeper struct {
	Store        *store.Store
	Cfg          config.Config
	ArtifactsDir string
	Actor        audit.Actor
}

func (sw *Sweeper) attempts(ctx context.Context, where string, args ...any) ([]delivery.Token, error) {
	rows, err := sw.Store.DB.QueryContext(ctx, `SELECT a.source_thread_id, a.batch_id, a.attempt_id, a.generation
		FROM attempts a WHERE `+where+` ORDER BY a.attempt_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []delivery.Token
	for rows.Next() {
		var t delivery.Token
		if err := rows.Scan(&t.SourceThreadID, &t.BatchID, &t.AttemptID, &t.Generation); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (sw *Sweeper) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := sw.Store.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// abandonAll abandons each attempt (manual_resolution_only) in its own
// transaction, optionally setting the observation state or degrading the
// Desktop binding, and counts the ones that changed.
func (sw *Sweeper) abandonAll(ctx context.Context, toks []delivery.Token, reason, observation string, degrade bool) (int, error) {
	n := 0
	for _, tok := range toks {
		err := delivery.Run(ctx, sw.Store, sw.Cfg, sw.Actor, func(o *delivery.Op) error {
			r, err := delivery.Abandon(o, tok, true, reason)
			if err != nil || r.Outcome != delivery.OutcomeOK {
				return err
			}
			n++
			if observation != "" {
				if _, err := o.Tx.ExecContext(ctx, `UPDATE attempts SET delivery_observation_state = ? WHERE attempt_id = ?`,
					observation, tok.AttemptID); err != nil {
					return err
				}
			}
			if degrade {
				_, err = o.Tx.ExecContext(ctx, `UPDATE desktop_bindings SET binding_state = 'degraded', updated_at = ?
					WHERE source_thread_id = ? AND binding_state = 'bound'`, o.At(), tok.SourceThreadID)
			}
			return err
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ArmPendingResolver forces an attempt whose arm_pending_deadline passed
// into the seed's outcomes (cooldown, abandoned + automatic, or abandoned +
// manual_resolution_only + binding degraded), in o's transaction; it
// reports whether it changed anything. The Desktop adapter registers one.
type ArmPendingResolver func(o *delivery.Op, tok delivery.Token) (bool, error)

var armPendingResolver ArmPendingResolver

// SetArmPendingResolver installs the Desktop adapter's resolver.
func SetArmPendingResolver(fn ArmPendingResolver) { armPendingResolver = fn }

// expireArmPending resolves each expired arm_pending attempt in its own
// transaction. Without a resolver it fails closed: abandoned, manual, and
// the thread's binding degraded.
func (sw *Sweeper) expireArmPending(ctx context.Context, toks []delivery.Token) (int, error) {
	if armPendingResolver == nil {
		return sw.abandonAll(ctx, toks, "arm_pending_deadline passed unreconciled", "", true)
	}
	n := 0
	for _, tok := range toks {
		err := delivery.Run(ctx, sw.Store, sw.Cfg, sw.Actor, func(o *delivery.Op) error {
			changed, err := armPendingResolver(o, tok)
			if changed {
				n++
			}
			return err
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Run performs one sweep. startup=true adds the reconcile that only a fresh
// daemon may do: no accept_pending RPC or tracked turn stream survives a
// daemon restart, so their continuity cannot be proven and they fail closed.
func (sw *Sweeper) Run(ctx context.Context, startup bool) (Report, error) {
	now := sw.Store.Now().UTC()
	at := store.TS(now)
	r := Report{At: at, Startup: startup, Closed: map[string]int{}}
	var err error
	if startup {
		toks, err := sw.attempts(ctx, `a.state = 'accept_pending'`)
		if err != nil {
			return r, err
		}
		if r.AcceptPendingAbandons, err = sw.abandonAll(ctx, toks, "daemon restart: RPC acceptance unknown", "", false); err != nil {
			return r, err
		}
		toks, err = sw.attempts(ctx, `a.state = 'cooldown' AND a.delivery_observation_state = 'tracking'`)
		if err != nil {
			return r, err
		}
		if r.ObservationsLost, err = sw.abandonAll(ctx, toks, "daemon restart: turn event stream continuity lost", "lost", false); err != nil {
			return r, err
		}
	}
	toks, err := sw.attempts(ctx, `a.state = 'cooldown' AND a.delivery_observation_state = 'tracking'
		AND a.delivery_observation_deadline <= ?`, at)
	if err != nil {
		return r, err
	}
	if r.ObservationsExpired, err = sw.abandonAll(ctx, toks, "delivery_observation_deadline passed", "expired", false); err != nil {
		return r, err
	}
	toks, err = sw.attempts(ctx, `a.state = 'arm_pending' AND a.arm_pending_deadline <= ?`, at)
	if err != nil {
		return r, err
	}
	if r.ArmPendingExpired, err = sw.expireArmPending(ctx, toks); err != nil {
		return r, err
	}
	if err := sw.closeExpired(ctx, at, &r); err != nil {
		return r, err
	}
	if err := sw.reviveAndMaterialize(ctx, &r); err != nil {
		return r, err
	}
	return r, sw.collect(ctx, now, &r)
}

// closeExpired closes every open batch whose redelivery_window_ends_at has
// passed: automatic ones as redelivery_window_exhausted, manual ones as
// manual_resolution_expired.
func (sw *Sweeper) closeExpired(ctx context.Context, at string, r *Report) error {
	ids, err := sw.strings(ctx, `SELECT batch_id FROM batches WHERE state != 'closed'
		AND redelivery_window_ends_at <= ? ORDER BY source_thread_id, seq`, at)
	if err != nil {
		return err
	}
	for _, id := range ids {
		err := delivery.Run(ctx, sw.Store, sw.Cfg, sw.Actor, func(o *delivery.Op) error {
			var replay string
			if err := o.Tx.QueryRowContext(ctx, `SELECT replay_policy FROM batches WHERE batch_id = ?`, id).Scan(&replay); err != nil {
				return err
			}
			reason := delivery.CloseRedeliveryWindowExhausted
			if delivery.ReplayPolicy(replay) == delivery.ReplayManualResolutionOnly {
				reason = delivery.CloseManualResolutionExpired
			}
			out, err := delivery.CloseBatch(o, id, reason, "redelivery_window_ends_at passed")
			if out == delivery.OutcomeOK {
				r.Closed[string(reason)]++
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (sw *Sweeper) reviveAndMaterialize(ctx context.Context, r *Report) error {
	ids, err := sw.strings(ctx, `SELECT b.batch_id FROM batches b JOIN attempts a ON a.attempt_id = b.head_attempt_id
		WHERE b.state IN ('materialized','cooldown') AND b.replay_policy = 'automatic'
		AND (a.state = 'abandoned' OR (a.state = 'cooldown' AND a.cooldown_until <= ?
		AND COALESCE(a.delivery_observation_state,'') != 'tracking'))
		AND (b.target_kind != 'desktop' OR a.state = 'cooldown' OR EXISTS (SELECT 1 FROM desktop_bindings d
		  WHERE d.source_thread_id = b.source_thread_id AND d.binding_state = 'bound'))
		ORDER BY b.source_thread_id`, store.TS(sw.Store.Now()))
	if err != nil {
		return err
	}
	for _, id := range ids {
		err := delivery.Run(ctx, sw.Store, sw.Cfg, sw.Actor, func(o *delivery.Op) error {
			out, err := delivery.ReviveOrExhaust(o, id)
			if out == delivery.OutcomeOK {
				r.Revived++
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	threads, err := sw.strings(ctx, `SELECT DISTINCT source_thread_id FROM batches WHERE state = 'queued' ORDER BY 1`)
	if err != nil {
		return err
	}
	for _, th := range threads {
		err := delivery.Run(ctx, sw.Store, sw.Cfg, sw.Actor, func(o *delivery.Op) error {
			ok, err := delivery.MaterializeHead(o, th)
			if ok {
				r.Materialized++
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// orphanGrace is how old an unrecorded artifact copy must be before the
// sweep deletes it; a live Complete records its copy within milliseconds.
const orphanGrace = time.Hour

func (sw *Sweeper) collect(ctx context.Context, now time.Time, r *Report) error {
	due, err := artifacts.Due(ctx, sw.Store.DB, store.TS(now))
	if err != nil {
		return err
	}
	for _, a := range due {
		err := delivery.Run(ctx, sw.Store, sw.Cfg, sw.Actor, func(o *delivery.Op) error {
			if err := artifacts.MarkCollected(ctx, o.Tx, a, o.At()); err != nil {
				return err
			}
			r.ArtifactsCollected++
			return o.Audit(audit.Entry{Action: "artifact.gc", EntityKind: "artifact", EntityID: a.ArtifactID,
				Reason: "gc_eligible_at passed", Outcome: "ok"})
		})
		if err != nil {
			return err
		}
	}
	if sw.ArtifactsDir == "" {
		return nil
	}
	orphans, err := artifacts.Orphans(ctx, sw.Store.DB, sw.ArtifactsDir, now, orphanGrace)
	if err != nil {
		return err
	}
	for _, d := range orphans {
		if os.RemoveAll(d) == nil {
			r.OrphansRemoved++
		}
	}
	return nil
}

// NearTerm reports whether durable work falls due within horizon (or is
// under live observation), which keeps an idle daemon from exiting.
func NearTerm(ctx context.Context, s *store.Store, cfg config.Config, horizon time.Duration) (bool, string, error) {
	now := s.Now().UTC()
	until := store.TS(now.Add(horizon))
	queuedBy := store.TS(now.Add(horizon - cfg.MaxWaitWindow))
	checks := []struct{ name, q string }{
		{"delivery_observation_deadline", `SELECT COUNT(*) FROM attempts WHERE state = 'cooldown' AND delivery_observation_state = 'tracking'`},
		{"arm_pending_deadline", `SELECT COUNT(*) FROM attempts WHERE state = 'arm_pending' AND arm_pending_deadline <= '` + until + `'`},
		{"cooldown_until", `SELECT COUNT(*) FROM attempts WHERE state = 'cooldown' AND cooldown_until <= '` + until + `'`},
		{"redelivery_window_ends_at", `SELECT COUNT(*) FROM batches WHERE state != 'closed' AND redelivery_window_ends_at <= '` + until + `'`},
		{"queued batch", `SELECT COUNT(*) FROM batches WHERE state = 'queued' AND first_ready_at <= '` + queuedBy + `'`},
		{"pause_deadline", `SELECT COUNT(*) FROM desktop_bindings WHERE pause_deadline <= '` + until + `'`},
		{"artifact gc", `SELECT COUNT(*) FROM artifacts WHERE gc_at IS NULL AND gc_eligible_at <= '` + until + `'`},
	}
	for _, c := range checks {
		var n int
		if err := s.DB.QueryRowContext(ctx, c.q).Scan(&n); err != nil {
			return false, "", err
		}
		if n > 0 {
			return true, c.name, nil
		}
	}
	return false, "", nil
}
