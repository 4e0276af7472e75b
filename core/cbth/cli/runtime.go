package cli

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/wire/codex"
)

// runtime supervises one managed session: its app-server, the daemon's
// websocket client to it, delivery and observation. Everything but the
// queues runs on the runtime's own goroutine, so session changes are
// serialized.
type runtime struct {
	m  *Manager
	id string

	mu       sync.Mutex
	env      []string
	notes    []codex.Notification
	warnings []string
	running  bool // an app-server is held (read by Busy)

	kicks   chan struct{}
	noteSig chan struct{}
	reqs    chan func()
	quit    chan struct{}
	once    sync.Once

	as         *appServer
	cl         *codex.Client
	epochUsed  bool   // the current epoch already belonged to an app-server
	lastStatus string // bound thread's last thread/status
	activeTurn string // bound thread's turn in progress (turn/started .. turn/completed)
	caps       *Capabilities
	startErr   error
	retryAt    time.Time
	polledAt   time.Time
}

func newRuntime(m *Manager, s *Session, env []string) *runtime {
	return &runtime{m: m, id: s.ManagedSessionID, env: env, kicks: make(chan struct{}, 1),
		noteSig: make(chan struct{}, 1), reqs: make(chan func()), quit: make(chan struct{}),
		epochUsed: s.AppServerStartedAt != nil}
}

func (rt *runtime) setEnv(env []string) {
	rt.mu.Lock()
	rt.env = env
	rt.mu.Unlock()
}

func (rt *runtime) getEnv() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.env
}

func (rt *runtime) kick() {
	select {
	case rt.kicks <- struct{}{}:
	default:
	}
}

func (rt *runtime) hasAppServer() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.running
}

func (rt *runtime) warn(w string) {
	rt.m.Log.Printf("cli %s: warning: %s", rt.id, w)
	rt.mu.Lock()
	rt.warnings = append(rt.warnings, w)
	rt.mu.Unlock()
}

// takeWarnings hands pending warnings to the foreground (its stderr).
func (rt *runtime) takeWarnings() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	w := rt.warnings
	rt.warnings = nil
	return w
}

func (rt *runtime) onNote(n codex.Notification) {
	rt.mu.Lock()
	rt.notes = append(rt.notes, n)
	rt.mu.Unlock()
	select {
	case rt.noteSig <- struct{}{}:
	default:
	}
}

// do runs fn on the runtime goroutine and waits for it.
func (rt *runtime) do(fn func()) bool {
	done := make(chan struct{})
	select {
	case rt.reqs <- func() { fn(); close(done) }:
		<-done
		return true
	case <-rt.quit:
		return false
	case <-rt.m.ctx.Done():
		return false
	}
}

func (rt *runtime) shutdown() { rt.once.Do(func() { close(rt.quit) }) }

func (rt *runtime) loop() {
	defer rt.teardown()
	for {
		var exited, closed <-chan struct{}
		if rt.as != nil {
			exited = rt.as.exited
		}
		if rt.cl != nil {
			closed = rt.cl.Done()
		}
		select {
		case <-rt.m.ctx.Done():
			return
		case <-rt.quit:
			return
		case fn := <-rt.reqs:
			fn()
		case <-rt.noteSig:
			rt.drainNotes()
		case <-rt.kicks:
			if !rt.step() {
				return
			}
		case <-exited:
			rt.onAppServerExit()
		case <-closed:
			rt.onDisconnect()
		}
	}
}

func (rt *runtime) teardown() {
	rt.shutdown()
	rt.stopServer("daemon stopping or session no longer needs an app-server")
}

func (rt *runtime) session() (*Session, error) {
	return GetSession(rt.m.ctx, rt.m.Store.DB, rt.id)
}

func (rt *runtime) tx(fn func(o *delivery.Op) error) error {
	return rt.m.run(rt.m.ctx, fn)
}

// step applies the lease, starts or stops the app-server as the session
// needs, reconnects, and delivers. false ends the runtime.
func (rt *runtime) step() bool {
	s, err := rt.session()
	if err != nil {
		rt.m.Log.Printf("cli %s: %v", rt.id, err)
		return false
	}
	if s.SessionState == StateLive && leaseExpired(s, rt.m.Store.Now()) {
		if err := rt.foregroundGone(s, "foreground lease expired"); err != nil {
			rt.m.Log.Printf("cli %s: %v", rt.id, err)
		}
		if s, err = rt.session(); err != nil {
			return false
		}
	}
	need, err := rt.needsAppServer(s)
	if err != nil {
		rt.m.Log.Printf("cli %s: %v", rt.id, err)
		return true
	}
	if !need {
		rt.stopServer("nothing needs the app-server")
		return s.SessionState == StateLive
	}
	if rt.as == nil {
		if time.Now().Before(rt.retryAt) {
			return true
		}
		if err := rt.startServer(s); err != nil {
			rt.startErr, rt.retryAt = err, time.Now().Add(2*time.Second)
			rt.m.Log.Printf("cli %s: %v", rt.id, err)
			return true
		}
		if s, err = rt.session(); err != nil {
			return false
		}
	}
	rt.drainNotes()
	if time.Since(rt.polledAt) > time.Second {
		// The current-state surface of the same app-server: catches a tracked
		// turn whose events this connection is not subscribed to (a fresh
		// thread cannot be resumed before its first user message).
		rt.polledAt = time.Now()
		rt.reconcileTracked()
	}
	if err := rt.deliver(s); err != nil {
		rt.m.Log.Printf("cli %s: deliver: %v", rt.id, err)
	}
	return true
}

