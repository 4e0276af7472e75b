package sock

import (
	"container/list"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// DefaultShutdownTimeout bounds each stage of a graceful stop when
// Server.ShutdownTimeout is zero.
const DefaultShutdownTimeout = 5 * time.Second

// Server serves the socket protocol on Unix listeners: one Runner behind
// it, sessions kept in Store, one session per (peer uid, name). A uid never
// sees, resumes or cancels another uid's session or run.
//
// Frames of a session are canonical abi.Event frames stamped with "run"
// and "id", the event id: "1", "2", … in decimal, per session, in log
// order. Each frame is appended to the session's Log before any client
// gets it, and clients get a session's frames in log order. Frames that
// belong to no session — pong, and the error frame of a refused request
// (no run, no id) — go to the requesting connection only.
//
//   - send starts a run (one at a time per session; another client id
//     while one runs is EBUSY) and streams it to the sender up to its done
//     frame. The Server owns "done": see Runner. A client id already used
//     in the session, before a restart or not, never starts a second run:
//     the send replays that run's frames from the log, start to done, or up
//     to now and then live if it still runs.
//   - resume replays the session's frames with id > after and keeps the
//     connection subscribed to the session's later frames. after beyond the
//     last event is EINVAL. Resuming a session that does not exist yet
//     creates it empty.
//   - cancel cancels the context of an active run of the peer's uid; the
//     run ends with done status cancelled. Anything else is ENOENT.
//   - ping answers pong.
//
// A connection has at most one subscription per session: a resume turns a
// send's subscription into a session-wide one and moves its cursor.
//
// Backpressure: a run's emit returns only once every subscriber of the
// session has written the frame to its connection, so a client that stops
// reading stalls the run; frames wait on disk, never in memory. A client
// that disconnects stops counting at once. Runs outlive the connection that
// started them, except temp ones.
type Server struct {
	Runner Runner
	Store  Store
	Logf   func(format string, args ...any) // optional
	// ShutdownTimeout bounds how long a stopping Serve waits for cancelled
	// runs to finish and then for clients to read their last frames;
	// DefaultShutdownTimeout when zero.
	ShutdownTimeout time.Duration
	// Limits bound each peer uid (see Limits); zero fields are defaults.
	Limits Limits
	// Usage accounts each uid's session bytes; share one between the
	// Servers of a daemon. nil: a private account measured from Store when
	// it can (a Measurer), else from zero.
	Usage *Usage

	// credOf reads the peer's credentials; nil means peer.Of. Tests use it
	// to play several uids from one process.
	credOf func(*net.UnixConn) (peer.Cred, error)
}

// Errors that cancel runs; each is the cause of the run's context.
var (
	errCancelRequest = abi.Errorf(abi.ECANCELED, "run cancelled by request")
	errTempClosed    = abi.Errorf(abi.ECANCELED, "temp session's connection closed")
	errShutdown      = abi.Errorf(abi.ECANCELED, "server shutting down")
)

// hub is the state of one Serve call.
type hub struct {
	srv        *Server
	runCtx     context.Context // parent of every run, outliving connections
	cancelRuns context.CancelCauseFunc

	limits Limits // srv.Limits with defaults filled in
	usage  *Usage

	mu       sync.Mutex
	closing  bool
	perUID   map[uint32]int // open connections per peer uid
	sessions map[SessionKey]*session
	idle     *list.List      // of *session with no reference, least recently used first
	runs     map[string]*run // active runs by run id
	conns    map[*conn]struct{}

	runWG  sync.WaitGroup // run producers
	connWG sync.WaitGroup // connection readers, subscribers, replays
}

// Serve accepts connections on ln until ctx is done or ln is closed, then
// stops gracefully: it stops accepting, cancels active runs and waits up to
// ShutdownTimeout for them to write their done frames, lets clients read
// what is left for up to ShutdownTimeout more, closes every connection and
// returns. It returns nil after a stop by ctx or by closing ln, and EBUSY
// if some runner ignored cancellation; sessions of such runs stay open.
//
// Every connection's peer credentials are read with SO_PEERCRED; a
// connection whose credentials cannot be read is refused. Runs outlive the
// connection that started them (unless sent with temp), and the Server
// does not close ln's socket file beyond what ln.Close does.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	if s.Runner == nil || s.Store == nil {
		return abi.Errorf(abi.EINVAL, "sock: Server needs a Runner and a Store")
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	h := &hub{
		srv: s, runCtx: runCtx, cancelRuns: cancel, limits: s.Limits.withDefaults(), usage: s.Usage,
		sessions: map[SessionKey]*session{}, idle: list.New(), runs: map[string]*run{}, conns: map[*conn]struct{}{},
		perUID: map[uint32]int{},
	}
	if h.usage == nil {
		var measure func(uint32) (int64, error)
		if m, ok := s.Store.(Measurer); ok {
			measure = m.Measure
		}
		h.usage = NewUsage(measure)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var acceptErr error
	delay := time.Duration(0)
	for {
		nc, err := ln.AcceptUnix()
		if err == nil {
			delay = 0
			h.connWG.Add(1)
			go h.serveConn(nc)
			continue
		}
		if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			break
		}
		if !transientAccept(err) {
			acceptErr = abi.Errorf(abi.CodeOf(err), "failed to accept: %w", err)
			break
		}
		// Out of descriptors or memory: back off instead of spinning.
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		s.logf("accept: %v; retrying in %v", err, delay)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
	ln.Close()
	if err := h.shutdown(); err != nil {
		return err
	}
	return acceptErr
}

func transientAccept(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// shutdown cancels every run, waits for the runs, lets connections drain
// and closes them, each stage bounded by the shutdown timeout.
func (h *hub) shutdown() error {
	timeout := h.srv.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	h.mu.Lock()
	h.closing = true
	h.mu.Unlock()
	h.cancelRuns(errShutdown)
	runsDone := waitTimeout(&h.runWG, timeout)
	if !runsDone {
		h.logf("shutdown: runs still active after %v", timeout)
	}

	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	if !waitTimeout(&h.connWG, timeout) {
		h.logf("shutdown: closing %d connections that did not drain in %v", len(conns), timeout)
		h.mu.Lock()
		for c := range h.conns {
			conns = append(conns, c)
		}
		h.mu.Unlock()
		for _, c := range conns {
			c.close()
		}
		h.connWG.Wait() // closing unblocks every write, so this is short
	}
	if !runsDone && !waitTimeout(&h.runWG, timeout) {
		h.closeIdle()
		h.mu.Lock()
		n := len(h.runs)
		h.mu.Unlock()
		return abi.Errorf(abi.EBUSY, "sock: %d runs ignored cancellation", n)
	}
	h.closeIdle()
	return nil
}

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func (h *hub) logf(format string, args ...any) { h.srv.logf(format, args...) }

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}
