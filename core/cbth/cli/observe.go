package cli

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/wire/codex"
)

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// drainNotes handles queued notifications in arrival order.
func (rt *runtime) drainNotes() {
	rt.mu.Lock()
	notes := rt.notes
	rt.notes = nil
	rt.mu.Unlock()
	for _, n := range notes {
		if err := rt.handleNote(n); err != nil {
			rt.m.Log.Printf("cli %s: %s: %v", rt.id, n.Method, err)
		}
	}
}

func (rt *runtime) handleNote(n codex.Notification) error {
	switch n.Method {
	case codex.NoteThreadStarted:
		var p codex.ThreadStartedNotification
		if json.Unmarshal(n.Params, &p) != nil || p.Thread.ID == "" {
			return nil
		}
		return rt.bindFresh(p.Thread.ID)
	case codex.NoteThreadStatusChanged:
		var p codex.ThreadStatusChangedNotification
		if json.Unmarshal(n.Params, &p) != nil {
			return nil
		}
		if s, err := rt.session(); err == nil && s.BoundThreadID != nil && *s.BoundThreadID == p.ThreadID {
			rt.lastStatus = p.Status.Type
			if p.Status.Type == "idle" {
				rt.kick()
			}
		}
	case codex.NoteTurnStarted, codex.NoteTurnCompleted:
		var p codex.TurnNotification
		if json.Unmarshal(n.Params, &p) != nil {
			return nil
		}
		return rt.observe(p.ThreadID, p.Turn.ID, turnEvent(n.Method, p.Turn.Status))
	}
	return nil
}

// turnEvent maps a notification to the canonical last_observed_turn_event.
func turnEvent(method, status string) delivery.TurnEvent {
	if method == codex.NoteTurnStarted {
		return delivery.TurnStarted
	}
	switch status {
	case codex.TurnCompleted:
		return delivery.TurnCompleted
	case codex.TurnInterrupted:
		return delivery.TurnInterrupted
	case codex.TurnFailed:
		return delivery.TurnFailed
	}
	return ""
}

// bindFresh binds a --new-thread session to the first thread/started.
func (rt *runtime) bindFresh(thread string) error {
	s, err := rt.session()
	if err != nil || s.BoundThreadID != nil || s.SessionState != StateLive {
		return err
	}
	err = rt.tx(func(o *delivery.Op) error {
		return setSession(o, rt.id, "cli.session.bind", "first thread/started of --new-thread",
			map[string]any{"bound_thread_id": thread})
	})
	if err != nil {
		return err
	}
	rt.m.Log.Printf("cli %s: bound thread id %s", rt.id, thread)
	return nil
}

// observe records an event of a turn on the bound thread. Only the head
// attempt's delivery_turn_id, on this session and its current epoch, can
// close a batch; anything else is audited as evidence only.
func (rt *runtime) observe(thread, turnID string, ev delivery.TurnEvent) error {
	s, err := rt.session()
	if err != nil || s.BoundThreadID == nil || *s.BoundThreadID != thread || ev == "" {
		return err
	}
	var tok delivery.Token
	var msid string
	var epoch int64
	err = rt.m.Store.DB.QueryRowContext(rt.m.ctx, `SELECT source_thread_id, batch_id, attempt_id, generation,
		COALESCE(managed_session_id,''), COALESCE(session_epoch,0) FROM attempts
		WHERE source_thread_id = ? AND delivery_turn_id = ? ORDER BY created_at DESC LIMIT 1`, thread, turnID).
		Scan(&tok.SourceThreadID, &tok.BatchID, &tok.AttemptID, &tok.Generation, &msid, &epoch)
	if err != nil {
		return nil // not a delivered turn (the user's own)
	}
	return rt.tx(func(o *delivery.Op) error {
		out := delivery.OutcomeStaleOrSuperseded
		if msid == rt.id && epoch == s.SessionEpoch {
			r, err := delivery.NoteTurnEvent(o, tok, turnID, ev)
			if err != nil {
				return err
			}
			out = r.Outcome
		}
		return o.Audit(audit.Entry{Action: "cli.turn_event", EntityKind: "attempt", EntityID: tok.AttemptID,
			SourceThreadID: thread, To: string(ev), Outcome: string(out), Detail: map[string]any{"delivery_turn_id": turnID,
				"managed_session_id": rt.id, "session_epoch": s.SessionEpoch, "attempt_epoch": epoch}})
	})
}

// reconcileTracked reads the thread after a reconnect to the same
// app-server: a tracked turn that ended while the socket was down is
// observed from the current state.
func (rt *runtime) reconcileTracked() {
	toks, err := rt.inflight()
	if err != nil || rt.cl == nil {
		return
	}
	for _, t := range toks {
		if !t.tracking {
			continue
		}
		a, err := delivery.GetAttempt(rt.m.ctx, rt.m.Store.DB, t.tok.AttemptID)
		if err != nil || a.DeliveryTurnID == nil {
			continue
		}
		th, err := rt.readThread(t.tok.SourceThreadID)
		if err != nil {
			continue
		}
		for _, turn := range th.Turns {
			if turn.ID == *a.DeliveryTurnID && turn.Status != codex.TurnInProgress {
				_ = rt.observe(t.tok.SourceThreadID, turn.ID, turnEvent(codex.NoteTurnCompleted, turn.Status))
			}
		}
	}
}

func (rt *runtime) readThread(thread string) (*codex.Thread, error) {
	ctx, cancel := context.WithTimeout(rt.m.ctx, 10*time.Second)
	defer cancel()
	var r codex.ThreadReadResponse
	if err := rt.cl.Call(ctx, codex.MethodThreadRead, codex.ThreadReadParams{ThreadID: thread, IncludeTurns: true}, &r); err != nil {
		return nil, err
	}
	return &r.Thread, nil
}
