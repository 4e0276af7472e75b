package cli

import (
	"context"
	"log"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Name is the adapter's extension name.
const Name = "cli"

// LeaseTTL is how long a foreground lease lives without a renewal.
const LeaseTTL = 10 * time.Second

func init() {
	daemon.RegisterExtension(func() daemon.Extension { return &Manager{} })
	registerOps()
}

// Manager is the CLI adapter inside one daemon: a runtime per managed
// session that needs an app-server.
type Manager struct {
	Store   *store.Store
	Cfg     config.Config
	Log     *log.Logger
	Version string

	ctx  context.Context
	stop context.CancelFunc
	mu   sync.Mutex
	rts  map[string]*runtime
	wg   sync.WaitGroup
}

// Name implements daemon.Extension.
func (m *Manager) Name() string { return Name }

func (m *Manager) actor() audit.Actor { return daemon.Actor("cli") }

func (m *Manager) run(ctx context.Context, fn func(o *delivery.Op) error) error {
	return delivery.Run(ctx, m.Store, m.Cfg, m.actor(), fn)
}

// Start reconciles what a previous daemon left: no app-server of it is
// ours any more, so a live or detached session becomes stale (its event
// stream continuity cannot be proven) and a leftover app-server is ended.
func (m *Manager) Start(ctx context.Context, d *daemon.Daemon) error {
	m.Store, m.Cfg, m.Log, m.Version = d.Store, d.Cfg, d.Log, d.Version
	m.ctx, m.stop = context.WithCancel(ctx)
	m.rts = map[string]*runtime{}
	sessions, err := ListSessions(ctx, m.Store.DB)
	if err != nil {
		return err
	}
	for _, s := range sessions {
		if s.AppServerPID != nil {
			stopPID(*s.AppServerPID, s.AppServerStartedAt)
		}
		if s.SessionState != StateLive && s.SessionState != StateDetached {
			continue
		}
		err := m.run(ctx, func(o *delivery.Op) error {
			_, err := transition(o, s.ManagedSessionID, s.SessionState, StateStale,
				"daemon restart: app-server event stream continuity cannot be proven",
				map[string]any{"app_server_pid": nil, "app_server_url": nil, "lease_id": nil, "lease_pid": nil})
			return err
		})
		if err != nil {
			return err
		}
	}
	m.wg.Add(1)
	go m.loop()
	return nil
}

// loop steps every runtime on a short tick (lease expiry, restarts,
// delivery after a minimum interval).
func (m *Manager) loop() {
	defer m.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var swept time.Time
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if time.Since(swept) >= time.Second {
				swept = time.Now()
				if err := m.parkSweep(); err != nil && m.ctx.Err() == nil {
					m.Log.Printf("cli: park sweep: %v", err)
				}
			}
			m.Kick()
		}
	}
}

// parkSweep keeps session_state true to the seed for sessions whose live
// part has ended: parked while a manual batch of the bound thread waits
// for the operator (whether it became manual before or after the
// foreground left), detached once nothing manual is left.
func (m *Manager) parkSweep() error {
	rows, err := m.Store.DB.QueryContext(m.ctx, `SELECT managed_session_id, session_state, bound_thread_id
		FROM managed_sessions WHERE session_state IN ('detached','parked') AND bound_thread_id IS NOT NULL`)
	if err != nil {
		return err
	}
	type row struct {
		id, thread string
		state      SessionState
	}
	var ss []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.state, &r.thread); err != nil {
			rows.Close()
			return err
		}
		ss = append(ss, r)
	}
	rows.Close()
	for _, r := range ss {
		manual, _, err := unresolvedWork(m.ctx, m.Store.DB, r.thread)
		if err != nil {
			return err
		}
		to, why := StateDetached, "manual batch resolved"
		if manual {
			to, why = StateParked, "unresolved manual batch waits for the operator"
		}
		if to == r.state {
			continue
		}
		if err := m.run(m.ctx, func(o *delivery.Op) error {
			_, err := transition(o, r.id, r.state, to, why, nil)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// Kick wakes every runtime (after each served request).
func (m *Manager) Kick() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rt := range m.rts {
		rt.kick()
	}
}

// Busy keeps the daemon alive while any runtime holds an app-server.
func (m *Manager) Busy(ctx context.Context) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, rt := range m.rts {
		if rt.hasAppServer() {
			return "managed session " + id + " owns an app-server", true
		}
	}
	return "", false
}

// Stop ends every runtime and its app-server.
func (m *Manager) Stop() {
	if m.stop == nil {
		return
	}
	m.stop()
	m.mu.Lock()
	rts := make([]*runtime, 0, len(m.rts))
	for _, rt := range m.rts {
		rts = append(rts, rt)
	}
	m.mu.Unlock()
	for _, rt := range rts {
		rt.shutdown()
	}
	m.wg.Wait()
}

func (m *Manager) runtimeOf(id string) *runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rts[id]
}

// ensureRuntime returns the session's runtime, creating it with env.
func (m *Manager) ensureRuntime(s *Session, env []string) *runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rt := m.rts[s.ManagedSessionID]; rt != nil {
		if env != nil {
			rt.setEnv(env)
		}
		return rt
	}
	rt := newRuntime(m, s, env)
	m.rts[s.ManagedSessionID] = rt
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		rt.loop()
		m.mu.Lock()
		if m.rts[s.ManagedSessionID] == rt {
			delete(m.rts, s.ManagedSessionID)
		}
		m.mu.Unlock()
	}()
	return rt
}

func managerOf(d *daemon.Daemon) *Manager {
	m, _ := d.Extension(Name).(*Manager)
	return m
}
