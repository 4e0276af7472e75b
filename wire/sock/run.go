package sock

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/ids"
)

// run is one active run: a Runner call and the frames it emits.
type run struct {
	h      *hub
	sess   *session
	rec    *runRec
	ctx    context.Context
	cancel context.CancelCauseFunc
	temp   *conn // the connection whose close cancels the run; nil unless temp

	emitMu   sync.Mutex // one frame at a time, in call order
	finished bool       // Run returned; later emits fail
	lastErr  abi.Code   // code of the last emitted frame if it was an error
}

// send handles a send request: a retry of a known client id replays its
// run, a session busy with another run is EBUSY, else a new run starts and
// c subscribes to it.
func (h *hub) send(c *conn, req Request) {
	s, err := h.acquire(SessionKey{UID: c.cred.UID, Name: req.Session})
	if err != nil {
		c.reply(errorEvent(err))
		return
	}
	defer h.release(s)
	r, err := h.start(s, c, req)
	if err != nil {
		c.reply(errorEvent(err))
		return
	}
	if r == nil {
		return // a retry, being replayed
	}
	if req.Temp && !c.addTemp(r) {
		r.cancel(errTempClosed)
	}
	if req.Temp && c.hold(s) {
		h.ref(s)
	}
	go r.produce(Turn{
		Session: s.key, Run: r.rec.id, Input: req.Input, Cwd: req.Cwd, Peer: c.cred,
		History: s.historySnapshot(),
	})
}

// start registers the run of req, or arranges the replay of an earlier run
// with the same client id (then the run is nil).
func (h *hub) start(s *session, c *conn, req Request) (*run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return nil, s.broken
	}
	if rec := s.byClient[req.ID]; rec != nil {
		if rec.last == 0 {
			// Still running: from its first frame on, then live.
			h.subscribeLocked(s, c, rec, rec.base, true)
		} else {
			h.replay(s, c, rec.base, rec.last)
		}
		return nil, nil
	}
	if s.run != nil {
		return nil, abi.Errorf(abi.EBUSY, "session %s is busy with run %s", req.Session, s.run.rec.id)
	}
	// Reserve the producer under hub.mu so a stopping Serve either sees it
	// or refuses it.
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, abi.Errorf(abi.EHOSTDOWN, "server is shutting down")
	}
	h.runWG.Add(1)
	h.mu.Unlock()

	rec := &runRec{id: ids.New("r"), client: req.ID, base: s.lastID.Load(), size: int64(len(req.Input))}
	if rec.size <= pastCacheBytes/4 {
		rec.input = append(json.RawMessage(nil), req.Input...)
	}
	// The send's record must fit the quotas with room left for the run's
	// closing frames; a session or uid that is full refuses new runs.
	est := int64(len(req.Input)+len(req.ID)+len(req.Cwd)) + 128
	if err := s.quotaLocked(h, est, false); err != nil {
		h.runWG.Done()
		return nil, err
	}
	before := s.log.Size()
	off, err := s.log.Record(SendRecord{ID: req.ID, Run: rec.id, Cwd: req.Cwd, Temp: req.Temp, Input: req.Input})
	rec.sendOff = off
	_ = h.usage.charge(s.key.UID, s.log.Size()-before-est, 0, true) // the estimate, corrected
	if err != nil {
		h.runWG.Done()
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(h.runCtx)
	r := &run{h: h, sess: s, rec: rec, ctx: ctx, cancel: cancel}
	if req.Temp {
		r.temp = c
	}
	s.byClient[req.ID] = rec
	s.run = r
	s.sent.Store(true)
	if !req.Temp {
		s.durable.Store(true)
	}
	h.subscribeLocked(s, c, rec, rec.base, false)
	h.mu.Lock()
	h.runs[rec.id] = r
	s.refs++ // the run's own reference, released when it is done
	h.mu.Unlock()
	return r, nil
}

// cancel cancels a run of c's uid; any other run id is ENOENT, so a uid
// cannot even learn that another uid's run exists.
func (h *hub) cancel(c *conn, runID string) {
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	if r == nil || r.sess.key.UID != c.cred.UID {
		c.reply(errorEvent(abi.Errorf(abi.ENOENT, "no active run %q", truncate(runID))))
		return
	}
	r.cancel(errCancelRequest)
}

