package sock

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/sockstore"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// Rule 1: a request over 1 MiB is EMSGSIZE and the connection keeps working.
func TestMaxFrame(t *testing.T) {
	ts := startServer(t, runnerFunc(echo))
	c := ts.dial()
	pad := func(total int) []byte {
		head := `{"op":"ping","pad":"`
		return []byte(head + strings.Repeat("x", total-len(head)-2) + `"}`)
	}
	raw := jsonl.NewWriter(c.conn)
	if err := raw.WriteFrame(pad(jsonl.MaxFrame)); err != nil {
		t.Fatal(err)
	}
	if e := c.next(); e.Type != abi.EvPong {
		t.Fatalf("frame of exactly 1 MiB: got %+v, want pong", e)
	}
	// WriteFrame refuses oversize frames, so write the line by hand.
	if _, err := c.conn.Write(append(pad(jsonl.MaxFrame+1), '\n')); err != nil {
		t.Fatal(err)
	}
	c.wantError(abi.EMSGSIZE)
	c.ping()
	c.send(Request{Op: OpSend, ID: "m1", Input: input("still works")})
	if evs := c.untilDone(); types(evs) != "start delta message done:ok" {
		t.Fatalf("frames after EMSGSIZE: %s", types(evs))
	}
}

// Rule 2: unknown fields are ignored; bad requests are EINVAL and cost
// only themselves.
func TestBadRequests(t *testing.T) {
	ts := startServer(t, runnerFunc(echo))
	c := ts.dial()
	tests := []struct {
		name string
		line string
		code abi.Code // "" means pong
	}{
		{"unknown fields", `{"op":"ping","future":{"x":[1]},"id":"ignored"}`, ""},
		{"unknown op", `{"op":"shutdown"}`, abi.EINVAL},
		{"missing op", `{"session":"default"}`, abi.EINVAL},
		{"invalid JSON", `{"op":`, abi.EINVAL},
		{"not JSON", `hello`, abi.EINVAL},
		{"send without id", `{"op":"send","input":"x"}`, abi.EINVAL},
		{"send without input", `{"op":"send","id":"m"}`, abi.EINVAL},
		{"resume without session", `{"op":"resume"}`, abi.EINVAL},
		{"resume bad after", `{"op":"resume","session":"default","after":"abc"}`, abi.EINVAL},
		{"resume after the end", `{"op":"resume","session":"fresh","after":"5"}`, abi.EINVAL},
		{"cancel without id", `{"op":"cancel"}`, abi.EINVAL},
		{"invalid session", `{"op":"send","id":"m","session":"..","input":"x"}`, abi.EINVAL},
		{"session with slash", `{"op":"resume","session":"a/b"}`, abi.EINVAL},
	}
	w := jsonl.NewWriter(c.conn)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			if err := w.WriteFrame([]byte(tt.line)); err != nil {
				t.Fatal(err)
			}
			if tt.code == "" {
				if e := c.next(); e.Type != abi.EvPong {
					t.Fatalf("got %+v, want pong", e)
				}
				return
			}
			c.wantError(tt.code)
			c.ping()
		})
	}
	c.t = t
	// Only the valid resume reached the store.
	names, err := os.ReadDir(filepath.Dir(ts.sessionDir(uint32(os.Getuid()), "x")))
	if err != nil || len(names) != 1 || names[0].Name() != "fresh" {
		t.Errorf("session directories %v, %v; want only fresh", names, err)
	}
}

