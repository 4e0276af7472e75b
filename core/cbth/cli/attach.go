package cli

import (
	"context"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/ids"
)

func (r *AttachRequest) validate() error {
	if r.NewThread == (r.BindThreadID != "") {
		return abi.Errorf(abi.EINVAL, "give exactly one of --bind-thread-id ID or --new-thread")
	}
	for _, v := range []*string{&r.AllowsApproval, &r.AllowsNetwork, &r.AllowsWriteAccess} {
		q, err := ParseRequested(*v)
		if err != nil {
			return abi.Errorf(abi.EINVAL, "--session-allows-*: %v", err)
		}
		*v = string(q)
	}
	switch r.AutoDeliveryPolicy {
	case "":
		r.AutoDeliveryPolicy = PolicyStrictSafe
	case PolicyStrictSafe, PolicyTrustedAll:
	default:
		return abi.Errorf(abi.EINVAL, "--auto-delivery-policy must be strict-safe or trusted-all, not %q", r.AutoDeliveryPolicy)
	}
	if r.CodexBin == "" || r.Cwd == "" {
		return abi.Errorf(abi.EINVAL, "codex binary and working directory are required")
	}
	return nil
}

// Attach creates or reuses the managed session for the foreground, starts
// (or reuses) its daemon-owned app-server and hands out a lease.
func (m *Manager) Attach(ctx context.Context, a audit.Actor, r AttachRequest) (*LeaseResult, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	lease := ids.New("lease_")
	var id string
	err := m.run(ctx, func(o *delivery.Op) (err error) {
		o.Actor = a
		id, err = m.attachTx(o, r, lease)
		return err
	})
	if err != nil {
		return nil, err
	}
	s, err := GetSession(ctx, m.Store.DB, id)
	if err != nil {
		return nil, err
	}
	rt := m.ensureRuntime(s, r.Env)
	if err := m.waitStarted(ctx, rt); err != nil {
		return nil, err
	}
	if s.BoundThreadID != nil {
		// Pin the startup profile now, from thread/resume.
		rt.do(func() {
			if res, err := rt.resume(*s.BoundThreadID); err == nil {
				_, _, _ = rt.refreshProfile(s, res)
			} else {
				rt.m.Log.Printf("cli %s: attach resume: %v", rt.id, err)
			}
		})
	}
	s, err = GetSession(ctx, m.Store.DB, id)
	return &LeaseResult{Session: s, LeaseID: lease}, err
}

func (m *Manager) attachTx(o *delivery.Op, r AttachRequest, lease string) (string, error) {
	cols := map[string]any{"lease_id": lease, "lease_pid": r.PID, "lease_deadline": m.leaseDeadline(),
		"codex_bin": r.CodexBin, "cwd": r.Cwd, "auto_delivery_policy": r.AutoDeliveryPolicy,
		"enable_turn_steer": r.EnableTurnSteer, "requested_allows_approval": r.AllowsApproval,
		"requested_allows_network": r.AllowsNetwork, "requested_allows_write_access": r.AllowsWriteAccess}
	if r.BindThreadID != "" {
		old, err := SessionForThread(o.Ctx, o.Tx, r.BindThreadID)
		if err != nil {
			return "", err
		}
		if old != nil {
			reuse, err := m.reuseOrRetire(o, old, r)
			if err != nil || reuse {
				if err == nil {
					_, err = transition(o, old.ManagedSessionID, old.SessionState, StateLive, "foreground attached", cols)
				}
				return old.ManagedSessionID, err
			}
		}
	}
	id := ids.New(SessionPrefix)
	var bound any
	if r.BindThreadID != "" {
		bound = r.BindThreadID
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO managed_sessions(managed_session_id, bound_thread_id,
		session_epoch, session_state, created_at, updated_at) VALUES (?,?,1,'live',?,?)`, id, bound, o.At(), o.At()); err != nil {
		return "", abi.Errorf(abi.EBUSY, "cannot create managed session: %v", err)
	}
	mode := "bind"
	if r.NewThread {
		mode = "new_thread"
	}
	cols["lease_pid"] = r.PID
	if err := setSession(o, id, "cli.session.create", mode, cols); err != nil {
		return "", err
	}
	return id, nil
}

// reuseOrRetire applies the seed's refusals for an existing session of the
// thread: a live foreground, a parked manual batch, or a profile mismatch
// with unresolved work refuse; a mismatch without work retires the old one.
func (m *Manager) reuseOrRetire(o *delivery.Op, old *Session, r AttachRequest) (bool, error) {
	if old.SessionState == StateLive && !leaseExpired(old, o.Now) {
		return false, abi.Errorf(abi.EBUSY, "managed session %s already has a live foreground", old.ManagedSessionID)
	}
	manual, active, err := unresolvedWork(o.Ctx, o.Tx, *old.BoundThreadID)
	if err != nil {
		return false, err
	}
	if old.SessionState == StateParked && manual {
		return false, abi.Errorf(abi.EBUSY, "%s: managed session %s is parked with an unresolved manual batch; "+
			"close it with cbth batch close-head first", ReasonPendingManualResolution, old.ManagedSessionID)
	}
	if !profileMismatch(old, r) {
		return true, nil
	}
	if manual || active {
		return false, abi.Errorf(abi.EBUSY, "%s: requested profile differs from managed session %s's durable effective "+
			"profile and it still has unresolved delivery work", ReasonProfileMismatch, old.ManagedSessionID)
	}
	_, err = transition(o, old.ManagedSessionID, old.SessionState, StateRetired, "profile changed: retired for a new session", nil)
	return false, err
}

// profileMismatch compares explicit true/false requests with the durable
// effective profile; auto never mismatches.
func profileMismatch(s *Session, r AttachRequest) bool {
	pairs := []struct {
		req string
		cur *bool
	}{{r.AllowsApproval, s.SessionAllowsApproval}, {r.AllowsNetwork, s.SessionAllowsNetwork},
		{r.AllowsWriteAccess, s.SessionAllowsWriteAccess}}
	for _, p := range pairs {
		if p.req == "auto" || p.cur == nil {
			continue
		}
		if (p.req == "true") != *p.cur {
			return true
		}
	}
	return false
}

// DoctorRequest is `cbth doctor cli`.
type DoctorRequest struct {
	CodexBin string   `json:"codex_bin"`
	Env      []string `json:"env"`
}

// DoctorReport is the CLI adapter's health: the binary's capabilities
// and each session's fail-closed reasons.
type DoctorReport struct {
	OK           bool          `json:"ok"`
	CodexBin     string        `json:"codex_bin"`
	Capabilities *Capabilities `json:"capabilities"`
	ProbeError   string        `json:"probe_error,omitempty"`
	Sessions     []*Session    `json:"sessions"`
}

// Doctor probes the binary and lists the sessions.
func (m *Manager) Doctor(ctx context.Context, r DoctorRequest) (*DoctorReport, error) {
	rep := &DoctorReport{CodexBin: r.CodexBin}
	caps, err := Probe(ctx, r.CodexBin, r.Env)
	if err != nil {
		rep.ProbeError = err.Error()
	}
	rep.Capabilities = caps
	rep.OK = err == nil && caps.OK()
	rep.Sessions, err = ListSessions(ctx, m.Store.DB)
	return rep, err
}
