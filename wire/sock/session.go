package sock

import (
	"container/list"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/sockstore"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// session is the in-memory side of one open session: its log, the active
// run, its subscribers and what was rebuilt from the log.
//
// Lock order: session.mu, then conn.mu, then hub.mu.
type session struct {
	h     *hub
	key   SessionKey
	refs  int           // guarded by hub.mu; idle at zero
	idle  *list.Element // guarded by hub.mu; in hub.idle while idle
	ready chan struct{} // closed once loaded
	err   error         // load failure, set before ready is closed
	log   Log

	// lastID is the newest event id subscribers may send: set under mu
	// after the frame is appended (and, for done, synced).
	lastID atomic.Uint64

	// failed mirrors broken != nil for release, which holds hub.mu only.
	failed atomic.Bool
	// sent and durable say whether any send, and any send without temp,
	// started a run here; a session only temp sends used is dropped from
	// the Store once nothing holds it. Set under mu, read under hub.mu
	// once refs reached zero (no run can be starting then).
	sent, durable atomic.Bool

	mu       sync.Mutex
	cond     sync.Cond // on mu: a frame was published, a cursor moved, a subscriber ended or must re-check
	broken   error     // the log failed; the session takes no more frames
	run      *run      // the active run; nil when idle
	byClient map[string]*runRec
	history  []pastRef // completed ok runs, oldest first: an index, not their content
	subs     map[*conn]*sub

	// past holds earlier runs already read back from the log for a turn,
	// so the next turn of a busy session does not decode its whole replay
	// window again. Bounded by pastCacheBytes per session (oldest out);
	// guarded by pastMu, not mu, because turns read history while the
	// session appends.
	pastMu    sync.Mutex
	past      map[string]pastEntry
	pastOrder []string
	pastBytes int64
}

// pastEntry is one cached earlier run and the bytes it counts (its
// pastRef.size).
type pastEntry struct {
	x Exchange
	n int64
}

// pastCacheBytes bounds the decoded history a session keeps in memory:
// a chat of short turns replays from memory; long inputs and answers are
// read from the log each time (a turn's cost stays flat either way, and
// 64 idle sessions hold at most 4 MiB of it).
const pastCacheBytes = 64 << 10

// runRec is what a session knows about one of its runs.
type runRec struct {
	id      string
	client  string // the send's client id; "" for a run missing from the index
	sendOff int64  // offset of its record in the send index; -1 if missing
	base    uint64 // last event id before the run's first frame
	last    uint64 // event id of its done frame; 0 while it runs
	status  string
	size    int64 // bytes of its input and of its message and tool_call frames so far

	// A live run keeps its input and its message and tool_call events
	// while they fit the history cache's share, so that once it ends ok
	// the next turn of the session has it without reading the log back.
	// input is nil for a run that does not fit (or was loaded from the
	// log): the next turn reads it back.
	input  json.RawMessage
	events []abi.Event
}

// pastRef locates a completed run in the log, for Turn.History: a few
// words per run, whatever the size of its input and answer.
type pastRef struct {
	run        string
	sendOff    int64
	base, last uint64
	size       int64
}

// maxIdleSessions is how many sessions without run or subscriber stay
// open, so a client sending turn after turn does not reload its session's
// log each time; beyond it the least recently used one is closed.
const maxIdleSessions = 64

// acquire returns the open session of key, opening and loading it if
// needed, with one more reference the caller must release.
func (h *hub) acquire(key SessionKey) (*session, error) {
	h.mu.Lock()
	s := h.sessions[key]
	if s != nil {
		s.refs++
		if s.idle != nil {
			h.idle.Remove(s.idle)
			s.idle = nil
		}
		h.mu.Unlock()
		<-s.ready
		if s.err != nil {
			return nil, s.err
		}
		return s, nil
	}
	s = &session{h: h, key: key, refs: 1, ready: make(chan struct{}), byClient: map[string]*runRec{}, subs: map[*conn]*sub{}}
	s.cond.L = &s.mu
	h.sessions[key] = s
	h.mu.Unlock()

	// Load outside hub.mu: replaying a big log must not stall other sessions.
	s.err = h.load(s)
	if s.err != nil {
		h.mu.Lock()
		delete(h.sessions, key) // the next acquire tries afresh
		h.mu.Unlock()
	}
	close(s.ready)
	if s.err != nil {
		return nil, s.err
	}
	return s, nil
}

// ref adds a reference to an acquired session.
func (h *hub) ref(s *session) {
	h.mu.Lock()
	s.refs++
	h.mu.Unlock()
}

// release drops a reference. A run and each subscriber hold one, so a
// session without either becomes idle: it joins the idle list, whose
// oldest members beyond maxIdleSessions are closed (all of them once the
// server stops).
func (h *hub) release(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.refs--; s.refs > 0 {
		return
	}
	if h.closing || s.failed.Load() {
		// A failed log is not kept: the next open starts from the disk.
		h.closeLocked(s)
		return
	}
	if s.sent.Load() && !s.durable.Load() {
		// Only temp sends ever used it: nothing of it outlives its
		// connections (object-abi: temp sessions may be cancelled;
		// private and shared ones are never deleted).
		size := s.log.Size()
		h.closeLocked(s)
		if rm, ok := h.srv.Store.(Remover); ok {
			if err := rm.Remove(s.key); err != nil {
				h.logf("session %s: failed to remove temp session: %v", s.key, err)
			} else {
				h.usage.release(s.key.UID, size)
			}
		}
		return
	}
	s.idle = h.idle.PushBack(s)
	for h.idle.Len() > maxIdleSessions {
		h.closeLocked(h.idle.Front().Value.(*session))
	}
}

// closeLocked closes an unreferenced session; h.mu is held, so nobody
// reopens the session before its log, and its lock, are released.
func (h *hub) closeLocked(s *session) {
	if s.idle != nil {
		h.idle.Remove(s.idle)
		s.idle = nil
	}
	delete(h.sessions, s.key)
	if err := s.log.Close(); err != nil {
		h.logf("session %s: failed to close log: %v", s.key, err)
	}
}

// closeIdle closes every unreferenced session, at the end of Serve.
func (h *hub) closeIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sessions {
		if s.refs == 0 {
			h.closeLocked(s)
		}
	}
}