// Rule 3: the server stamps run and id, logs every frame before writing it
// and writes exactly one done per run.
func TestRunFrames(t *testing.T) {
	failure := abi.Errorf(abi.EHOSTDOWN, "provider down")
	tests := []struct {
		name string
		fn   runnerFunc
		want string
	}{
		{"ok", echo, "start delta message done:ok"},
		{"error", func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			emit(abi.StartEvent("ignored", "test/m"))
			return failure
		}, "start error:EHOSTDOWN done:error"},
		{"plain error is EIO", func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			return fmt.Errorf("something broke")
		}, "error:EIO done:error"},
		{"runner's done is dropped", func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			emit(abi.StartEvent(t.Run, "test/m"))
			emit(abi.DoneEvent(t.Run, abi.StatusOK))
			emit(abi.DoneEvent(t.Run, abi.StatusError))
			return nil
		}, "start done:ok"},
		{"runner's error is not repeated", func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			emit(abi.StartEvent(t.Run, "test/m"))
			emit(abi.ErrorEvent(t.Run, failure))
			emit(abi.DoneEvent(t.Run, abi.StatusError))
			return failure
		}, "start error:EHOSTDOWN done:error"},
		{"runner's earlier error is kept", func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			emit(abi.ErrorEvent(t.Run, abi.Errorf(abi.EACCES, "tool denied")))
			emit(abi.DeltaEvent(t.Run, "x"))
			return failure
		}, "error:EACCES delta error:EHOSTDOWN done:error"},
		{"panic", func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			panic("boom")
		}, "error:EIO done:error"},
		{"invalid frame is refused", func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
			if err := emit(abi.Event{Type: abi.EvToolCall, CallID: "c", Name: "n", Arguments: []byte("{")}); abi.CodeOf(err) != abi.EINVAL {
				return fmt.Errorf("emit of invalid JSON arguments = %v, want EINVAL", err)
			}
			if err := emit(abi.DeltaEvent(t.Run, strings.Repeat("x", jsonl.MaxFrame))); abi.CodeOf(err) != abi.EMSGSIZE {
				return fmt.Errorf("emit of an oversize delta = %v, want EMSGSIZE", err)
			}
			return nil
		}, "done:ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, tt.fn)
			c := ts.dial()
			logPath := filepath.Join(ts.sessionDir(uint32(os.Getuid()), "default"), sockstore.EventsFile)
			c.send(Request{Op: OpSend, ID: "m1", Input: input("hi")})
			var evs []abi.Event
			for {
				e := c.next()
				// Logged before written: the client can't see a frame the log lacks.
				logged, err := os.ReadFile(logPath)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(logged, []byte(`"id":"`+e.ID+`","run":"`+e.Run+`"`)) {
					t.Fatalf("frame %+v reached the client before the log", e)
				}
				evs = append(evs, e)
				if e.Type == abi.EvDone {
					break
				}
			}
			if got := types(evs); got != tt.want {
				t.Fatalf("frames %s, want %s", got, tt.want)
			}
			run := evs[0].Run
			if !strings.HasPrefix(run, "r") || len(run) != 27 {
				t.Fatalf("run id %q, want ids.New(\"r\")", run)
			}
			checkStamped(t, evs, run, 1)
			if e := evs[len(evs)-1]; e.Type == abi.EvError && e.Message == "" {
				t.Errorf("error frame without message")
			}
			// Exactly one done, also in the log, and the session is free again.
			logged, _ := os.ReadFile(logPath)
			if n := bytes.Count(logged, []byte(`"type":"done"`)); n != 1 {
				t.Fatalf("log has %d done frames", n)
			}
			c.send(Request{Op: OpSend, ID: "m2", Input: input("again")})
			if evs := c.untilDone(); evs[0].ID != strconv.Itoa(len(bytes.Split(bytes.TrimSpace(logged), []byte("\n")))+1) {
				t.Fatalf("second run starts at id %s", evs[0].ID)
			}
		})
	}
}

// Rule 4: deltas arrive in emit order, with increasing ids.
func TestDeltaOrder(t *testing.T) {
	const n = 2000
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		for i := range n {
			if err := emit(abi.DeltaEvent(t.Run, strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}))
	// A second subscriber of the session must see the same order.
	watcher := ts.dial()
	watcher.send(Request{Op: OpResume, Session: "default"})
	c := ts.dial()
	c.send(Request{Op: OpSend, ID: "m1", Input: input("go")})
	// Both must read: the slower subscriber paces the run.
	got := make(chan []abi.Event, 2)
	for _, cl := range []*testClient{c, watcher} {
		go func() {
			var evs []abi.Event
			for {
				cl.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				e, err := cl.Next()
				if err != nil {
					break
				}
				if evs = append(evs, e); e.Type == abi.EvDone {
					break
				}
			}
			got <- evs
		}()
	}
	for range 2 {
		evs := <-got
		if len(evs) != n+1 {
			t.Fatalf("got %d frames, want %d", len(evs), n+1)
		}
		for i, e := range evs[:n] {
			if e.Text != strconv.Itoa(i) {
				t.Fatalf("delta %d has text %q", i, e.Text)
			}
		}
		checkStamped(t, evs, evs[0].Run, 1)
	}
}