func leaseExpired(s *Session, now time.Time) bool {
	if s.LeaseDeadline == nil || *s.LeaseDeadline < store.TS(now) {
		return true
	}
	return s.LeasePID != nil && syscall.Kill(int(*s.LeasePID), 0) == syscall.ESRCH
}

// needsAppServer: a live session always; a detached one while its thread
// has automatic delivery work or an accepted turn under observation.
func (rt *runtime) needsAppServer(s *Session) (bool, error) {
	switch s.SessionState {
	case StateLive:
		return true, nil
	case StateDetached:
	default:
		return false, nil
	}
	if s.BoundThreadID == nil {
		return false, nil
	}
	var n int
	err := rt.m.Store.DB.QueryRowContext(rt.m.ctx, `SELECT
		(SELECT COUNT(*) FROM batches WHERE source_thread_id = ? AND state != 'closed' AND replay_policy = 'automatic') +
		(SELECT COUNT(*) FROM attempts WHERE managed_session_id = ? AND state = 'cooldown' AND delivery_observation_state = 'tracking')`,
		*s.BoundThreadID, s.ManagedSessionID).Scan(&n)
	return n > 0, err
}

// foregroundGone ends the live part: parked when a manual batch of the
// thread waits for the operator, detached otherwise.
func (rt *runtime) foregroundGone(s *Session, why string) error {
	to := StateDetached
	if s.BoundThreadID != nil {
		manual, _, err := unresolvedWork(rt.m.ctx, rt.m.Store.DB, *s.BoundThreadID)
		if err != nil {
			return err
		}
		if manual {
			to = StateParked
		}
	}
	return rt.tx(func(o *delivery.Op) error {
		_, err := transition(o, s.ManagedSessionID, StateLive, to, why,
			map[string]any{"lease_id": nil, "lease_pid": nil, "lease_deadline": nil})
		return err
	})
}

// startServer probes the binary, starts a fresh app-server (a new epoch
// unless this is the session's first), and connects.
func (rt *runtime) startServer(s *Session) error {
	env := rt.getEnv()
	if env == nil || s.CodexBin == nil || s.Cwd == nil {
		return fmt.Errorf("no foreground environment to start an app-server; run cbth cli run again")
	}
	caps, err := Probe(rt.m.ctx, *s.CodexBin, env)
	if caps != nil && s.EnableTurnSteer {
		caps.RequireSteer()
	}
	rt.caps = caps
	if err := rt.recordProbe(caps, err); err != nil {
		return err
	}
	if rt.epochUsed {
		if err := rt.bumpEpoch("app-server restart"); err != nil {
			return err
		}
	}
	as, err := startAppServer(rt.m.ctx, *s.CodexBin, *s.Cwd, env)
	if err != nil {
		return err
	}
	rt.as, rt.epochUsed = as, true
	rt.mu.Lock()
	rt.running = true
	rt.mu.Unlock()
	err = rt.tx(func(o *delivery.Op) error {
		return setSession(o, rt.id, "cli.app_server.start", "daemon-owned app-server",
			map[string]any{"app_server_pid": as.pid, "app_server_url": as.url, "app_server_started_at": o.At()})
	})
	if err != nil {
		return err
	}
	return rt.connect()
}

