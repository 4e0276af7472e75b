package cli

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/wire/codex"
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

// refusal is an attach refused for one of the seed's stable reasons; it
// is audited outside the refused transaction.
type refusal struct {
	reason, session, thread string
	detail                  map[string]any
	err                     error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(reason string, old *Session, detail map[string]any, format string, args ...any) *refusal {
	return &refusal{reason: reason, session: old.ManagedSessionID, thread: *old.BoundThreadID, detail: detail,
		err: abi.Errorf(abi.EBUSY, reason+": "+format, args...)}
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
	var ref *refusal
	if errors.As(err, &ref) {
		detail := map[string]any{"requested": map[string]string{"approval": r.AllowsApproval, "network": r.AllowsNetwork,
			"write_access": r.AllowsWriteAccess}, "requester_pid": r.PID}
		maps.Copy(detail, ref.detail)
		_ = m.run(ctx, func(o *delivery.Op) error {
			o.Actor = a
			return o.Audit(audit.Entry{Action: "cli.attach.refused", EntityKind: "managed_session", EntityID: ref.session,
				SourceThreadID: ref.thread, Reason: ref.reason, Outcome: "refused", Detail: detail})
		})
	}
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
		// Pin the startup profile now, from thread/resume. A thread codex
		// does not know is refused here, before the TUI starts: binding a
		// session to it would leave a session nothing can deliver to.
		var missing error
		rt.do(func() {
			res, err := rt.resume(*s.BoundThreadID)
			if err == nil {
				_, _, _ = rt.refreshProfile(s, res)
				return
			}
			rt.m.Log.Printf("cli %s: attach resume: %v", rt.id, err)
			var rpcErr *codex.RPCError
			if !errors.As(err, &rpcErr) {
				return
			}
			// A fresh thread has no rollout before its first message, so
			// resume refuses it while thread/read still knows it.
			if _, rerr := rt.readThreadMeta(*s.BoundThreadID); errors.As(rerr, &rpcErr) {
				missing = abi.Errorf(abi.ENOENT, "codex has no thread %s (%s); cbth new starts a fresh one",
					*s.BoundThreadID, rpcErr.Message)
				_ = rt.forgetUnstarted(s, "bound thread not found: "+rpcErr.Message)
			}
		})
		if missing != nil {
			return nil, missing
		}
	}
	// From here the foreground renews: back to the ordinary lease.
	err = m.run(ctx, func(o *delivery.Op) error {
		_, err := o.Tx.ExecContext(o.Ctx, `UPDATE managed_sessions SET lease_deadline = ? WHERE managed_session_id = ?
			AND session_state = 'live' AND lease_id = ?`, m.leaseDeadline(), id, lease)
		return err
	})
	if err != nil {
		return nil, err
	}
	s, err = GetSession(ctx, m.Store.DB, id)
	return &LeaseResult{Session: s, LeaseID: lease}, err
}

func (m *Manager) attachTx(o *delivery.Op, r AttachRequest, lease string) (string, error) {
	// The lease covers the app-server start too: the foreground cannot
	// renew before attach answers, and a slow start under load must not
	// expire the lease of a foreground that is still waiting.
	cols := map[string]any{"lease_id": lease, "lease_pid": r.PID,
		"lease_deadline": store.TS(m.Store.Now().Add(startWindow + LeaseTTL)),
		"codex_bin":      r.CodexBin, "cwd": r.Cwd, "auto_delivery_policy": r.AutoDeliveryPolicy,
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
					// auto never rewrites a durable explicit bootstrap value in place.
					for col, req := range map[string]string{"requested_allows_approval": r.AllowsApproval,
						"requested_allows_network": r.AllowsNetwork, "requested_allows_write_access": r.AllowsWriteAccess} {
						if req == "auto" {
							delete(cols, col)
						}
					}
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
// thread. Whenever the old session's foreground is gone and a manual batch
// of the thread is unresolved, the session is parked in substance:
// session_pending_manual_resolution, and no replacement session. A
// requested profile that differs from the durable one is
// session_profile_mismatch while a foreground is live or delivery work is
// unresolved; otherwise the old session is retired for a new one.
func (m *Manager) reuseOrRetire(o *delivery.Op, old *Session, r AttachRequest) (bool, error) {
	liveFG := old.SessionState == StateLive && !leaseExpired(old, o.Now)
	manual, active, err := unresolvedWork(o.Ctx, o.Tx, *old.BoundThreadID)
	if err != nil {
		return false, err
	}
	if !liveFG && manual {
		return false, refuse(ReasonPendingManualResolution, old, map[string]any{"session_state": old.SessionState},
			"managed session %s (%s) has an unresolved manual batch on thread %s; resolve it with cbth batch close-head first",
			old.ManagedSessionID, old.SessionState, *old.BoundThreadID)
	}
	dims := profileMismatch(old, r)
	if len(dims) > 0 && (liveFG || active) {
		why := "an active foreground client"
		if !liveFG {
			why = "unresolved delivery work"
		}
		return false, refuse(ReasonProfileMismatch, old, map[string]any{"changed_dimensions": dims,
			"durable": durableProfile(old), "active_foreground": liveFG, "active_attempt": active},
			"requested profile differs from managed session %s's durable effective profile (%s) and it still has %s",
			old.ManagedSessionID, strings.Join(dims, ","), why)
	}
	if liveFG {
		return false, abi.Errorf(abi.EBUSY, "managed session %s already has a live foreground", old.ManagedSessionID)
	}
	if len(dims) == 0 {
		return true, nil
	}
	_, err = transition(o, old.ManagedSessionID, old.SessionState, StateRetired,
		"profile changed ("+strings.Join(dims, ",")+"): retired for a new session", nil)
	return false, err
}

// durableProfile is, per dimension, the durable effective value, or while
// no trusted snapshot has been read the session's explicit bootstrap
// request; nil is unknown (auto without a snapshot).
func durableProfile(s *Session) map[string]*bool {
	pick := func(eff *bool, req string) *bool {
		if eff != nil {
			return eff
		}
		if req == "true" || req == "false" {
			v := req == "true"
			return &v
		}
		return nil
	}
	return map[string]*bool{"approval": pick(s.SessionAllowsApproval, s.RequestedAllowsApproval),
		"network":      pick(s.SessionAllowsNetwork, s.RequestedAllowsNetwork),
		"write_access": pick(s.SessionAllowsWriteAccess, s.RequestedAllowsWriteAccess)}
}

// profileMismatch lists the dimensions where an explicit true/false
// request differs from the durable profile; auto never mismatches.
func profileMismatch(s *Session, r AttachRequest) []string {
	cur := durableProfile(s)
	var out []string
	for _, p := range []struct{ dim, req string }{{"approval", r.AllowsApproval}, {"network", r.AllowsNetwork},
		{"write_access", r.AllowsWriteAccess}} {
		if p.req == "auto" || cur[p.dim] == nil {
			continue
		}
		if (p.req == "true") != *cur[p.dim] {
			out = append(out, p.dim)
		}
	}
	return out
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
	// Open batches whose delivery is blocked, and why.
	Blocked []BlockedBatch `json:"blocked_batches"`
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
	if rep.Sessions, err = ListSessions(ctx, m.Store.DB); err != nil {
		return nil, err
	}
	rep.Blocked, err = blockedBatches(ctx, m.Store.DB)
	return rep, err
}