// Rule 5: a retried client id never starts a second run; another id while
// a run is active is EBUSY.
func TestIdempotentRetry(t *testing.T) {
	release := make(chan struct{})
	r := &countRunner{fn: func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		emit(abi.StartEvent(t.Run, "test/m"))
		emit(abi.DeltaEvent(t.Run, "before"))
		if string(t.Input) == `"wait"` {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return emit(abi.DeltaEvent(t.Run, "after"))
	}}
	ts := startServer(t, r)

	// A finished run: the retry replays it from the log, start to done.
	a := ts.dial()
	a.send(Request{Op: OpSend, ID: "m1", Input: input("now")})
	first := a.untilDone()
	b := ts.dial()
	b.send(Request{Op: OpSend, ID: "m1", Input: input("now")})
	if again := b.untilDone(); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("retry replayed\n%v\nwant\n%v", again, first)
	}
	// Same connection too, and a different input changes nothing.
	a.send(Request{Op: OpSend, ID: "m1", Input: input("other")})
	if again := a.untilDone(); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("retry on the same connection replayed %v", again)
	}
	b.ping() // the replay ended: nothing else is pending for b

	// A running run: the retry replays what exists, then follows it live.
	a.send(Request{Op: OpSend, ID: "m2", Input: input("wait")})
	start, delta := a.next(), a.next()
	c := ts.dial()
	c.send(Request{Op: OpSend, ID: "m2", Input: input("wait")})
	if e := c.next(); fmt.Sprint(e) != fmt.Sprint(start) {
		t.Fatalf("retry of a running run starts with %+v, want %+v", e, start)
	}
	if e := c.next(); fmt.Sprint(e) != fmt.Sprint(delta) {
		t.Fatalf("retry of a running run: %+v, want %+v", e, delta)
	}
	// Another id while m2 runs is EBUSY, from any connection of the uid.
	d := ts.dial()
	d.send(Request{Op: OpSend, ID: "m3", Input: input("now")})
	d.wantError(abi.EBUSY)
	close(release)
	rest := c.untilDone()
	if types(rest) != "delta done:ok" || rest[0].Text != "after" {
		t.Fatalf("live part of the retried run: %s", types(rest))
	}
	if types(a.untilDone()) != "delta done:ok" {
		t.Fatalf("original sender did not see its run finish")
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("runner called %d times, want 2", n)
	}
	// m3 was refused, not recorded: sending it again now runs it.
	d.send(Request{Op: OpSend, ID: "m3", Input: input("now")})
	if types(d.untilDone()) != "start delta delta done:ok" {
		t.Fatalf("m3 after the busy run")
	}
}

// Rule 6: resume replays every frame after the given id, then follows live.
func TestResume(t *testing.T) {
	ts := startServer(t, runnerFunc(echo))
	a := ts.dial()
	var all []abi.Event
	for i := range 2 {
		a.send(Request{Op: OpSend, ID: fmt.Sprint("m", i), Input: input("hi")})
		all = append(all, a.untilDone()...)
	}
	tests := []struct {
		after string
		from  int // index into all
	}{{"", 0}, {"0", 0}, {"2", 2}, {"5", 5}, {strconv.Itoa(len(all)), len(all)}}
	for _, tt := range tests {
		t.Run("after="+tt.after, func(t *testing.T) {
			c := ts.dial()
			c.t, a.t = t, t
			c.send(Request{Op: OpResume, Session: "default", After: tt.after})
			for _, want := range all[tt.from:] {
				if got := c.next(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("replayed %+v, want %+v", got, want)
				}
			}
			// Then live: a run from another connection shows up here.
			a.send(Request{Op: OpSend, ID: "live-" + tt.after, Input: input("live")})
			sent := a.untilDone()
			all = append(all, sent...)
			for _, want := range sent {
				if got := c.next(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("live %+v, want %+v", got, want)
				}
			}
		})
	}
}

// Rule 7: cancel cancels a run of the same uid; anything else is ENOENT.
func TestCancel(t *testing.T) {
	started := make(chan string, 1)
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		emit(abi.StartEvent(t.Run, "test/m"))
		started <- t.Run
		<-ctx.Done()
		return ctx.Err()
	}))
	a := ts.dialAs(1000)
	a.send(Request{Op: OpSend, ID: "m1", Input: input("long")})
	run := <-started
	if e := a.next(); e.Run != run {
		t.Fatalf("start of %s, want %s", e.Run, run)
	}
	tests := []struct {
		name string
		c    *testClient
		id   string
	}{
		{"unknown run", a, "r0000000000000000000000000"},
		{"other uid", ts.dialAs(2000), run},
		{"root is no exception", ts.dialAs(0), run},
	}
	for _, tt := range tests {
		tt.c.send(Request{Op: OpCancel, ID: tt.id})
		tt.c.wantError(abi.ENOENT)
	}
	// The same uid on another connection may cancel.
	b := ts.dialAs(1000)
	b.send(Request{Op: OpCancel, ID: run})
	evs := a.untilDone()
	if types(evs) != "done:cancelled" || evs[0].Run != run {
		t.Fatalf("after cancel: %s", types(evs))
	}
	// A finished run is no longer cancellable.
	b.send(Request{Op: OpCancel, ID: run})
	b.wantError(abi.ENOENT)
}

// Rule 8.
func TestPing(t *testing.T) {
	ts := startServer(t, runnerFunc(echo))
	c := ts.dial()
	for range 3 {
		c.send(Request{Op: OpPing})
		e := c.next()
		if e.Type != abi.EvPong || e.ID != "" || e.Run != "" {
			t.Fatalf("got %+v, want a bare pong", e)
		}
	}
	frame, _ := abi.Event{Type: abi.EvPong}.MarshalJSON()
	if string(frame) != `{"type":"pong"}` {
		t.Fatalf("pong frame %s", frame)
	}
}
