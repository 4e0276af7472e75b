package sock

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/sockstore"
)

// A new Server over the same sockstore.DirStore continues where the old one stopped:
// resume returns exactly the missed frames, a retried id replays the old
// run without calling the Runner, and the history is rebuilt.
func TestRestartDurability(t *testing.T) {
	dir := t.TempDir()
	first := &countRunner{fn: echo}
	ts := startServerIn(t, dir, first)
	c := ts.dial()
	var all []abi.Event
	runs := map[string][]abi.Event{}
	for i := range 2 {
		id := fmt.Sprint("m", i)
		c.send(Request{Op: OpSend, ID: id, Input: input(fmt.Sprint("turn ", i))})
		runs[id] = c.untilDone()
		all = append(all, runs[id]...)
	}
	ts.stop()

	turns := make(chan Turn, 1)
	second := &countRunner{fn: func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		turns <- t
		return echo(ctx, t, emit)
	}}
	ts = startServerIn(t, dir, second)

	const after = 3
	r := ts.dial()
	r.send(Request{Op: OpResume, Session: "default", After: fmt.Sprint(after)})
	for _, want := range all[after:] {
		if got := r.next(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("resume after restart: %+v, want %+v", got, want)
		}
	}
	r.ping() // nothing beyond the missed frames

	c = ts.dial()
	c.send(Request{Op: OpSend, ID: "m0", Input: input("turn 0")})
	if got := c.untilDone(); fmt.Sprint(got) != fmt.Sprint(runs["m0"]) {
		t.Fatalf("retry after restart replayed\n%v\nwant\n%v", got, runs["m0"])
	}
	if n := second.calls.Load(); n != 0 {
		t.Fatalf("retry after restart called the runner %d times", n)
	}

	c.send(Request{Op: OpSend, ID: "m2", Input: input("turn 2")})
	evs := c.untilDone()
	checkStamped(t, evs, evs[0].Run, uint64(len(all)+1))
	tr := <-turns
	if len(tr.History) != 2 {
		t.Fatalf("history after restart has %d exchanges, want 2", len(tr.History))
	}
	for i, p := range tr.History {
		x, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		want := runs[fmt.Sprint("m", i)]
		if x.Run != want[0].Run || string(x.Input) != fmt.Sprintf("%q", fmt.Sprint("turn ", i)) ||
			len(x.Events) != 1 || x.Events[0].Type != abi.EvMessage || x.Events[0].MessageText() != string(x.Input) {
			t.Fatalf("history[%d] = %+v", i, x)
		}
	}
}

// History holds only runs that finished ok, oldest first.
func TestHistory(t *testing.T) {
	turns := make(chan Turn, 8)
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		turns <- t
		if err := echo(ctx, t, emit); err != nil {
			return err
		}
		emit(abi.Event{Type: abi.EvToolCall, CallID: "c1", Name: "fs.read", Arguments: []byte(`{"path":"x"}`)})
		if strings.Contains(string(t.Input), "fail") {
			return abi.Errorf(abi.EHOSTDOWN, "down")
		}
		return nil
	}))
	c := ts.dial()
	for i, in := range []string{"one", "fail", "two", "three"} {
		c.send(Request{Op: OpSend, ID: fmt.Sprint(i), Input: input(in)})
		c.untilDone()
	}
	var last Turn
	for range 4 {
		last = <-turns
	}
	var got []string
	for _, p := range last.History {
		x, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%s/%s", x.Input, x.Events[0].Type, x.Events[1].Type))
	}
	if want := `"one":message/tool_call "two":message/tool_call`; strings.Join(got, " ") != want {
		t.Fatalf("history %s, want %s", strings.Join(got, " "), want)
	}
}