func (rt *runtime) recordProbe(caps *Capabilities, probeErr error) error {
	state, reason, raw := "ok", "", ""
	switch {
	case probeErr != nil:
		state, reason = "missing", "capability probe failed: "+probeErr.Error()
	case !caps.OK():
		state, reason = "missing", caps.Reason()
	}
	if caps != nil {
		raw = string(mustJSON(caps))
	}
	return rt.tx(func(o *delivery.Op) error {
		if err := setSession(o, rt.id, "", "", map[string]any{"capability_state": state,
			"capability_reason": nullIfEmpty(reason), "capability_json": nullIfEmpty(raw), "capability_probed_at": o.At()}); err != nil {
			return err
		}
		// The audit row carries the probe's real verdict.
		detail := map[string]any{"capability_state": state}
		if caps != nil {
			detail["version"], detail["min_version"], detail["missing"], detail["features"] =
				caps.Version, caps.MinVersion, caps.Missing, caps.Features
		}
		return o.Audit(audit.Entry{Action: "cli.capability_probe", EntityKind: "managed_session", EntityID: rt.id,
			Reason: reason, Outcome: state, Detail: detail})
	})
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// connect dials the app-server and initializes; a reconnect to the same
// live process keeps the epoch.
func (rt *runtime) connect() error {
	ctx, cancel := context.WithTimeout(rt.m.ctx, 20*time.Second)
	defer cancel()
	cl, err := codex.Dial(ctx, rt.as.url, rt.onNote)
	if err != nil {
		return err
	}
	if _, err := cl.Initialize(ctx, "cbth", rt.m.Version); err != nil {
		cl.Close()
		return fmt.Errorf("initialize: %w", err)
	}
	rt.cl = cl
	return nil
}

func (rt *runtime) stopServer(why string) {
	if rt.cl != nil {
		rt.cl.Close()
		rt.cl = nil
	}
	if rt.as == nil {
		return
	}
	rt.as.stop()
	rt.as = nil
	rt.mu.Lock()
	rt.running = false
	rt.mu.Unlock()
	_ = rt.m.run(context.Background(), func(o *delivery.Op) error {
		return setSession(o, rt.id, "cli.app_server.stop", why, map[string]any{"app_server_pid": nil, "app_server_url": nil})
	})
}

// onAppServerExit: the process died under us. Its event stream is gone,
// so the epoch moves on and any in-flight attempt fails closed.
func (rt *runtime) onAppServerExit() {
	tail := rt.as.tail()
	if rt.cl != nil {
		rt.cl.Close()
		rt.cl = nil
	}
	rt.as = nil
	rt.mu.Lock()
	rt.running = false
	rt.mu.Unlock()
	why := "app-server exited unexpectedly"
	rt.m.Log.Printf("cli %s: %s: %s", rt.id, why, tail)
	if err := rt.loseContinuity(why); err != nil {
		rt.m.Log.Printf("cli %s: %v", rt.id, err)
	}
	rt.kick()
}

// onDisconnect: the websocket dropped. If the same process lives, a
// reconnect keeps the epoch and observation resumes; otherwise continuity
// is lost.
func (rt *runtime) onDisconnect() {
	rt.cl = nil
	for i := 0; i < 5 && rt.as != nil && rt.as.alive(); i++ {
		if err := rt.connect(); err == nil {
			rt.m.Log.Printf("cli %s: reconnected to %s (same epoch)", rt.id, rt.as.url)
			rt.reconcileTracked()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rt.as != nil {
		rt.as.stop()
		rt.as = nil
		rt.mu.Lock()
		rt.running = false
		rt.mu.Unlock()
	}
	if err := rt.loseContinuity("websocket lost and no reconnect to the same app-server"); err != nil {
		rt.m.Log.Printf("cli %s: %v", rt.id, err)
	}
	rt.kick()
}

// loseContinuity bumps the epoch and abandons (manual_resolution_only)
// every attempt of this session still pending acceptance or tracked.
func (rt *runtime) loseContinuity(why string) error {
	if err := rt.bumpEpoch(why); err != nil {
		return err
	}
	rt.epochUsed = false
	toks, err := rt.inflight()
	if err != nil {
		return err
	}
	for _, t := range toks {
		err := rt.tx(func(o *delivery.Op) error {
			r, err := delivery.Abandon(o, t.tok, true, why)
			if err != nil || r.Outcome != delivery.OutcomeOK || !t.tracking {
				return err
			}
			_, err = o.Tx.ExecContext(o.Ctx, `UPDATE attempts SET delivery_observation_state = 'lost' WHERE attempt_id = ?`,
				t.tok.AttemptID)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

type inflightAttempt struct {
	tok      delivery.Token
	tracking bool
}

func (rt *runtime) inflight() ([]inflightAttempt, error) {
	rows, err := rt.m.Store.DB.QueryContext(rt.m.ctx, `SELECT source_thread_id, batch_id, attempt_id, generation,
		COALESCE(delivery_observation_state,'') = 'tracking' FROM attempts WHERE managed_session_id = ?
		AND (state = 'accept_pending' OR (state = 'cooldown' AND delivery_observation_state = 'tracking'))`, rt.id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []inflightAttempt
	for rows.Next() {
		var a inflightAttempt
		if err := rows.Scan(&a.tok.SourceThreadID, &a.tok.BatchID, &a.tok.AttemptID, &a.tok.Generation, &a.tracking); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (rt *runtime) bumpEpoch(why string) error {
	return rt.tx(func(o *delivery.Op) error {
		var thread *string
		var epoch int64
		if err := o.Tx.QueryRowContext(o.Ctx, `UPDATE managed_sessions SET session_epoch = session_epoch + 1,
			updated_at = ? WHERE managed_session_id = ? RETURNING session_epoch, bound_thread_id`, o.At(), rt.id).
			Scan(&epoch, &thread); err != nil {
			return err
		}
		th := ""
		if thread != nil {
			th = *thread
		}
		return o.Audit(audit.Entry{Action: "cli.session.epoch", EntityKind: "managed_session", EntityID: rt.id,
			SourceThreadID: th, From: fmt.Sprint(epoch - 1), To: fmt.Sprint(epoch), Reason: why, Outcome: "ok"})
	})
}
