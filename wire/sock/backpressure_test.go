package sock

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Rule 9: a client that stops reading blocks the run; nothing queues in
// memory meanwhile, and once the client reads, every byte arrives.
func TestBackpressure(t *testing.T) {
	const chunk = 64 << 10
	total := 256 << 20
	if raceEnabled {
		total = 32 << 20
	}
	n := total / chunk
	text := strings.Repeat("x", chunk)
	var emitted atomic.Int64
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		for range n {
			if err := emit(abi.DeltaEvent(t.Run, text)); err != nil {
				return err
			}
			emitted.Add(chunk)
		}
		return nil
	}), func(s *Server) { s.Limits.MaxSessionBytes = 1 << 30 }) // the stream is larger than the default quota
	c := ts.dial()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	growth := func() int64 { return int64(peak.Load()) - int64(base) }

	c.send(Request{Op: OpSend, ID: "big", Input: input("flood")})
	// Not reading: the run must stall once the socket buffer is full.
	waitFor(t, "the run to start", func() bool { return emitted.Load() > 0 })
	time.Sleep(300 * time.Millisecond)
	stalled := emitted.Load()
	time.Sleep(200 * time.Millisecond)
	if now := emitted.Load(); now != stalled || stalled > 8<<20 {
		t.Fatalf("run not blocked by a client that reads nothing: %d then %d bytes emitted", stalled, now)
	}
	if g := growth(); g > 16<<20 {
		t.Fatalf("heap grew %d MiB while the client did not read", g>>20)
	}

	// Now read everything.
	var got int
	for {
		e := c.next()
		if e.Type == abi.EvDone {
			if e.Status != abi.StatusOK {
				t.Fatalf("done %s", e.Status)
			}
			break
		}
		got += len(e.Text)
	}
	close(stop)
	sampler.Wait()
	if got != total {
		t.Fatalf("received %d bytes of deltas, want %d", got, total)
	}
	if g := growth(); g > 16<<20 {
		t.Fatalf("heap grew %d MiB during the run", g>>20)
	}
	t.Logf("%d MiB through a stalled client; heap growth peak %d KiB", total>>20, growth()>>10)
}
