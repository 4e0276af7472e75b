package sock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/sockstore"
)

// flakyStore is a sockstore.DirStore whose logs fail to append while fail is set.
type flakyStore struct {
	sockstore.DirStore
	fail *atomic.Bool
}

func (s flakyStore) Open(key SessionKey) (Log, error) {
	l, err := s.DirStore.Open(key)
	if err != nil {
		return nil, err
	}
	return flakyLog{l, s.fail}, nil
}

type flakyLog struct {
	Log
	fail *atomic.Bool
}

func (l flakyLog) Append(id uint64, frame []byte) error {
	if l.fail.Load() {
		return errors.New("disk full")
	}
	return l.Log.Append(id, frame)
}

// A log that fails stops the run and tells its subscribers; once the
// session is reopened, the interrupted run is closed and the next runs.
func TestLogFailure(t *testing.T) {
	var fail atomic.Bool
	emitErr := make(chan error, 1)
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		if err := emit(abi.StartEvent(t.Run, "test/m")); err != nil {
			return err
		}
		fail.Store(string(t.Input) == `"break"`)
		err := emit(abi.DeltaEvent(t.Run, "x"))
		if string(t.Input) == `"break"` {
			emitErr <- err
			fail.Store(false)
		}
		return err
	}), func(s *Server) { s.Store = flakyStore{s.Store.(sockstore.DirStore), &fail} })
	c := ts.dial()
	c.send(Request{Op: OpSend, ID: "m1", Input: input("break")})
	if e := c.next(); e.Type != abi.EvStart {
		t.Fatalf("got %+v", e)
	}
	if err := <-emitErr; abi.CodeOf(err) != abi.EIO {
		t.Fatalf("emit on a failing log = %v, want EIO", err)
	}
	c.wantError(abi.EIO)

	// Until the broken session is let go, sends are refused with EIO; then
	// it is reopened from disk.
	var evs []abi.Event
	waitFor(t, "the session to reopen", func() bool {
		c.send(Request{Op: OpSend, ID: "m2", Input: input("fine")})
		e := c.next()
		if e.Type == abi.EvError && e.Run == "" && e.Code == abi.EIO {
			return false
		}
		evs = append([]abi.Event{e}, c.untilDone()...)
		return true
	})
	if types(evs) != "start delta done:ok" || evs[0].ID != "4" {
		t.Fatalf("after the failure: %s from id %s", types(evs), evs[0].ID)
	}
	r := ts.dial()
	r.send(Request{Op: OpResume, Session: "default"})
	if evs := r.untilDone(); types(evs) != "start error:EIO done:error" {
		t.Fatalf("the broken run reads %s", types(evs))
	}
}
