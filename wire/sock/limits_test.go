package sock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

func withLimits(l Limits) func(*Server) { return func(s *Server) { s.Limits = l } }

// One uid holds at most MaxConnsPerUID connections; the next is EBUSY and
// closed. Another uid, and root, still get in.
func TestLimitConnsPerUID(t *testing.T) {
	ts := startServer(t, runnerFunc(echo), withLimits(Limits{MaxConnsPerUID: 3}))
	var held []*testClient
	for range 3 {
		c := ts.dialAs(2000)
		c.send(Request{Op: OpPing})
		if e := c.next(); e.Type != abi.EvPong {
			t.Fatalf("connection within the cap: %+v", e)
		}
		held = append(held, c)
	}
	over := ts.dialAs(2000)
	if e := over.next(); e.Type != abi.EvError || e.Code != abi.EBUSY {
		t.Fatalf("connection over the cap: %+v, want EBUSY", e)
	}
	for _, uid := range []uint32{2001, 0} {
		c := ts.dialAs(uid)
		c.send(Request{Op: OpPing})
		if e := c.next(); e.Type != abi.EvPong {
			t.Fatalf("uid %d refused while uid 2000 is at its cap: %+v", uid, e)
		}
	}
	held[0].Close()
	waitFor(t, "a freed slot", func() bool {
		c := ts.dialAs(2000)
		defer c.Close()
		// Until the server has seen the close, this connection is over
		// the cap: refused and closed, so the ping may meet a closed
		// socket (EPIPE). That is a try that failed, not a failure.
		if err := c.Send(Request{Op: OpPing}); err != nil {
			return false
		}
		c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		e, err := c.Next()
		return err == nil && e.Type == abi.EvPong
	})
}

// A connection with nothing going on is closed after IdleTimeout; one
// that is receiving a run's frames is not.
func TestLimitIdleTimeout(t *testing.T) {
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		emit(abi.StartEvent(t.Run, "test/m"))
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return emit(abi.DeltaEvent(t.Run, "late"))
	}), withLimits(Limits{IdleTimeout: 500 * time.Millisecond}))
	idle := ts.dialAs(2000)
	busy := ts.dialAs(2000)
	busy.send(Request{Op: OpSend, ID: "m", Input: input("hi")})
	if evs := busy.untilDone(); types(evs) != "start delta done:ok" {
		t.Fatalf("a run longer than the idle timeout: %s", types(evs))
	}
	idle.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle.Next(); err == nil {
		t.Fatal("an idle connection got a frame instead of being closed")
	}
}

// A session's log stops at its quota: the send that does not fit is
// ENOSPC, a run that fills it ends with an ENOSPC error and its done frame
// (nothing half-written), and the session still resumes and replays.
func TestLimitSessionQuota(t *testing.T) {
	big := strings.Repeat("x", 8<<10)
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		emit(abi.StartEvent(t.Run, "test/m"))
		for {
			if err := emit(abi.DeltaEvent(t.Run, big)); err != nil {
				return err
			}
		}
	}), withLimits(Limits{MaxSessionBytes: 256 << 10, MaxUIDBytes: -1}))
	c := ts.dialAs(2000)
	c.send(Request{Op: OpSend, ID: "fill", Session: "q", Input: input("go")})
	evs := c.untilDone()
	last, errFrame := evs[len(evs)-1], evs[len(evs)-2]
	if last.Status != abi.StatusError || errFrame.Type != abi.EvError || errFrame.Code != abi.ENOSPC {
		t.Fatalf("a run past the quota ended %s (last error %+v)", types(evs[len(evs)-2:]), errFrame)
	}
	c.send(Request{Op: OpSend, ID: "more", Session: "q", Input: input(strings.Repeat("y", 32<<10))})
	if e := c.next(); e.Type != abi.EvError || e.Code != abi.ENOSPC {
		t.Fatalf("a send into a full session: %+v, want ENOSPC", e)
	}
	r := ts.dialAs(2000)
	r.send(Request{Op: OpResume, Session: "q"})
	if got := r.untilDone(); len(got) != len(evs) {
		t.Fatalf("resume replayed %d frames, the run had %d", len(got), len(evs))
	}
}

// One uid's sessions share MaxUIDBytes; another uid is not affected.
func TestLimitUIDQuota(t *testing.T) {
	ts := startServer(t, runnerFunc(echo), withLimits(Limits{MaxSessionBytes: -1, MaxUIDBytes: 128 << 10}))
	in := input(strings.Repeat("z", 20<<10)) // ~60 KiB a run: input, delta and message
	c := ts.dialAs(2000)
	var refused bool
	for i := range 6 {
		c.send(Request{Op: OpSend, ID: "m", Session: "s" + string(rune('a'+i)), Input: in})
		e := c.next()
		if e.Type == abi.EvError && e.Code == abi.ENOSPC {
			refused = true
			break
		}
		for e.Type != abi.EvDone {
			e = c.next()
		}
	}
	if !refused {
		t.Fatal("uid 2000 filled several sessions past its quota")
	}
	o := ts.dialAs(2001)
	o.send(Request{Op: OpSend, ID: "m", Session: "sa", Input: in})
	if evs := o.untilDone(); types(evs)[len(types(evs))-7:] != "done:ok" {
		t.Fatalf("another uid was refused: %s", types(evs))
	}
}
