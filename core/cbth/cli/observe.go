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
		if s, err := rt.session(); err == nil && s.BoundThreadID != nil && *s.BoundThreadID == p.ThreadID {
			switch {
			case n.Method == codex.NoteTurnStarted:
				rt.activeTurn = p.Turn.ID
			case rt.activeTurn == p.Turn.ID:
				rt.activeTurn = ""
			}
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
		// Only the status is needed: no item is loaded.
		turns, _, err := rt.turns(t.tok.SourceThreadID, "notLoaded", func(turn codex.Turn) bool {
			return turn.ID == *a.DeliveryTurnID
		})
		if err != nil {
			continue
		}
		for _, turn := range turns {
			if turn.ID == *a.DeliveryTurnID && turn.Status != codex.TurnInProgress {
				_ = rt.observe(t.tok.SourceThreadID, turn.ID, turnEvent(codex.NoteTurnCompleted, turn.Status))
			}
		}
	}
}

// Bounds of a turn search: pages of thread/turns/list, newest first.
const (
	turnsPage     = 50
	turnsMaxPages = 20
)

// turns reads the thread's turns newest first until stop says so: with
// thread/turns/list where the server has it (no full-history hydration),
// else thread/read includeTurns. complete reports that every turn was
// read with the asked items view and none is left unread, so the absence
// of something may be concluded from it.
func (rt *runtime) turns(thread, itemsView string, stop func(codex.Turn) bool) ([]codex.Turn, bool, error) {
	if rt.caps == nil || !rt.caps.Features.TurnsList {
		th, err := rt.readThread(thread)
		if err != nil {
			return nil, false, err
		}
		complete := true
		for _, t := range th.Turns {
			complete = complete && (t.ItemsView == "" || t.ItemsView == codex.ItemsFull)
		}
		return th.Turns, complete, nil
	}
	var out []codex.Turn
	cursor := ""
	for range turnsMaxPages {
		ctx, cancel := context.WithTimeout(rt.m.ctx, 10*time.Second)
		var page codex.ThreadTurnsListResponse
		err := rt.cl.Call(ctx, codex.MethodThreadTurnsList, codex.ThreadTurnsListParams{ThreadID: thread,
			Limit: turnsPage, Cursor: cursor, ItemsView: itemsView}, &page)
		cancel()
		if err != nil {
			return out, false, err
		}
		for _, t := range page.Data {
			out = append(out, t)
			if stop != nil && stop(t) {
				return out, false, nil
			}
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			complete := true
			for _, t := range out {
				complete = complete && t.ItemsView == itemsView
			}
			return out, complete, nil
		}
		cursor = *page.NextCursor
	}
	return out, false, nil
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

// reconcileUnknown: the turn/start (or turn/steer) answer was lost. Only
// the marker on exactly one user message of the thread, read on the same
// app-server, proves acceptance; otherwise the attempt fails closed. The
// marker counts as absent only when every turn was read with full items.
func (rt *runtime) reconcileUnknown(tok delivery.Token, marker, why string) error {
	mode := delivery.ModeCLITurnStart
	if a, err := delivery.GetAttempt(rt.m.ctx, rt.m.Store.DB, tok.AttemptID); err == nil &&
		a.DeliveryRPCKind != nil && *a.DeliveryRPCKind == "turn_steer" {
		mode = delivery.ModeCLITurnSteer
	}
	evidence := "no connection to read the thread"
	if rt.cl != nil {
		found := map[string]bool{}
		turns, complete, err := rt.turns(tok.SourceThreadID, codex.ItemsFull, nil)
		for _, t := range turns {
			for _, it := range t.Items {
				if it.Type == "userMessage" && it.ClientID != nil && *it.ClientID == marker {
					found[t.ID] = true
				}
			}
		}
		switch {
		case len(found) == 1:
			for id := range found {
				return rt.accepted(tok, mode, id)
			}
		case err != nil:
			evidence = "reading the thread failed: " + err.Error()
		case len(found) > 1:
			evidence = "the marker is on several turns"
		case complete:
			evidence = "the marker is absent from the full items view (acceptance cannot be excluded)"
		default:
			evidence = "the marker was not found and the items view was not full (inconclusive)"
		}
	}
	return rt.tx(func(o *delivery.Op) error {
		_, err := delivery.Abandon(o, tok, true, "acceptance unknown: "+why+"; "+evidence)
		return err
	})
}