// load opens the session's log and rebuilds the idempotency map and the
// history from it. A run the log shows started but never done (the server
// died under it) gets its error and done frames now, so every run in the
// log ends with exactly one done.
func (h *hub) load(s *session) error {
	log, err := h.srv.Store.Open(s.key)
	if err != nil {
		return err
	}
	s.log = log
	if err := s.rebuild(); err != nil {
		log.Close()
		return err
	}
	return nil
}

func (s *session) rebuild() error {
	byRun := map[string]*runRec{}
	var order []*runRec
	started := map[*runRec]bool{}
	err := s.log.Sends(func(off int64, r SendRecord) error {
		s.sent.Store(true)
		if !r.Temp {
			s.durable.Store(true)
		}
		if _, dup := byRun[r.Run]; dup {
			return nil
		}
		rec := &runRec{id: r.Run, client: r.ID, sendOff: off, size: int64(len(r.Input))}
		byRun[r.Run] = rec
		order = append(order, rec)
		if _, dup := s.byClient[r.ID]; !dup {
			s.byClient[r.ID] = rec
		}
		return nil
	})
	if err != nil {
		return err
	}
	var hdr struct {
		Type   abi.EventType `json:"type"`
		Run    string        `json:"run"`
		Status string        `json:"status"`
	}
	err = s.log.Frames(0, func(id uint64, frame []byte) error {
		hdr.Type, hdr.Run, hdr.Status = "", "", ""
		if err := json.Unmarshal(frame, &hdr); err != nil {
			return abi.Errorf(abi.EIO, "corrupt frame %d: %w", id, err)
		}
		if hdr.Run == "" {
			return nil
		}
		rec := byRun[hdr.Run]
		if rec == nil {
			// Frames of a run the index lost: still history, never a retry.
			rec = &runRec{id: hdr.Run, sendOff: -1}
			byRun[hdr.Run] = rec
			order = append(order, rec)
		}
		if !started[rec] {
			started[rec] = true
			rec.base = id - 1
		}
		switch hdr.Type {
		case abi.EvMessage, abi.EvToolCall:
			rec.size += int64(len(frame))
		case abi.EvDone:
			if rec.last == 0 {
				s.finishLocked(rec, id, hdr.Status)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.lastID.Store(s.log.LastID())
	dangling := false
	for _, rec := range order {
		if rec.last != 0 {
			continue
		}
		if !started[rec] {
			rec.base = s.lastID.Load()
		}
		dangling = true
		lost := abi.Errorf(abi.EIO, "run interrupted: the server stopped before it finished")
		if _, err := s.appendLocked(rec, abi.ErrorEvent(rec.id, lost), true); err != nil {
			return err
		}
		if _, err := s.appendLocked(rec, abi.DoneEvent(rec.id, abi.StatusError), true); err != nil {
			return err
		}
	}
	if dangling {
		if err := s.log.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// appendLocked stamps e with the session's next event id and rec's run id,
// appends it to the log and publishes it to subscribers; s.mu is held. A
// done frame is synced before it is published, so a client that saw a
// run's done knows the whole run is on disk. A frame that does not fit the
// quotas is ENOSPC and is not written, unless closing (the server's own
// error and done frames), which always fit in the reserve.
func (s *session) appendLocked(rec *runRec, e abi.Event, closing bool) (uint64, error) {
	if s.broken != nil {
		return 0, s.broken
	}
	id := s.lastID.Load() + 1
	e.ID = strconv.FormatUint(id, 10)
	e.Run = rec.id
	frame, err := e.MarshalJSON()
	if err != nil {
		return 0, abi.Errorf(abi.EINVAL, "invalid %s frame: %w", e.Type, err)
	}
	if len(frame) > jsonl.MaxFrame {
		return 0, abi.Errorf(abi.EMSGSIZE, "%s frame of %d bytes exceeds the %d-byte frame limit", e.Type, len(frame), jsonl.MaxFrame)
	}
	if err := s.quotaLocked(s.h, int64(len(frame)+1), closing); err != nil {
		return 0, err
	}
	if err := s.log.Append(id, frame); err != nil {
		s.fail(err)
		return 0, s.broken
	}
	if e.Type == abi.EvDone {
		if err := s.log.Sync(); err != nil {
			s.fail(err)
			return 0, s.broken
		}
	}
	s.lastID.Store(id)
	switch e.Type {
	case abi.EvMessage, abi.EvToolCall:
		rec.size += int64(len(frame))
		rec.keep(e)
	case abi.EvDone:
		s.finishLocked(rec, id, e.Status)
	}
	s.cond.Broadcast()
	return id, nil
}

// finishLocked records rec's done frame: an ok run joins the history
// index.
func (s *session) finishLocked(rec *runRec, id uint64, status string) {
	rec.last, rec.status = id, status
	if status == abi.StatusOK {
		p := pastRef{run: rec.id, sendOff: rec.sendOff, base: rec.base, last: id, size: rec.size}
		s.history = append(s.history, p)
		if rec.input != nil {
			s.keepPast(p, Exchange{Run: rec.id, Input: rec.input, Events: rec.events})
		}
	}
	rec.input, rec.events = nil, nil
}

// keep records a message or tool_call event of a live run for the history
// cache, a copy of it (a runner may reuse its buffers), while the run fits
// the cache's share.
func (rec *runRec) keep(e abi.Event) {
	if rec.input == nil || rec.size > pastCacheBytes/4 {
		rec.input, rec.events = nil, nil
		return
	}
	e.Content = append([]abi.Part(nil), e.Content...)
	e.Arguments = append(json.RawMessage(nil), e.Arguments...)
	rec.events = append(rec.events, e)
}

// historySnapshot is the history for a new turn: each past run reads its
// input and frames from the log only when the runner asks. The session is
// referenced by the run, so the log stays open while it can be asked.
func (s *session) historySnapshot() []PastRun {
	s.mu.Lock()
	refs := slices.Clip(s.history)
	s.mu.Unlock()
	out := make([]PastRun, len(refs))
	for i, p := range refs {
		out[i] = PastRun{Run: p.run, Size: p.size, load: func() (Exchange, error) { return s.loadPast(p) }}
	}
	return out
}

// errStopFrames ends a Frames scan early.
var errStopFrames = errors.New("stop")

// loadPast reads one completed run back from the log: its input from the
// send index, its message and tool_call frames from the event log.
func (s *session) loadPast(p pastRef) (Exchange, error) {
	s.pastMu.Lock()
	e, ok := s.past[p.run]
	s.pastMu.Unlock()
	if ok {
		return e.x, nil
	}
	var x Exchange
	var err error
	x, err = s.readPast(p)
	if err == nil && p.size <= pastCacheBytes/4 {
		s.keepPast(p, x)
	}
	return x, err
}

// keepPast caches a run read back from the log, dropping the oldest
// cached runs beyond pastCacheBytes.
func (s *session) keepPast(p pastRef, x Exchange) {
	s.pastMu.Lock()
	defer s.pastMu.Unlock()
	if _, ok := s.past[p.run]; ok {
		return
	}
	if s.past == nil {
		s.past = map[string]pastEntry{}
	}
	s.past[p.run] = pastEntry{x, p.size}
	s.pastOrder = append(s.pastOrder, p.run)
	s.pastBytes += p.size
	for s.pastBytes > pastCacheBytes && len(s.pastOrder) > 0 {
		old := s.pastOrder[0]
		s.pastOrder = s.pastOrder[1:]
		s.pastBytes -= s.past[old].n
		delete(s.past, old)
	}
}

// readPast decodes one completed run from the log.
func (s *session) readPast(p pastRef) (Exchange, error) {
	x := Exchange{Run: p.run}
	if p.sendOff >= 0 {
		rec, err := s.log.SendAt(p.sendOff)
		if err != nil {
			return x, err
		}
		x.Input = rec.Input
	}
	var hdr struct {
		Type abi.EventType `json:"type"`
		Run  string        `json:"run"`
	}
	err := s.log.Frames(p.base, func(id uint64, frame []byte) error {
		if id > p.last {
			return errStopFrames
		}
		if typ, _, run, ok := sockstore.FrameHead(frame); ok && run != "" {
			// Deltas and the rest of a run are most of its frames: skip
			// them without decoding.
			if run != p.run || (abi.EventType(typ) != abi.EvMessage && abi.EventType(typ) != abi.EvToolCall) {
				return nil
			}
		} else {
			hdr.Type, hdr.Run = "", ""
			if err := json.Unmarshal(frame, &hdr); err != nil {
				return abi.Errorf(abi.EIO, "corrupt frame %d: %w", id, err)
			}
			if hdr.Run != p.run || (hdr.Type != abi.EvMessage && hdr.Type != abi.EvToolCall) {
				return nil
			}
		}
		var e abi.Event
		if err := json.Unmarshal(frame, &e); err != nil {
			return abi.Errorf(abi.EIO, "corrupt frame %d: %w", id, err)
		}
		x.Events = append(x.Events, e)
		return nil
	})
	if errors.Is(err, errStopFrames) {
		err = nil
	}
	return x, err
}

// fail marks the log broken: subscribers get an error frame and stop.
func (s *session) fail(err error) {
	if s.broken == nil {
		s.broken = abi.Errorf(abi.CodeOf(err), "session log failed: %w", err)
		s.failed.Store(true)
		s.cond.Broadcast()
	}
}
