package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/wire/codex"
)

// Auto-delivery policies (--auto-delivery-policy).
const (
	PolicyStrictSafe = "strict-safe"
	PolicyTrustedAll = "trusted-all"
)

// rpcTimeout bounds turn/start and turn/steer; past it acceptance is unknown.
const rpcTimeout = 30 * time.Second

// view is what the adapter reads of the bound thread before a delivery.
type view struct {
	eff    Profile
	snap   Snapshot
	status string
	resume *codex.ThreadResumeResponse // nil when the thread cannot be resumed yet
}

// deliver sends the bound thread's head batch when every gate holds: a
// capable, connected app-server, a prepared head attempt past its
// intervals, no in-flight attempt and the profile/batch policy. An idle
// thread gets turn/start; an active one gets turn/steer only with
// --enable-turn-steer and where the seed allows it, else the batch waits
// for idle. A batch the safety gates refuse becomes manual_resolution_only
// with the reason: it never waits silently as automatic.
func (rt *runtime) deliver(s *Session) error {
	if rt.cl == nil || s.BoundThreadID == nil || s.CapabilityState != "ok" ||
		(s.SessionState != StateLive && s.SessionState != StateDetached) {
		return nil
	}
	thread := *s.BoundThreadID
	if toks, err := rt.inflight(); err != nil || len(toks) > 0 {
		return err
	}
	tok, ok, err := readyHead(rt.m.ctx, rt, thread)
	if err != nil || !ok {
		return err
	}
	b, err := delivery.Inspect(rt.m.ctx, rt.m.Store.DB, tok.BatchID)
	if err != nil {
		return err
	}
	v, err := rt.currentView(s, thread)
	if err != nil {
		var blocked blockedError
		if errors.As(err, &blocked) {
			return rt.block(s, tok, string(blocked))
		}
		return err
	}
	rt.lastStatus = v.status
	if why := policyGate(s, v.eff, b); why != "" {
		return rt.block(s, tok, why)
	}
	switch v.status {
	case "idle":
		return rt.send(s, tok, b, v)
	case "active":
		if steer, why := rt.steerable(s, v, b); steer {
			return rt.steer(s, tok, b, v)
		} else if why != "" {
			rt.noteWait(s, tok, why)
		}
	}
	return nil
}

type blockedError string

func (e blockedError) Error() string { return string(e) }

// currentView reads the thread's status and current permission snapshot
// through thread/resume. A fresh thread has no rollout before its first
// user message, so resume refuses it; then thread/read gives the status and
// only explicit --session-allows-*=false dimensions are trusted.
func (rt *runtime) currentView(s *Session, thread string) (view, error) {
	resume, err := rt.resume(thread)
	var rpcErr *codex.RPCError
	if errors.As(err, &rpcErr) {
		th, rerr := rt.readThreadMeta(thread)
		if rerr != nil {
			return view{}, rerr
		}
		eff, ok := explicitProfile(s)
		if !ok {
			return view{}, blockedError("permission snapshot unavailable (" + rpcErr.Message +
				"); only explicit --session-allows-*=false dimensions can be trusted: start the session with " +
				"cbth new|resume " + StrictSafeSessionFlags)
		}
		return view{eff: eff, status: th.Status.Type}, nil
	}
	if err != nil {
		return view{}, err
	}
	eff, snap, perr := rt.refreshProfile(s, resume)
	if perr != nil {
		return view{}, blockedError("permission snapshot not trusted: " + perr.Error())
	}
	if resume.ActivePermissionProfile != nil {
		snap.ActiveProfile = resume.ActivePermissionProfile.ID
		if err := CheckActiveProfile(snap); err != nil {
			return view{}, blockedError("permission snapshot not trusted: " + err.Error())
		}
	}
	return view{eff: eff, snap: snap, status: resume.Thread.Status.Type, resume: resume}, nil
}

// explicitProfile is the profile when no snapshot can be read: explicit
// false stays false (false AND anything), everything else counts as allowed.
func explicitProfile(s *Session) (Profile, bool) {
	p := Profile{Approval: s.RequestedAllowsApproval != "false", Network: s.RequestedAllowsNetwork != "false",
		Write: s.RequestedAllowsWriteAccess != "false"}
	return p, p.StrictSafe() || s.AutoDeliveryPolicy == PolicyTrustedAll
}

