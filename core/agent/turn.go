package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
)

// bodyFrames are the frames a runtime may have the launcher emit to the
// client; start, error and done belong to the launcher.
var bodyFrames = map[abi.EventType]bool{abi.EvDelta: true, abi.EvReasoningDelta: true, abi.EvReasoningMessage: true,
	abi.EvMessage: true, abi.EvToolCall: true, abi.EvUsage: true}

// Turn runs one turn of a (as the tree holds it now: policy edits apply
// at once) in the sandbox: the runtime inside runs the loop and the tools;
// this process serves it the session's history, records what it reports
// in the session, answers its model calls (the broker: policy checked
// here, credentials used here) and its agent.* operations, and emits its
// body frames to emit. It returns the run's outcome.
func (rt *Runtime) Turn(ctx context.Context, a *Agent, sess *Session, run string, input []model.Message, emit func(abi.Event) error) error {
	host := &SessionHost{Agent: a, Session: sess, Who: ToolCaller{Session: sess.Name, Run: run, PID: os.Getpid()}, Approver: rt.Approve}
	hist, err := host.History()
	if err != nil {
		return err
	}
	c, err := rt.openTurn()
	if err != nil {
		return err
	}
	defer c.close()
	for _, m := range hist {
		if err := c.send(frame{T: "history", Messages: []model.Message{m}}); err != nil {
			return rt.lost(err)
		}
	}
	if err := c.send(frame{T: "run", Run: run, Session: sess.Name, Config: a.runtimeConfig(rt.sandbox), Messages: input}); err != nil {
		return rt.lost(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.send(frame{T: "cancel"}) })
	defer stop()
	for {
		f, err := c.recv()
		if err != nil {
			if ctx.Err() != nil {
				return abi.Errorf(abi.ECANCELED, "run %s cancelled", run)
			}
			return rt.lost(err)
		}
		done, err := rt.serveFrame(ctx, c, host, run, f, emit)
		if done || err != nil {
			return err
		}
	}
}

// serveFrame answers one frame of the runtime; done is true for the run's
// last frame.
func (rt *Runtime) serveFrame(ctx context.Context, c *conn, host *SessionHost, run string, f frame, emit func(abi.Event) error) (bool, error) {
	switch f.T {
	case "frame":
		if f.Event == nil || !bodyFrames[f.Event.Type] {
			return true, abi.Errorf(abi.EPROTO, "agent runtime sent a frame it may not")
		}
		e := *f.Event
		e.Run = run
		return false, emit(e)
	case "record":
		if f.Record != nil {
			host.Record(cleanRecord(*f.Record, run))
		}
		return false, nil
	case "save":
		return false, host.Save(f.Messages)
	// An answer the runtime no longer waits for (it was cancelled and went
	// on) cannot be sent; its remaining frames — records, done — are still
	// read, so sending answers never ends the turn.
	case "model":
		err := host.Model(ctx, f.Model, f.Messages, f.Tools, func(e abi.Event) error {
			return c.send(frame{T: "model_event", ID: f.ID, Event: &e})
		})
		_ = c.send(frame{T: "model_done", ID: f.ID, Error: toFrameError(err)})
		return false, nil
	case "op":
		res, err := host.AgentOp(ctx, f.Op, f.Args)
		_ = c.send(frame{T: "op_result", ID: f.ID, Result: res, Error: toFrameError(err)})
		return false, nil
	case "approve":
		var req ApprovalRequest
		ok, err := false, json.Unmarshal(f.Args, &req)
		if err == nil {
			ok, err = host.Approve(ctx, req)
		} else {
			err = abi.Errorf(abi.EPROTO, "approval request: %v", err)
		}
		res := json.RawMessage("false")
		if ok {
			res = json.RawMessage("true")
		}
		_ = c.send(frame{T: "approve_result", ID: f.ID, Result: res, Error: toFrameError(err)})
		return false, nil
	case "done":
		return true, f.Error.err()
	}
	return true, abi.Errorf(abi.EPROTO, "agent runtime sent an unknown frame %q", trunc(f.T))
}

// cleanRecord keeps a runtime's events.jsonl record to facts: known
// shapes, bounded fields, this run.
func cleanRecord(r Record, run string) Record {
	cut := func(s string) string {
		if len(s) > 128 {
			return s[:128]
		}
		return s
	}
	return Record{Type: cut(r.Type), Object: cut(r.Object), Status: cut(r.Status), Run: run, CallID: cut(r.CallID), Code: cut(r.Code)}
}

// lost is the error of a turn whose runtime went away.
func (rt *Runtime) lost(err error) error {
	if rt.proc != nil {
		select {
		case <-rt.proc.Done():
			return abi.Errorf(abi.EIO, "agent runtime exited (status %d)", rt.proc.Wait())
		default:
		}
	}
	if errors.Is(err, io.EOF) {
		return abi.Errorf(abi.EIO, "agent runtime ended the turn without an answer")
	}
	return abi.Errorf(abi.EIO, "agent runtime: %v", err)
}
