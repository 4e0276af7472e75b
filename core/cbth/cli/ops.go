package cli

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Operation names of the CLI adapter.
const (
	OpAttach     = "cli.attach"
	OpRenew      = "cli.renew"
	OpDetach     = "cli.detach"
	OpList       = "cli.session_list"
	OpInspect    = "cli.session_inspect"
	OpAppServers = "cli.app_servers"
	OpDoctor     = "cli.doctor"
)

// AttachRequest is `cbth cli run`'s request for a live managed session.
type AttachRequest struct {
	BindThreadID       string   `json:"bind_thread_id,omitempty"`
	NewThread          bool     `json:"new_thread,omitempty"`
	CodexBin           string   `json:"codex_bin"`
	Cwd                string   `json:"cwd"`
	Env                []string `json:"env"`
	AllowsApproval     string   `json:"session_allows_approval"`
	AllowsNetwork      string   `json:"session_allows_network"`
	AllowsWriteAccess  string   `json:"session_allows_write_access"`
	AutoDeliveryPolicy string   `json:"auto_delivery_policy"`
	EnableTurnSteer    bool     `json:"enable_turn_steer"`
	PID                int64    `json:"pid"`
}

// LeaseRequest names a session and the foreground's lease.
type LeaseRequest struct {
	ManagedSessionID string `json:"managed_session_id"`
	LeaseID          string `json:"lease_id"`
}

// LeaseResult is attach's and renew's answer.
type LeaseResult struct {
	Session  *Session `json:"session"`
	LeaseID  string   `json:"lease_id"`
	Warnings []string `json:"warnings,omitempty"`
}

func op[T any](fn func(ctx context.Context, m *Manager, a audit.Actor, r T) (any, error)) daemon.OpFunc {
	return func(ctx context.Context, d *daemon.Daemon, a audit.Actor, args json.RawMessage) (any, error) {
		var r T
		if len(args) > 0 {
			if err := json.Unmarshal(args, &r); err != nil {
				return nil, abi.Errorf(abi.EINVAL, "bad arguments: %v", err)
			}
		}
		m := managerOf(d)
		if m == nil {
			return nil, abi.Errorf(abi.ENOTSUP, "cli adapter not running")
		}
		return fn(ctx, m, a, r)
	}
}

func registerOps() {
	daemon.RegisterOp(OpAttach, op(func(ctx context.Context, m *Manager, a audit.Actor, r AttachRequest) (any, error) {
		return m.Attach(ctx, a, r)
	}))
	daemon.RegisterOp(OpRenew, op(func(ctx context.Context, m *Manager, a audit.Actor, r LeaseRequest) (any, error) {
		return m.Renew(ctx, r)
	}))
	daemon.RegisterOp(OpDetach, op(func(ctx context.Context, m *Manager, a audit.Actor, r LeaseRequest) (any, error) {
		return m.Detach(ctx, r)
	}))
	daemon.RegisterOp(OpList, op(func(ctx context.Context, m *Manager, a audit.Actor, r struct{}) (any, error) {
		return ListSessions(ctx, m.Store.DB)
	}))
	daemon.RegisterOp(OpInspect, op(func(ctx context.Context, m *Manager, a audit.Actor, r InspectRequest) (any, error) {
		return m.Inspect(ctx, r)
	}))
	daemon.RegisterOp(OpAppServers, op(func(ctx context.Context, m *Manager, a audit.Actor, r struct{}) (any, error) {
		return m.AppServers(ctx)
	}))
	daemon.RegisterOp(OpDoctor, op(func(ctx context.Context, m *Manager, a audit.Actor, r DoctorRequest) (any, error) {
		return m.Doctor(ctx, r)
	}))
	daemon.RegisterOp(OpForget, op(func(ctx context.Context, m *Manager, a audit.Actor, r ForgetRequest) (any, error) {
		return m.Forget(ctx, a, r)
	}))
}

func (m *Manager) leaseDeadline() string { return store.TS(m.Store.Now().Add(LeaseTTL)) }

// Renew extends the foreground lease and returns the session and any
// warnings for the foreground's stderr.
func (m *Manager) Renew(ctx context.Context, r LeaseRequest) (*LeaseResult, error) {
	s, err := GetSession(ctx, m.Store.DB, r.ManagedSessionID)
	if err != nil {
		return nil, err
	}
	if s.SessionState != StateLive || s.LeaseID == nil || *s.LeaseID != r.LeaseID {
		return nil, abi.Errorf(abi.EBUSY, "lease %s no longer holds session %s (state %s)", r.LeaseID, s.ManagedSessionID, s.SessionState)
	}
	err = m.run(ctx, func(o *delivery.Op) error {
		return setSession(o, s.ManagedSessionID, "", "", map[string]any{"lease_deadline": m.leaseDeadline()})
	})
	if err != nil {
		return nil, err
	}
	res := &LeaseResult{LeaseID: r.LeaseID}
	if rt := m.runtimeOf(s.ManagedSessionID); rt != nil {
		res.Warnings = rt.takeWarnings()
	}
	res.Session, err = GetSession(ctx, m.Store.DB, s.ManagedSessionID)
	return res, err
}