func (rt *runtime) readThreadMeta(thread string) (*codex.Thread, error) {
	ctx, cancel := context.WithTimeout(rt.m.ctx, 10*time.Second)
	defer cancel()
	var r codex.ThreadReadResponse
	if err := rt.cl.Call(ctx, codex.MethodThreadRead, codex.ThreadReadParams{ThreadID: thread}, &r); err != nil {
		return nil, fmt.Errorf("thread/read %s: %w", thread, err)
	}
	return &r.Thread, nil
}

// readyHead finds the thread in the CLI fair-ready order.
func readyHead(ctx context.Context, rt *runtime, thread string) (delivery.Token, bool, error) {
	entries, err := delivery.ReadyOrder(ctx, rt.m.Store, delivery.TargetCLI)
	if err != nil {
		return delivery.Token{}, false, err
	}
	for _, e := range entries {
		if e.SourceThreadID == thread {
			return e.Token, true, nil
		}
	}
	return delivery.Token{}, false, nil
}

// policyGate is the strict-safe rule: effective profile all false and a
// read-only batch needing no approval, network or write access, unless
// the session opted into trusted-all.
func policyGate(s *Session, eff Profile, b *delivery.Batch) string {
	if s.AutoDeliveryPolicy == PolicyTrustedAll {
		return ""
	}
	if !eff.StrictSafe() {
		return fmt.Sprintf("strict-safe: effective session profile allows approval=%t network=%t write_access=%t; "+
			"automatic delivery needs all false: start the session with cbth new|resume %s (or --auto-delivery-policy trusted-all)",
			eff.Approval, eff.Network, eff.Write, StrictSafeSessionFlags)
	}
	if !readOnlyBatch(b) {
		return "strict-safe: batch is not read-only (delivery_read_only/requires_*): submit its jobs with " + ReadOnlyJobFlags +
			" (or start the session with --auto-delivery-policy trusted-all); manual/operator path"
	}
	return ""
}

func readOnlyBatch(b *delivery.Batch) bool {
	return b.DeliveryReadOnly != nil && *b.DeliveryReadOnly && !isTrue(b.DeliveryRequiresApproval) &&
		!isTrue(b.DeliveryRequiresNetwork) && !isTrue(b.DeliveryRequiresWriteAccess)
}

func isTrue(b *bool) bool { return b != nil && *b }

// block applies a safety gate's refusal the seed's way: the prepared head
// attempt is abandoned and its batch becomes manual_resolution_only with
// the reason, for the operator (cbth batch close-head) or its redelivery
// window. The session records the reason too.
func (rt *runtime) block(s *Session, tok delivery.Token, why string) error {
	return rt.tx(func(o *delivery.Op) error {
		if err := setSession(o, rt.id, "", "", map[string]any{"delivery_blocked_reason": why}); err != nil {
			return err
		}
		r, err := delivery.Abandon(o, tok, true, "safety gate: "+why)
		if err != nil {
			return err
		}
		return o.Audit(audit.Entry{Action: "cli.delivery.blocked", EntityKind: "batch", EntityID: tok.BatchID,
			SourceThreadID: tok.SourceThreadID, Reason: why, Outcome: string(delivery.ReplayManualResolutionOnly),
			Detail: map[string]any{"managed_session_id": rt.id, "attempt_id": tok.AttemptID, "abandon": r.Outcome}})
	})
}

// noteWait records (once per reason) why a deliverable batch waits.
func (rt *runtime) noteWait(s *Session, tok delivery.Token, why string) {
	if s.DeliveryBlockedReason != nil && *s.DeliveryBlockedReason == why {
		return
	}
	_ = rt.tx(func(o *delivery.Op) error {
		return setSession(o, rt.id, "cli.delivery.wait", why, map[string]any{"delivery_blocked_reason": why})
	})
}

func (rt *runtime) resume(thread string) (*codex.ThreadResumeResponse, error) {
	ctx, cancel := context.WithTimeout(rt.m.ctx, 20*time.Second)
	defer cancel()
	var r codex.ThreadResumeResponse
	err := rt.cl.Call(ctx, codex.MethodThreadResume, codex.ThreadResumeParams{ThreadID: thread, ExcludeTurns: true}, &r)
	if err != nil {
		return nil, fmt.Errorf("thread/resume %s: %w", thread, err)
	}
	return &r, nil
}

