package sock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/sockstore"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// runnerFunc adapts a function to Runner.
type runnerFunc func(ctx context.Context, t Turn, emit func(abi.Event) error) error

func (f runnerFunc) Run(ctx context.Context, t Turn, emit func(abi.Event) error) error {
	return f(ctx, t, emit)
}

// countRunner counts calls and hands each to fn.
type countRunner struct {
	calls atomic.Int32
	fn    runnerFunc
}

func (r *countRunner) Run(ctx context.Context, t Turn, emit func(abi.Event) error) error {
	r.calls.Add(1)
	return r.fn(ctx, t, emit)
}

// echo emits start, the input as one delta, and a message.
func echo(ctx context.Context, t Turn, emit func(abi.Event) error) error {
	for _, e := range []abi.Event{
		abi.StartEvent(t.Run, "test/echo"),
		abi.DeltaEvent(t.Run, string(t.Input)),
		abi.TextMessage(t.Run, "assistant", string(t.Input)),
	} {
		if err := emit(e); err != nil {
			return err
		}
	}
	return nil
}

// testServer is a Server on a socket in a temp dir, with a sockstore.DirStore under
// the same dir.
type testServer struct {
	t      *testing.T
	dir    string
	path   string
	store  sockstore.DirStore
	srv    *Server
	cancel context.CancelFunc
	done   chan error
}

func startServer(t *testing.T, r Runner, opts ...func(*Server)) *testServer {
	t.Helper()
	return startServerIn(t, t.TempDir(), r, opts...)
}

// startServerIn serves with the sessions kept under dir, so a second
// server over the same dir sees the first one's sessions. opts adjust the
// Server before it starts.
func startServerIn(t *testing.T, dir string, r Runner, opts ...func(*Server)) *testServer {
	t.Helper()
	ts := &testServer{t: t, dir: dir, path: filepath.Join(dir, "obj.sock"), done: make(chan error, 1)}
	ts.store = sockstore.DirStore{Dir: func(k SessionKey) string {
		return filepath.Join(dir, "sessions", strconv.FormatUint(uint64(k.UID), 10), k.Name)
	}}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: ts.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = &Server{Runner: r, Store: ts.store, Logf: t.Logf, ShutdownTimeout: 2 * time.Second, credOf: testCred}
	for _, o := range opts {
		o(ts.srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	go func() { ts.done <- ts.srv.Serve(ctx, ln) }()
	t.Cleanup(ts.stop)
	return ts
}

// stop stops the server and waits for Serve; it may be called twice.
func (ts *testServer) stop() {
	ts.t.Helper()
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	ts.cancel = nil
	select {
	case err := <-ts.done:
		if err != nil {
			ts.t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		ts.t.Errorf("Serve did not return after cancel")
	}
}

// sessionDir is where uid's session name lives.
func (ts *testServer) sessionDir(uid uint32, name string) string {
	return ts.store.Dir(SessionKey{UID: uid, Name: name})
}

// testCred plays uids: a client bound to a socket named "uid-N-…" is uid N;
// any other peer gets its real SO_PEERCRED credentials.
func testCred(c *net.UnixConn) (peer.Cred, error) {
	cred, err := peer.Of(c)
	if err != nil {
		return cred, err
	}
	if a, ok := c.RemoteAddr().(*net.UnixAddr); ok && a != nil {
		if rest, ok := strings.CutPrefix(filepath.Base(a.Name), "uid-"); ok {
			n, _, _ := strings.Cut(rest, "-")
			uid, err := strconv.ParseUint(n, 10, 32)
			if err != nil {
				return peer.Cred{}, err
			}
			cred.UID = uint32(uid)
		}
	}
	return cred, nil
}

// testClient is a Client with test helpers; reads time out so a bug
// fails the test instead of hanging it.
type testClient struct {
	*Client
	t *testing.T
}

var clientSeq atomic.Int64

// dial connects as the process's own uid.
func (ts *testServer) dial() *testClient {
	ts.t.Helper()
	c, err := Dial(context.Background(), ts.path)
	if err != nil {
		ts.t.Fatal(err)
	}
	tc := &testClient{Client: c, t: ts.t}
	ts.t.Cleanup(func() { c.Close() })
	return tc
}

// dialAs connects as uid (see testCred).
func (ts *testServer) dialAs(uid uint32) *testClient {
	ts.t.Helper()
	dir, err := os.MkdirTemp("", "sockc")
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { os.RemoveAll(dir) })
	laddr := &net.UnixAddr{Name: filepath.Join(dir, fmt.Sprintf("uid-%d-%d", uid, clientSeq.Add(1))), Net: "unix"}
	nc, err := net.DialUnix("unix", laddr, &net.UnixAddr{Name: ts.path, Net: "unix"})
	if err != nil {
		ts.t.Fatal(err)
	}
	c := newClient(nc)
	ts.t.Cleanup(func() { c.Close() })
	return &testClient{Client: c, t: ts.t}
}

func (c *testClient) send(req Request) {
	c.t.Helper()
	if err := c.Send(req); err != nil {
		c.t.Fatalf("Send(%+v): %v", req, err)
	}
}

// next reads one frame within 5 s.
func (c *testClient) next() abi.Event {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	e, err := c.Next()
	if err != nil {
		c.t.Fatalf("Next: %v", err)
	}
	return e
}

// untilDone reads frames up to and including the done frame of a run.
func (c *testClient) untilDone() []abi.Event {
	c.t.Helper()
	var out []abi.Event
	for {
		e := c.next()
		out = append(out, e)
		if e.Type == abi.EvDone {
			return out
		}
		if e.Type == abi.EvError && e.Run == "" {
			c.t.Fatalf("request error: %s %s", e.Code, e.Message)
		}
	}
}

// wantError reads one frame and checks it is a run-less error with code.
func (c *testClient) wantError(code abi.Code) {
	c.t.Helper()
	e := c.next()
	if e.Type != abi.EvError || e.Code != code || e.Run != "" || e.ID != "" {
		c.t.Fatalf("got %+v, want a run-less %s error frame", e, code)
	}
}

// wantEOF checks the server closes the connection.
func (c *testClient) wantEOF() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	e, err := c.Next()
	if err == nil {
		c.t.Fatalf("got %+v, want EOF", e)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open")
	}
}

func (c *testClient) ping() {
	c.t.Helper()
	c.send(Request{Op: OpPing})
	if e := c.next(); e.Type != abi.EvPong {
		c.t.Fatalf("got %+v, want pong", e)
	}
}

// types lists the frame types, for compact comparisons.
func types(evs []abi.Event) string {
	var b []string
	for _, e := range evs {
		s := string(e.Type)
		if e.Type == abi.EvDone {
			s += ":" + e.Status
		}
		if e.Type == abi.EvError {
			s += ":" + string(e.Code)
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

// checkStamped checks every frame carries run and consecutive ids from first.
func checkStamped(t *testing.T, evs []abi.Event, run string, first uint64) {
	t.Helper()
	for i, e := range evs {
		if e.Run != run {
			t.Errorf("frame %d %+v: run %q, want %q", i, e, e.Run, run)
		}
		if want := strconv.FormatUint(first+uint64(i), 10); e.ID != want {
			t.Errorf("frame %d %+v: id %q, want %q", i, e, e.ID, want)
		}
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func input(s string) []byte { return []byte(strconv.Quote(s)) }

// ownerOf is the uid that owns path (not following a symlink).
func ownerOf(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}
