package sock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Rule 10: runs outlive their client, a gone client never blocks a run,
// and temp runs end with their connection.
func TestDisconnect(t *testing.T) {
	t.Run("run continues after its client closed", func(t *testing.T) {
		proceed := make(chan struct{})
		finished := make(chan error, 1)
		ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			emit(abi.StartEvent(t.Run, "test/m"))
			<-proceed
			for _, w := range []string{"while", "you", "were", "away"} {
				if err := emit(abi.DeltaEvent(t.Run, w)); err != nil {
					finished <- err
					return err
				}
			}
			finished <- ctx.Err()
			return nil
		}))
		c := ts.dial()
		c.send(Request{Op: OpSend, ID: "m1", Input: input("hi")})
		c.next()
		c.Close()
		close(proceed)
		if err := <-finished; err != nil {
			t.Fatalf("run stopped when its client left: %v", err)
		}
		r := ts.dial()
		r.send(Request{Op: OpResume, Session: "default"})
		evs := r.untilDone()
		if types(evs) != "start delta delta delta delta done:ok" || evs[4].Text != "away" {
			t.Fatalf("resume after disconnect: %s", types(evs))
		}
	})

	t.Run("client that stopped reading then left no longer blocks", func(t *testing.T) {
		var emitted atomic.Int64
		finished := make(chan error, 1)
		text := strings.Repeat("y", 32<<10)
		ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			for range 1024 { // 32 MiB: far more than any socket buffer
				if err := emit(abi.DeltaEvent(t.Run, text)); err != nil {
					finished <- err
					return err
				}
				emitted.Add(1)
			}
			finished <- nil
			return nil
		}))
		c := ts.dial()
		c.send(Request{Op: OpSend, ID: "m1", Input: input("flood")})
		waitFor(t, "the run to stall", func() bool {
			n := emitted.Load()
			time.Sleep(50 * time.Millisecond)
			return n > 0 && emitted.Load() == n
		})
		if n := emitted.Load(); n >= 1024 {
			t.Fatalf("run never blocked")
		}
		c.Close()
		select {
		case err := <-finished:
			if err != nil {
				t.Fatalf("run failed after its reader left: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("run still blocked on a closed client")
		}
	})

	t.Run("temp run is cancelled when its connection closes", func(t *testing.T) {
		cause := make(chan error, 1)
		ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			emit(abi.StartEvent(t.Run, "test/m"))
			<-ctx.Done() // silent: only the close itself can end the run
			cause <- context.Cause(ctx)
			return ctx.Err()
		}))
		c := ts.dial()
		c.send(Request{Op: OpSend, ID: "m1", Input: input("hi"), Temp: true})
		c.next()
		c.Close()
		select {
		case err := <-cause:
			if !errors.Is(err, errTempClosed) {
				t.Fatalf("cancelled by %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("temp run survived its connection")
		}
		// Only temp sends used the session: once its run is done and its
		// connection gone, nothing of it is left on disk.
		dir := ts.store.Dir(SessionKey{UID: uint32(os.Getuid()), Name: "default"})
		waitFor(t, "the temp session's directory to go", func() bool {
			_, err := os.Lstat(dir)
			return errors.Is(err, fs.ErrNotExist)
		})
	})

	t.Run("half-closed client still gets its run, then EOF", func(t *testing.T) {
		proceed := make(chan struct{})
		ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			emit(abi.StartEvent(t.Run, "test/m"))
			select {
			case <-proceed:
			case <-ctx.Done():
				return ctx.Err()
			}
			return emit(abi.DeltaEvent(t.Run, "late"))
		}))
		c := ts.dial()
		c.send(Request{Op: OpSend, ID: "m1", Input: input("hi"), Temp: true})
		c.next()
		if err := c.conn.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // let the server see the EOF first
		close(proceed)
		if evs := c.untilDone(); types(evs) != "delta done:ok" {
			t.Fatalf("half-closed client got %s", types(evs))
		}
		c.wantEOF()
	})
}