// begin writes the accept_pending barrier and the allow audit row.
func (rt *runtime) begin(s *Session, tok delivery.Token, kind delivery.DeliveryMode, reqID, marker string,
	detail map[string]any) (bool, error) {
	var begun delivery.Result
	err := rt.tx(func(o *delivery.Op) error {
		if err := setSession(o, rt.id, "", "", map[string]any{"delivery_blocked_reason": nil}); err != nil {
			return err
		}
		var err error
		begun, err = delivery.BeginAccept(o, tok, kind, reqID, marker, rt.id, s.SessionEpoch)
		if err != nil || begun.Outcome != delivery.OutcomeOK {
			return err
		}
		detail["attempt_id"], detail["managed_session_id"], detail["session_epoch"] = tok.AttemptID, rt.id, s.SessionEpoch
		detail["delivery_rpc_request_id"], detail["delivery_mode"] = reqID, kind
		return o.Audit(audit.Entry{Action: "cli.delivery.allow", EntityKind: "batch", EntityID: tok.BatchID,
			SourceThreadID: tok.SourceThreadID, Outcome: string(delivery.OutcomeOK), Reason: "policy " + s.AutoDeliveryPolicy,
			Detail: detail})
	})
	return err == nil && begun.Outcome == delivery.OutcomeOK, err
}

// send writes the accept_pending barrier, calls turn/start with the pinned
// permissions, restores the thread's own settings for the user's later
// turns, and records the outcome: accepted, rejected before accept, or
// reconciled.
func (rt *runtime) send(s *Session, tok delivery.Token, b *delivery.Batch, v view) error {
	reqID, marker := ids.New("rpc_"), ids.New("cbth-mk-")
	approval, sandbox := PinnedPolicy(v.eff, v.snap)
	profile := ProfileID(v.eff, v.snap, rt.caps != nil && rt.caps.Features.PermissionProfile)
	detail := map[string]any{"effective": v.eff, "approval_policy": approval}
	if profile != "" {
		sandbox = nil
		detail["permissions"] = profile
	} else {
		detail["sandbox_policy"] = sandbox
	}
	if ok, err := rt.begin(s, tok, delivery.ModeCLITurnStart, reqID, marker, detail); !ok {
		return err
	}
	params := codex.TurnStartParams{ThreadID: tok.SourceThreadID, ClientUserMessageID: marker,
		Input:          []codex.UserInput{{Type: "text", Text: rt.prompt(b, tok, marker)}},
		ApprovalPolicy: approval, SandboxPolicy: sandbox, Permissions: profile}
	ctx, cancel := context.WithTimeout(rt.m.ctx, rpcTimeout)
	defer cancel()
	var resp codex.TurnStartResponse
	callErr := rt.cl.Call(ctx, codex.MethodTurnStart, params, &resp)
	// turn/start's policies stick to the thread; the delivered turn has
	// already captured them, so the user's settings come back at once.
	rt.restoreSettings(tok, v, approval, sandbox, profile)
	var rpcErr *codex.RPCError
	switch {
	case callErr == nil && resp.Turn.ID != "":
		return rt.accepted(tok, delivery.ModeCLITurnStart, resp.Turn.ID)
	case errors.As(callErr, &rpcErr):
		return rt.rejected(tok, "turn/start", rpcErr)
	default:
		return rt.reconcileUnknown(tok, marker, fmt.Sprint(callErr))
	}
}

// restoreSettings puts back the approval policy and sandbox (or permission
// profile) the thread had before the delivery, when the delivery changed
// them: a delivery must not change the user's session. Without a trusted
// pre-delivery reading there is nothing to restore to (audited).
func (rt *runtime) restoreSettings(tok delivery.Token, v view, approval, sandbox json.RawMessage, profile string) {
	if v.resume == nil {
		rt.auditRestore(tok, "skipped", "the thread's settings could not be read before the delivery", nil)
		return
	}
	p := codex.ThreadSettingsUpdateParams{ThreadID: tok.SourceThreadID, ApprovalPolicy: v.resume.ApprovalPolicy}
	if v.snap.ActiveProfile != "" && rt.caps != nil && rt.caps.Features.PermissionProfile {
		p.Permissions = v.snap.ActiveProfile
	} else {
		p.SandboxPolicy = v.resume.Sandbox
	}
	same := jsonEqual(approval, v.resume.ApprovalPolicy) &&
		(profile != "" && profile == p.Permissions || profile == "" && p.Permissions == "" && jsonEqual(sandbox, p.SandboxPolicy))
	if same {
		return
	}
	ctx, cancel := context.WithTimeout(rt.m.ctx, 20*time.Second)
	defer cancel()
	err := rt.cl.Call(ctx, codex.MethodThreadSettingsUpdate, p, nil)
	outcome, why := "restored", ""
	if err != nil {
		outcome, why = "failed", err.Error()
		rt.warn("could not restore the thread's settings after a delivery: " + why)
	}
	rt.auditRestore(tok, outcome, why, p)
}

