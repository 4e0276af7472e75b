package sock

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// conn is one client connection. Its reader goroutine handles requests in
// order; frames reach it from subscriber and replay goroutines through w,
// whose blocking writes are the only buffer between a run and the client.
type conn struct {
	h    *hub
	nc   *net.UnixConn
	cred peer.Cred
	w    *jsonl.Writer

	// draining is set once no request will come (the client half-closed
	// its side, or the server is stopping): session-wide subscriptions end
	// when caught up, run subscriptions at their done frame, and then the
	// connection closes.
	draining atomic.Bool

	mu        sync.Mutex
	closed    bool
	pending   int               // subscriptions and replays still writing
	sessions  map[*session]int  // subscriptions per session, live or ending
	temps     map[*run]struct{} // temp runs, cancelled when the conn closes
	held      map[*session]bool // sessions this conn sent temp runs to: referenced until it closes
	closeOnce sync.Once
}

// serveConn reads the peer's credentials, then serves requests until the
// client goes away.
func (h *hub) serveConn(nc *net.UnixConn) {
	defer h.connWG.Done()
	credOf := h.srv.credOf
	if credOf == nil {
		credOf = peer.Of
	}
	cred, err := credOf(nc)
	if err != nil {
		// Fail closed: without a uid there is no session to give.
		h.logf("refusing connection: %v", err)
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_ = jsonl.NewWriter(nc).Encode(errorEvent(err))
		nc.Close()
		return
	}
	idle := h.limits.IdleTimeout
	c := &conn{h: h, nc: nc, cred: cred, w: jsonl.NewWriter(deadlineConn{nc, idle}),
		sessions: map[*session]int{}, temps: map[*run]struct{}{}, held: map[*session]bool{}}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		nc.Close()
		return
	}
	if max := h.limits.MaxConnsPerUID; max > 0 && cred.UID != 0 && h.perUID[cred.UID] >= max {
		h.mu.Unlock()
		h.logf("refusing connection: uid %d already holds %d connections", cred.UID, max)
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_ = jsonl.NewWriter(nc).Encode(errorEvent(abi.Errorf(abi.EBUSY, "uid %d already holds %d connections to this socket", cred.UID, max)))
		nc.Close()
		return
	}
	h.perUID[cred.UID]++
	h.conns[c] = struct{}{}
	h.mu.Unlock()

	r := jsonl.NewReader(nc)
	for {
		if idle > 0 {
			_ = nc.SetReadDeadline(time.Now().Add(idle))
		}
		line, err := r.ReadFrame()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && c.busy() && !r.Broken():
			continue // frames are still going out to it: not idle
		case errors.Is(err, os.ErrDeadlineExceeded):
			h.logf("closing connection of uid %d: idle for %v", cred.UID, idle)
			c.close()
			return
		case abi.CodeOf(err) == abi.EMSGSIZE:
			// The Reader skipped the line; the connection stays usable.
			c.reply(errorEvent(err))
			continue
		case err == io.EOF && c.halfClosed():
			c.drain()
			return
		case err != nil:
			c.close()
			return
		}
		req, err := ParseRequest(line)
		if err != nil {
			c.reply(errorEvent(err))
			continue
		}
		c.handle(req)
	}
}

func (c *conn) handle(req Request) {
	switch req.Op {
	case OpPing:
		c.reply(abi.Event{Type: abi.EvPong})
	case OpCancel:
		c.h.cancel(c, req.ID)
	case OpSend:
		c.h.send(c, req)
	case OpResume:
		c.h.resume(c, req)
	}
}

// reply writes a frame that belongs to no session: pong or a request error.
func (c *conn) reply(e abi.Event) {
	frame, err := e.MarshalJSON()
	if err == nil {
		err = c.w.WriteFrame(frame)
	}
	if err != nil {
		c.close()
	}
}

// errorEvent is the error frame of a failed request: no run, no id.
func errorEvent(err error) abi.Event {
	return abi.Event{Type: abi.EvError, Code: abi.CodeOf(err), Message: err.Error()}
}

// halfClosed tells, after reading EOF, whether the client only shut down
// its sending side (it still reads: keep delivering) or closed the socket
// (POLLHUP: nobody will read).
func (c *conn) halfClosed() bool {
	raw, err := c.nc.SyscallConn()
	if err != nil {
		return false
	}
	hup := true
	_ = raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err == nil && n == 1 {
			hup = fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return !hup
}

// busy reports whether subscriptions or replays still write to c.
func (c *conn) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending > 0
}

// drain lets pending subscriptions finish, then closes the connection.
func (c *conn) drain() {
	c.mu.Lock()
	c.draining.Store(true)
	idle := c.pending == 0
	sessions := make([]*session, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	if idle {
		c.close()
		return
	}
	for _, s := range sessions {
		// Wake subscribers so session-wide ones notice they may end.
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// begin counts one more subscription to s, or a replay when s is nil;
// false once the connection is closed.
func (c *conn) begin(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.pending++
	if s != nil {
		c.sessions[s]++
	}
	return true
}

// end uncounts what begin counted; a drained connection closes.
func (c *conn) end(s *session) {
	c.mu.Lock()
	c.pending--
	if s != nil {
		if c.sessions[s]--; c.sessions[s] <= 0 {
			delete(c.sessions, s)
		}
	}
	idle := c.pending == 0 && c.draining.Load()
	c.mu.Unlock()
	if idle {
		c.close()
	}
}

// addTemp ties run r to this connection; false if it is already closed.
func (c *conn) addTemp(r *run) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.temps[r] = struct{}{}
	return true
}

// hold keeps s open (one reference) until the connection closes, so a
// temp session lives as long as the connection that uses it, turn after
// turn; false if s is already held or the connection is closed.
func (c *conn) hold(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.held[s] {
		return false
	}
	c.held[s] = true
	return true
}

func (c *conn) removeTemp(r *run) {
	c.mu.Lock()
	delete(c.temps, r)
	c.mu.Unlock()
}

// close tears the connection down: blocked writes fail at once, so no run
// waits for this client any more; its subscriptions end and its temp runs
// are cancelled. Runs it started otherwise keep going.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.nc.Close()
		c.mu.Lock()
		c.closed = true
		sessions := make([]*session, 0, len(c.sessions))
		for s := range c.sessions {
			sessions = append(sessions, s)
		}
		temps := make([]*run, 0, len(c.temps))
		for r := range c.temps {
			temps = append(temps, r)
		}
		held := make([]*session, 0, len(c.held))
		for s := range c.held {
			held = append(held, s)
		}
		c.held = nil
		c.mu.Unlock()
		for _, s := range sessions {
			s.mu.Lock()
			if sb := s.subs[c]; sb != nil {
				s.endSubLocked(sb)
			}
			s.mu.Unlock()
		}
		for _, r := range temps {
			r.cancel(errTempClosed)
		}
		for _, s := range held {
			c.h.release(s)
		}
		c.h.mu.Lock()
		if _, ok := c.h.conns[c]; ok {
			delete(c.h.conns, c)
			if c.h.perUID[c.cred.UID]--; c.h.perUID[c.cred.UID] <= 0 {
				delete(c.h.perUID, c.cred.UID)
			}
		}
		c.h.mu.Unlock()
	})
}

// isConnErr reports whether err came from writing to the client.
func isConnErr(err error) bool {
	var ce *connError
	return errors.As(err, &ce)
}

// connError wraps a failed write to the client, to tell it from log errors.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }
