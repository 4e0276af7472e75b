package sock

import (
	"errors"

	"github.com/cortexfs/cortexfs/core/abi"
)

// sub is a connection's subscription to a session. It has its own
// goroutine that reads frames from the session's durable log after cursor
// and writes them to the connection, so a subscriber behind by a whole
// log costs a file offset, not memory. A run waits for every subscriber
// of its session to write each frame before it may emit the next.
//
// A connection has at most one sub per session. All fields are guarded by
// the session's mu.
type sub struct {
	c      *conn
	rec    *runRec // non-nil: a run subscription (from send), ending after rec's done frame
	cursor uint64  // the last event id this subscriber is past
	closed bool
}

// Sentinels that stop one pass over the log.
var (
	errPause = errors.New("pass over") // wait, or start over from the new cursor
	errStop  = errors.New("subscription over")
)

// subscribeLocked makes c follow s from cursor on; s.mu is held. rec non-nil
// subscribes to that run only (a send); nil to the whole session (a
// resume). An existing subscription is retargeted instead: a resume turns
// it session-wide, a send moves a run subscription to the new run, and
// rewind moves its cursor.
func (h *hub) subscribeLocked(s *session, c *conn, rec *runRec, cursor uint64, rewind bool) {
	if sb := s.subs[c]; sb != nil {
		if rec == nil || sb.rec != nil {
			sb.rec = rec
		}
		if rewind {
			sb.cursor = cursor
		}
		s.cond.Broadcast()
		return
	}
	if !c.begin(s) {
		return
	}
	h.ref(s)
	sb := &sub{c: c, rec: rec, cursor: cursor}
	s.subs[c] = sb
	h.connWG.Add(1)
	go h.follow(s, sb)
}

// endSubLocked ends sb; s.mu is held. Its goroutine notices and exits.
func (s *session) endSubLocked(sb *sub) {
	if sb.closed {
		return
	}
	sb.closed = true
	if s.subs[sb.c] == sb {
		delete(s.subs, sb.c)
	}
	s.cond.Broadcast()
}

// follow is sb's goroutine: it writes the log's frames to the connection
// in order until the subscription ends.
func (h *hub) follow(s *session, sb *sub) {
	c := sb.c
	defer func() {
		s.mu.Lock()
		s.endSubLocked(sb)
		s.mu.Unlock()
		c.end(s)
		h.release(s)
		h.connWG.Done()
	}()
	for {
		s.mu.Lock()
		for !sb.closed && s.broken == nil && sb.cursor >= s.lastID.Load() && !(sb.rec == nil && c.draining.Load()) {
			s.cond.Wait()
		}
		if sb.closed {
			s.mu.Unlock()
			return
		}
		cursor := sb.cursor
		if cursor >= s.lastID.Load() {
			// Caught up and either the log broke or nobody will ask for
			// more. End now, under the lock that made the decision, so a
			// request cannot retarget a subscription that is going away.
			broken := s.broken
			s.endSubLocked(sb)
			s.mu.Unlock()
			if broken != nil {
				c.reply(errorEvent(broken))
			}
			return
		}
		s.mu.Unlock()

		err := s.log.Frames(cursor, func(id uint64, frame []byte) error {
			if id > s.lastID.Load() {
				return errPause // appended but not yet published (a done being synced)
			}
			if err := c.w.WriteFrame(frame); err != nil {
				return &connError{err}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			switch {
			case sb.closed:
				return errStop
			case sb.cursor != cursor:
				return errPause // rewound meanwhile: start over from there
			}
			sb.cursor, cursor = id, id
			s.cond.Broadcast() // the run may be waiting for this frame
			if sb.rec != nil && sb.rec.last == id {
				s.endSubLocked(sb) // under this lock: see above
				return errStop
			}
			return nil
		})
		switch {
		case err == nil, errors.Is(err, errPause):
		case errors.Is(err, errStop):
			return
		case isConnErr(err):
			c.close()
			return
		default:
			h.logf("session %s: %v", s.key, err)
			s.mu.Lock()
			s.endSubLocked(sb)
			s.mu.Unlock()
			c.reply(errorEvent(err))
			return
		}
	}
}

// replay writes the frames (base, last] of a finished run to c, once.
// s.mu may be held: the work happens in its own goroutine.
func (h *hub) replay(s *session, c *conn, base, last uint64) {
	if !c.begin(nil) {
		return
	}
	h.ref(s)
	h.connWG.Add(1)
	go func() {
		defer func() {
			c.end(nil)
			h.release(s)
			h.connWG.Done()
		}()
		err := s.log.Frames(base, func(id uint64, frame []byte) error {
			if id > last {
				return errStop
			}
			if err := c.w.WriteFrame(frame); err != nil {
				return &connError{err}
			}
			return nil
		})
		switch {
		case err == nil, errors.Is(err, errStop):
		case isConnErr(err):
			c.close()
		default:
			h.logf("session %s: %v", s.key, err)
			c.reply(errorEvent(err))
		}
	}()
}

// resume subscribes c to a whole session after an event id.
func (h *hub) resume(c *conn, req Request) {
	if h.isClosing() {
		c.reply(errorEvent(abi.Errorf(abi.EHOSTDOWN, "server is shutting down")))
		return
	}
	after, err := parseAfter(req.After)
	if err != nil {
		c.reply(errorEvent(err))
		return
	}
	s, err := h.acquire(SessionKey{UID: c.cred.UID, Name: req.Session})
	if err != nil {
		c.reply(errorEvent(err))
		return
	}
	defer h.release(s)
	s.mu.Lock()
	last := s.lastID.Load()
	if after <= last {
		h.subscribeLocked(s, c, nil, after, true)
	}
	s.mu.Unlock()
	if after > last {
		// Never reply under s.mu: a slow client would stall the session.
		c.reply(errorEvent(abi.Errorf(abi.EINVAL, "after %d is past the last event %d of session %s", after, last, req.Session)))
	}
}

func (h *hub) isClosing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closing
}