// produce calls the Runner and then writes the run's terminal frames.
func (r *run) produce(t Turn) {
	defer r.h.runWG.Done()
	s := r.sess
	// emit waits on s.cond for subscribers; cancellation must wake it.
	stop := context.AfterFunc(r.ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	err := r.call(t)
	cancelled := r.ctx.Err() != nil // before finish: a later cancel changes nothing
	stop()
	r.finish(err, cancelled)
}

// call runs the Runner, turning a panic into an error so one bad turn
// does not take the daemon down.
func (r *run) call(t Turn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.h.logf("run %s: runner panicked: %v", r.rec.id, p)
			err = abi.Errorf(abi.EIO, "runner panicked: %v", p)
		}
	}()
	return r.h.srv.Runner.Run(r.ctx, t, r.emit)
}

// emit is the emit func of the Runner: see Runner.
func (r *run) emit(e abi.Event) error {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	if r.finished {
		return abi.Errorf(abi.EINVAL, "run %s: emit after Run returned", r.rec.id)
	}
	if err := r.ctx.Err(); err != nil {
		return fmt.Errorf("run %s: %w", r.rec.id, context.Cause(r.ctx))
	}
	if e.Type == abi.EvDone {
		return nil // the Server writes the one done frame
	}
	s := r.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := s.appendLocked(r.rec, e, false)
	if err != nil {
		return err
	}
	r.lastErr = ""
	if e.Type == abi.EvError {
		r.lastErr = e.Code
	}
	// Backpressure: the run may get at most maxLag frames ahead of its
	// slowest subscriber. The frames in between are on disk, not in memory,
	// so a client that stops reading still stops the run after a bounded
	// distance, without a goroutine handoff for every frame.
	for r.ctx.Err() == nil && id > maxLag && s.behindLocked(id-maxLag) {
		s.cond.Wait()
	}
	if err := r.ctx.Err(); err != nil {
		return fmt.Errorf("run %s: %w", r.rec.id, context.Cause(r.ctx))
	}
	return nil
}

// maxLag is how many frames a run may be ahead of its slowest subscriber.
const maxLag = 32

// behindLocked reports whether a subscriber has yet to write frame id.
func (s *session) behindLocked(id uint64) bool {
	for _, sb := range s.subs {
		if sb.cursor < id {
			return true
		}
	}
	return false
}

// finish writes the run's terminal frames: an error frame when the Runner
// failed (unless it just emitted that error itself), then the one done:
// ok when Run returned nil, cancelled when it returned an error after its
// context was cancelled, else error.
func (r *run) finish(err error, cancelled bool) {
	h := r.h
	// Runner returned: nothing left to cancel, so a cancel from now on is
	// ENOENT, even before the done frame is out.
	h.mu.Lock()
	delete(h.runs, r.rec.id)
	h.mu.Unlock()
	r.emitMu.Lock()
	r.finished = true
	lastErr := r.lastErr
	r.emitMu.Unlock()

	status := abi.StatusOK
	switch {
	case err == nil:
	case cancelled:
		status = abi.StatusCancelled
	default:
		status = abi.StatusError
	}
	s := r.sess
	s.mu.Lock()
	if status == abi.StatusError && lastErr != abi.CodeOf(err) {
		if _, aerr := s.appendLocked(r.rec, abi.ErrorEvent(r.rec.id, err), true); aerr != nil {
			r.h.logf("session %s: run %s: failed to log its error frame: %v", s.key, r.rec.id, aerr)
		}
	}
	if _, aerr := s.appendLocked(r.rec, abi.DoneEvent(r.rec.id, status), true); aerr != nil {
		r.h.logf("session %s: run %s: failed to log its done frame: %v", s.key, r.rec.id, aerr)
	}
	// Idle from now: the next send may start while subscribers still write
	// this run's last frames, since they write in log order anyway.
	s.run = nil
	s.mu.Unlock()

	r.cancel(nil) // release the context
	if r.temp != nil {
		r.temp.removeTemp(r)
	}
	h.release(s)
}