// A run the log shows started but never done (the server died) is closed
// with an EIO error and done on the next open; a torn last line is cut.
func TestInterruptedRunClosedOnOpen(t *testing.T) {
	dir := t.TempDir()
	r := &countRunner{fn: echo}
	ts := startServerIn(t, dir, r)
	sdir := ts.sessionDir(uint32(os.Getuid()), "default")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(sdir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const run = "r01ARZ3NDEKTSV4RRFFQ69G5FAV"
	write(sockstore.SendsFile, `{"id":"m1","run":"`+run+`","input":"x"}`+"\n"+`{"id":"m2","ru`)
	write(sockstore.EventsFile, `{"type":"start","id":"1","run":"`+run+`","model":"test/echo"}`+"\n"+`{"type":"delta","id":"2","ru`)

	c := ts.dial()
	c.send(Request{Op: OpResume, Session: "default"})
	evs := c.untilDone()
	if types(evs) != "start error:EIO done:error" {
		t.Fatalf("interrupted run reads %s", types(evs))
	}
	checkStamped(t, evs, run, 1)
	c.send(Request{Op: OpSend, ID: "m1", Input: input("x")})
	if got := c.untilDone(); fmt.Sprint(got) != fmt.Sprint(evs) {
		t.Fatalf("retry of the interrupted run: %v", got)
	}
	c.send(Request{Op: OpSend, ID: "m2", Input: input("x")})
	if evs := c.untilDone(); evs[0].ID != "4" || r.calls.Load() != 1 {
		t.Fatalf("m2 (torn in the index) must run anew after id 3: %+v", evs[0])
	}
}

// Stopping Serve cancels active runs, which still write their done, and
// closes every connection.
func TestShutdown(t *testing.T) {
	started := make(chan struct{})
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		emit(abi.StartEvent(t.Run, "test/m"))
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	c := ts.dial()
	c.send(Request{Op: OpSend, ID: "m1", Input: input("x")})
	idle := ts.dial()
	idle.send(Request{Op: OpResume, Session: "other"})
	idle.ping()
	<-started
	ts.stop()
	if evs := c.untilDone(); types(evs) != "start done:cancelled" {
		t.Fatalf("run stopped by shutdown: %s", types(evs))
	}
	c.wantEOF()
	idle.wantEOF()
	if _, err := Dial(context.Background(), ts.path); abi.CodeOf(err) != abi.ENOENT {
		t.Fatalf("Dial after shutdown: %v", err)
	}
}

// The history a turn gets is the same whether the earlier runs come from
// the session's in-memory cache (runs this server just finished) or are
// read back from the log (after a restart): same inputs, same events.
func TestHistoryFromCacheEqualsLog(t *testing.T) {
	dir := t.TempDir()
	var got []string
	record := runnerFunc(func(ctx context.Context, tr Turn, emit func(abi.Event) error) error {
		var xs []Exchange
		for _, p := range tr.History {
			x, err := p.Load()
			if err != nil {
				return err
			}
			xs = append(xs, x)
		}
		b, _ := json.Marshal(xs)
		got = append(got, string(b))
		for _, e := range []abi.Event{
			abi.StartEvent(tr.Run, "test/echo"),
			abi.TextMessage(tr.Run, "assistant", "answer to "+string(tr.Input)),
			{Type: abi.EvToolCall, CallID: "c1", Name: "fs.read", Arguments: json.RawMessage(`{"path":"/x"}`)},
		} {
			if err := emit(e); err != nil {
				return err
			}
		}
		return nil
	})
	ts := startServerIn(t, dir, record)
	c := ts.dial()
	for i := range 3 {
		c.send(Request{Op: OpSend, ID: fmt.Sprint("m", i), Input: input(fmt.Sprint("turn ", i))})
		c.untilDone()
	}
	ts.stop()
	ts = startServerIn(t, dir, record)
	c = ts.dial()
	c.send(Request{Op: OpSend, ID: "m3", Input: input("turn 3")})
	c.untilDone()
	if len(got) != 4 {
		t.Fatalf("%d turns recorded", len(got))
	}
	// Turn 2 saw runs 0 and 1 from the cache; turn 3, after the restart,
	// saw runs 0..2 from the log: their first two must be the same.
	var cached, logged []json.RawMessage
	json.Unmarshal([]byte(got[2]), &cached)
	json.Unmarshal([]byte(got[3]), &logged)
	if len(cached) != 2 || len(logged) != 3 {
		t.Fatalf("history lengths %d and %d, want 2 and 3", len(cached), len(logged))
	}
	for i := range cached {
		if string(cached[i]) != string(logged[i]) {
			t.Errorf("run %d from the cache:\n%s\nfrom the log:\n%s", i, cached[i], logged[i])
		}
	}
}