func (rt *runtime) auditRestore(tok delivery.Token, outcome, why string, p any) {
	_ = rt.tx(func(o *delivery.Op) error {
		return o.Audit(audit.Entry{Action: "cli.settings.restore", EntityKind: "attempt", EntityID: tok.AttemptID,
			SourceThreadID: tok.SourceThreadID, Outcome: outcome, Reason: why, Detail: map[string]any{"settings": p}})
	})
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	var xv, yv any
	if json.Unmarshal(x.Bytes(), &xv) != nil || json.Unmarshal(y.Bytes(), &yv) != nil {
		return bytes.Equal(x.Bytes(), y.Bytes())
	}
	xb, _ := json.Marshal(xv) // maps marshal with sorted keys
	yb, _ := json.Marshal(yv)
	return bytes.Equal(xb, yb)
}

func (rt *runtime) rejected(tok delivery.Token, method string, rpcErr *codex.RPCError) error {
	return rt.tx(func(o *delivery.Op) error {
		_, err := delivery.RejectBeforeAccept(o, tok)
		if err == nil {
			err = o.Audit(audit.Entry{Action: "cli." + strings.ReplaceAll(method, "/", "_") + ".rejected",
				EntityKind: "attempt", EntityID: tok.AttemptID, SourceThreadID: tok.SourceThreadID,
				Reason: rpcErr.Error(), Outcome: "rejected_before_accept"})
		}
		return err
	})
}

func (rt *runtime) accepted(tok delivery.Token, mode delivery.DeliveryMode, turnID string) error {
	return rt.tx(func(o *delivery.Op) error {
		_, err := delivery.NoteAccepted(o, tok, delivery.Accepted{Mode: mode, DeliveryTurnID: turnID})
		return err
	})
}

// prompt is the continuation prompt: marker, batch summary, inline payload.
func (rt *runtime) prompt(b *delivery.Batch, tok delivery.Token, marker string) string {
	var w strings.Builder
	fmt.Fprintf(&w, "[cbth] Background job results for this thread are ready (delivery marker %s).\n", marker)
	fmt.Fprintf(&w, "batch_id: %s  attempt_id: %s  generation: %d\n\nBatch summary:\n", tok.BatchID, tok.AttemptID, tok.Generation)
	if b.Summary != nil {
		w.WriteString(*b.Summary)
	}
	w.WriteString("\n\nInline payload:\n")
	rows, err := rt.m.Store.DB.QueryContext(rt.m.ctx, `SELECT j.job_id, j.status, j.task_kind, j.task_summary,
		COALESCE(j.result_summary,''), COALESCE(j.failure_reason,''), COALESCE(a.artifact_id,''),
		COALESCE(a.managed_path,''), COALESCE(a.size_bytes,0) FROM batch_jobs bj JOIN jobs j ON j.job_id = bj.job_id
		LEFT JOIN artifacts a ON a.artifact_id = j.artifact_id WHERE bj.batch_id = ? ORDER BY bj.position`, tok.BatchID)
	if err == nil {
		defer rows.Close()
		for rows.Next() {
			var id, st, kind, sum, res, fail, art, path string
			var size int64
			if rows.Scan(&id, &st, &kind, &sum, &res, &fail, &art, &path, &size) != nil {
				continue
			}
			fmt.Fprintf(&w, "- job %s [%s] %s: %s\n", id, st, kind, sum)
			if res != "" {
				fmt.Fprintf(&w, "  result: %s\n", res)
			}
			if fail != "" {
				fmt.Fprintf(&w, "  failure: %s\n", fail)
			}
			if art != "" {
				rt.inlineArtifact(&w, art, path, size)
			}
		}
	}
	w.WriteString("\nContinue the conversation taking these results into account.\n")
	return w.String()
}

func (rt *runtime) inlineArtifact(w *strings.Builder, id, path string, size int64) {
	if size > rt.m.Cfg.MaxInlineArtifactBytes {
		fmt.Fprintf(w, "  artifact %s: %d bytes at %s (too large to inline)\n", id, size, path)
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(w, "  artifact %s: unreadable (%v)\n", id, err)
		return
	}
	fmt.Fprintf(w, "  artifact %s (%d bytes):\n%s\n", id, size, data)
}