// Detach ends the foreground's live part (the codex TUI exited).
func (m *Manager) Detach(ctx context.Context, r LeaseRequest) (*Session, error) {
	s, err := GetSession(ctx, m.Store.DB, r.ManagedSessionID)
	if err != nil {
		return nil, err
	}
	if s.SessionState == StateLive && s.LeaseID != nil && *s.LeaseID == r.LeaseID {
		rt := m.runtimeOf(s.ManagedSessionID)
		if rt == nil {
			rt = m.ensureRuntime(s, nil)
		}
		var ferr error
		rt.do(func() { ferr = rt.foregroundGone(s, "foreground exited") })
		if ferr != nil {
			return nil, ferr
		}
		rt.kick()
	}
	return GetSession(ctx, m.Store.DB, r.ManagedSessionID)
}

// InspectRequest names a session by id or bound thread.
type InspectRequest struct {
	ManagedSessionID string `json:"managed_session_id,omitempty"`
	ThreadID         string `json:"thread_id,omitempty"`
}

// SessionView is inspect's answer: the record and its live supervision.
type SessionView struct {
	*Session
	AppServerRunning bool   `json:"app_server_running"`
	Connected        bool   `json:"connected"`
	LastThreadStatus string `json:"observed_thread_status,omitempty"`
}

// Inspect shows one session.
func (m *Manager) Inspect(ctx context.Context, r InspectRequest) (*SessionView, error) {
	var s *Session
	var err error
	switch {
	case r.ManagedSessionID != "":
		s, err = GetSession(ctx, m.Store.DB, r.ManagedSessionID)
	case r.ThreadID != "":
		s, err = SessionForThread(ctx, m.Store.DB, r.ThreadID)
		if err == nil && s == nil {
			err = abi.Errorf(abi.ENOENT, "no managed session bound to thread %q", r.ThreadID)
		}
	default:
		err = abi.Errorf(abi.EINVAL, "give a managed session id or --thread-id")
	}
	if err != nil {
		return nil, err
	}
	v := &SessionView{Session: s}
	if rt := m.runtimeOf(s.ManagedSessionID); rt != nil {
		v.AppServerRunning = rt.hasAppServer()
		rt.do(func() { v.Connected, v.LastThreadStatus = rt.cl != nil, rt.lastStatus })
	}
	return v, nil
}

// AppServer is one row of `cbth cli app-servers`.
type AppServer struct {
	ManagedSessionID string  `json:"managed_session_id"`
	BoundThreadID    *string `json:"bound_thread_id"`
	SessionEpoch     int64   `json:"session_epoch"`
	SessionState     string  `json:"session_state"`
	PID              int64   `json:"pid"`
	URL              string  `json:"url"`
	StartedAt        *string `json:"started_at"`
	Running          bool    `json:"running"`
}

// AppServers lists the daemon-owned app-servers.
func (m *Manager) AppServers(ctx context.Context) ([]AppServer, error) {
	ss, err := ListSessions(ctx, m.Store.DB)
	if err != nil {
		return nil, err
	}
	out := []AppServer{}
	for _, s := range ss {
		if s.AppServerPID == nil || s.AppServerURL == nil {
			continue
		}
		rt := m.runtimeOf(s.ManagedSessionID)
		out = append(out, AppServer{ManagedSessionID: s.ManagedSessionID, BoundThreadID: s.BoundThreadID,
			SessionEpoch: s.SessionEpoch, SessionState: string(s.SessionState), PID: *s.AppServerPID,
			URL: *s.AppServerURL, StartedAt: s.AppServerStartedAt, Running: rt != nil && rt.hasAppServer()})
	}
	return out, nil
}

// startWindow bounds how long attach waits for the app-server.
const startWindow = 60 * time.Second

// waitStarted waits for the runtime to hold a connected app-server.
func (m *Manager) waitStarted(ctx context.Context, rt *runtime) error {
	deadline := time.Now().Add(startWindow)
	for time.Now().Before(deadline) {
		var up bool
		var serr error
		if !rt.do(func() {
			if rt.as == nil {
				rt.step()
			}
			up, serr = rt.cl != nil, rt.startErr
		}) {
			return abi.Errorf(abi.EIO, "managed session runtime ended")
		}
		if up {
			return nil
		}
		if serr != nil {
			return abi.Errorf(abi.EIO, "cannot start app-server: %v", serr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return abi.Errorf(abi.ETIMEDOUT, "app-server did not come up")
}
