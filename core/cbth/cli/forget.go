package cli

import (
	"context"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// OpForget is `cbth cli session forget`.
const OpForget = "cli.session_forget"

// ForgetRequest names the session to forget.
type ForgetRequest struct {
	ManagedSessionID string `json:"managed_session_id"`
}

// Forget retires a session nothing needs any more: one whose codex never
// started or exited, with no live foreground and no unresolved delivery
// work of its thread (an open manual batch or an attempt in flight). Its
// app-server, if any, is stopped. Forgetting a retired session changes
// nothing.
func (m *Manager) Forget(ctx context.Context, a audit.Actor, r ForgetRequest) (*Session, error) {
	if r.ManagedSessionID == "" {
		return nil, abi.Errorf(abi.EINVAL, "a managed session id is required (cbth cli session list shows them)")
	}
	s, err := GetSession(ctx, m.Store.DB, r.ManagedSessionID)
	if err != nil || s.SessionState == StateRetired {
		return s, err
	}
	if s.SessionState == StateLive && !leaseExpired(s, m.Store.Now()) {
		return nil, abi.Errorf(abi.EBUSY, "managed session %s has a live foreground (pid %d): quit that codex first",
			s.ManagedSessionID, deref64(s.LeasePID))
	}
	if s.BoundThreadID != nil {
		manual, active, err := unresolvedWork(ctx, m.Store.DB, *s.BoundThreadID)
		if err != nil {
			return nil, err
		}
		if manual || active {
			return nil, abi.Errorf(abi.EBUSY, "managed session %s's thread %s has unresolved delivery work; resolve it "+
				"first (cbth batch inspect-head --source-thread-id %s)", s.ManagedSessionID, *s.BoundThreadID, *s.BoundThreadID)
		}
	}
	ok := false
	err = m.run(ctx, func(o *delivery.Op) (err error) {
		o.Actor = a
		ok, err = transition(o, s.ManagedSessionID, s.SessionState, StateRetired, "forgotten by cbth cli session forget",
			map[string]any{"lease_id": nil, "lease_pid": nil, "lease_deadline": nil})
		return err
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, abi.Errorf(abi.EBUSY, "managed session %s changed state meanwhile; try again", s.ManagedSessionID)
	}
	if rt := m.runtimeOf(s.ManagedSessionID); rt != nil {
		rt.do(func() { rt.stopServer("session forgotten") })
		rt.shutdown()
	}
	return GetSession(ctx, m.Store.DB, s.ManagedSessionID)
}

// forgetUnstarted retires a session whose foreground never got going (its
// thread does not exist), on the runtime goroutine.
func (rt *runtime) forgetUnstarted(s *Session, why string) error {
	err := rt.tx(func(o *delivery.Op) error {
		_, err := transition(o, s.ManagedSessionID, StateLive, StateRetired, why,
			map[string]any{"lease_id": nil, "lease_pid": nil, "lease_deadline": nil})
		return err
	})
	rt.stopServer(why)
	rt.shutdown()
	return err
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
