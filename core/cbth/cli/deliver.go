package cli

import (
	"context"
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

// rpcTimeout bounds turn/start; past it the acceptance is unknown.
const rpcTimeout = 30 * time.Second

// deliver sends the bound thread's head batch when every gate holds: a
// capable, connected app-server, a prepared head attempt past its
// intervals, no in-flight attempt, an idle thread and the profile/batch
// policy. turn/steer stays off: an active thread means waiting.
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
	eff, snap, status, err := rt.currentProfile(s, thread)
	if err != nil {
		var blocked blockedError
		if errors.As(err, &blocked) {
			return rt.block(s, tok, string(blocked))
		}
		return err
	}
	rt.lastStatus = status
	if status != "idle" {
		return nil
	}
	if why := policyGate(s, eff, b); why != "" {
		return rt.block(s, tok, why)
	}
	return rt.send(s, tok, b, eff, snap)
}

type blockedError string

func (e blockedError) Error() string { return string(e) }

// currentProfile reads the thread's status and current permission snapshot
// through thread/resume. A fresh thread has no rollout before its first
// user message, so resume refuses it; then thread/read gives the status and
// only explicit --session-allows-*=false dimensions are trusted.
func (rt *runtime) currentProfile(s *Session, thread string) (Profile, Snapshot, string, error) {
	resume, err := rt.resume(thread)
	var rpcErr *codex.RPCError
	if errors.As(err, &rpcErr) {
		th, rerr := rt.readThreadMeta(thread)
		if rerr != nil {
			return Profile{}, Snapshot{}, "", rerr
		}
		eff, ok := explicitProfile(s)
		if !ok {
			return eff, Snapshot{}, th.Status.Type, blockedError("permission snapshot unavailable (" + rpcErr.Message +
				"); only explicit --session-allows-*=false dimensions can be trusted")
		}
		return eff, Snapshot{}, th.Status.Type, nil
	}
	if err != nil {
		return Profile{}, Snapshot{}, "", err
	}
	eff, snap, perr := rt.refreshProfile(s, resume)
	if perr != nil {
		return eff, snap, resume.Thread.Status.Type, blockedError("permission snapshot not trusted: " + perr.Error())
	}
	return eff, snap, resume.Thread.Status.Type, nil
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
			"automatic delivery needs all false (or --auto-delivery-policy trusted-all)", eff.Approval, eff.Network, eff.Write)
	}
	if b.DeliveryReadOnly == nil || !*b.DeliveryReadOnly || isTrue(b.DeliveryRequiresApproval) ||
		isTrue(b.DeliveryRequiresNetwork) || isTrue(b.DeliveryRequiresWriteAccess) {
		return "strict-safe: batch is not read-only (delivery_read_only/requires_*); manual/operator path"
	}
	return ""
}

func isTrue(b *bool) bool { return b != nil && *b }

// block records why automatic delivery is held back (once per reason).
func (rt *runtime) block(s *Session, tok delivery.Token, why string) error {
	if s.DeliveryBlockedReason != nil && *s.DeliveryBlockedReason == why {
		return nil
	}
	return rt.tx(func(o *delivery.Op) error {
		if err := setSession(o, rt.id, "", "", map[string]any{"delivery_blocked_reason": why}); err != nil {
			return err
		}
		return o.Audit(audit.Entry{Action: "cli.delivery.blocked", EntityKind: "batch", EntityID: tok.BatchID,
			SourceThreadID: tok.SourceThreadID, Reason: why, Outcome: "blocked",
			Detail: map[string]any{"managed_session_id": rt.id}})
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

// send writes the accept_pending barrier, calls turn/start and records
// the outcome: accepted, rejected before accept, or reconciled.
func (rt *runtime) send(s *Session, tok delivery.Token, b *delivery.Batch, eff Profile, snap Snapshot) error {
	reqID, marker := ids.New("rpc_"), ids.New("cbth-mk-")
	approval, sandbox := PinnedPolicy(eff, snap)
	var begun delivery.Result
	err := rt.tx(func(o *delivery.Op) error {
		if err := setSession(o, rt.id, "", "", map[string]any{"delivery_blocked_reason": nil}); err != nil {
			return err
		}
		var err error
		begun, err = delivery.BeginAccept(o, tok, delivery.ModeCLITurnStart, reqID, marker, rt.id, s.SessionEpoch)
		if err != nil || begun.Outcome != delivery.OutcomeOK {
			return err
		}
		return o.Audit(audit.Entry{Action: "cli.delivery.allow", EntityKind: "batch", EntityID: tok.BatchID,
			SourceThreadID: tok.SourceThreadID, Outcome: "ok", Reason: "policy " + s.AutoDeliveryPolicy,
			Detail: map[string]any{"attempt_id": tok.AttemptID, "effective": eff, "managed_session_id": rt.id,
				"session_epoch": s.SessionEpoch, "delivery_rpc_request_id": reqID,
				"approval_policy": approval, "sandbox_policy": sandbox}})
	})
	if err != nil || begun.Outcome != delivery.OutcomeOK {
		return err
	}
	params := codex.TurnStartParams{ThreadID: tok.SourceThreadID, ClientUserMessageID: marker,
		Input:          []codex.UserInput{{Type: "text", Text: rt.prompt(b, tok, marker)}},
		ApprovalPolicy: approval, SandboxPolicy: sandbox}
	ctx, cancel := context.WithTimeout(rt.m.ctx, rpcTimeout)
	defer cancel()
	var resp codex.TurnStartResponse
	callErr := rt.cl.Call(ctx, codex.MethodTurnStart, params, &resp)
	var rpcErr *codex.RPCError
	switch {
	case callErr == nil && resp.Turn.ID != "":
		return rt.accepted(tok, resp.Turn.ID)
	case errors.As(callErr, &rpcErr):
		return rt.tx(func(o *delivery.Op) error {
			_, err := delivery.RejectBeforeAccept(o, tok)
			if err == nil {
				err = o.Audit(audit.Entry{Action: "cli.turn_start.rejected", EntityKind: "attempt", EntityID: tok.AttemptID,
					SourceThreadID: tok.SourceThreadID, Reason: rpcErr.Error(), Outcome: "rejected_before_accept"})
			}
			return err
		})
	default:
		return rt.reconcileUnknown(tok, marker, fmt.Sprint(callErr))
	}
}

func (rt *runtime) accepted(tok delivery.Token, turnID string) error {
	return rt.tx(func(o *delivery.Op) error {
		_, err := delivery.NoteAccepted(o, tok, delivery.Accepted{Mode: delivery.ModeCLITurnStart, DeliveryTurnID: turnID})
		return err
	})
}

// reconcileUnknown: the turn/start answer was lost. Only the marker on
// exactly one user message of the thread, read on the same app-server,
// proves acceptance; otherwise the attempt fails closed.
func (rt *runtime) reconcileUnknown(tok delivery.Token, marker, why string) error {
	if rt.cl != nil {
		if th, err := rt.readThread(tok.SourceThreadID); err == nil {
			var turns []string
			for _, t := range th.Turns {
				for _, it := range t.Items {
					if it.Type == "userMessage" && it.ClientID != nil && *it.ClientID == marker {
						turns = append(turns, t.ID)
					}
				}
			}
			if len(turns) == 1 {
				return rt.accepted(tok, turns[0])
			}
		}
	}
	return rt.tx(func(o *delivery.Op) error {
		_, err := delivery.Abandon(o, tok, true, "turn/start acceptance unknown: "+why)
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
