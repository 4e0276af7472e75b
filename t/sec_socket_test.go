package t

import (
	"bufio"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// framesWithin reads whatever frames arrive on c within d.
func framesWithin(t *testing.T, c *conn, d time.Duration) []string {
	t.Helper()
	var out []string
	c.c.SetReadDeadline(time.Now().Add(d))
	defer c.c.SetReadDeadline(time.Time{})
	for {
		line, err := c.rd.ReadString('\n')
		if err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				t.Fatalf("read: %v", err)
			}
			return out
		}
		out = append(out, strings.TrimSpace(line))
	}
}

// slowEcho is a send whose echo run takes about a second and a half.
func slowEcho(id, session, text string) map[string]any {
	return sendReq(id, session, map[string]any{
		"messages": []map[string]any{{"role": "user", "content": text}},
		"params":   map[string]any{"delay_ms": 100, "repeat": 4},
	})
}

// Issue 15, beyond the list (cross-user through sockets): on cortexfsd's
// model socket a session belongs to the peer uid that SO_PEERCRED names.
// Another uid who names root's session or run gets its own namespace, not
// root's: cancel of root's run is ENOENT, resume of root's session name
// follows the caller's own (empty) session, a send that reuses root's
// client id is a new run of the caller's; root's run is untouched and
// nothing of it reaches the other uid. Root is no exception the other way
// round, and the session files are the owner's alone (0700).
func TestSecurityCrossUserSocket(t *testing.T) {
	w := newRootWorld(t, "ctxt15e")
	w.start(t)
	const secret = "ROOT-SECRET-TEXT"
	rc := dial(t, w.d.sock)
	rc.send(slowEcho("m1", "rootsess", secret))
	start := rc.next()
	if start.Type != "start" || start.Run == "" {
		t.Fatalf("root's run: first frame %+v", start)
	}
	cs := dialAs(t, w.a, w.d.sock, 1)
	if len(cs) != 1 {
		t.Fatal("the second user cannot connect")
	}
	t.Cleanup(func() { cs[0].Close() })
	uc := &conn{t: t, c: cs[0], rd: bufio.NewReaderSize(cs[0], 64<<10)}

	reachForeign(t, uc, "the user", "root's", start.Run, "rootsess")
	uc.send(sendReq("m1", "rootsess", "mine"))
	var got []string
	for {
		f := uc.next()
		b, _ := json.Marshal(f)
		got = append(got, string(b))
		if f.Type == "done" || f.Type == "error" && f.Run == "" {
			break
		}
	}
	got = append(got, framesWithin(t, uc, 300*time.Millisecond)...)

	fs := append([]frame{start}, rc.untilDone()...)
	if last := fs[len(fs)-1]; last.Status != "ok" {
		t.Errorf("root's run ended %q, want ok", last.Status)
	}
	got = append(got, framesWithin(t, uc, 300*time.Millisecond)...)
	for _, g := range got {
		if strings.Contains(g, secret) || strings.Contains(g, start.Run) {
			t.Errorf("the user saw root's run: %s", g)
		}
	}
	if !strings.Contains(strings.Join(got, "\n"), `"mine"`) {
		t.Errorf("the user's own send with root's client id did not run as theirs:\n%s", strings.Join(got, "\n"))
	}

	// The other way round: root is no exception to the namespace.
	uc.send(slowEcho("u1", "usess", "USER-TEXT"))
	ustart := uc.next()
	if ustart.Type != "start" {
		t.Fatalf("the user's run: first frame %+v", ustart)
	}
	reachForeign(t, rc, "root", "the user's", ustart.Run, "usess")
	ufs := append([]frame{ustart}, uc.untilDone()...)
	if last := ufs[len(ufs)-1]; last.Status != "ok" {
		t.Errorf("the user's run ended %q, want ok", last.Status)
	}
	for _, g := range framesWithin(t, rc, 300*time.Millisecond) {
		if strings.Contains(g, "USER-TEXT") || strings.Contains(g, ustart.Run) {
			t.Errorf("root's connection saw the user's run: %s", g)
		}
	}

	// On disk: root's session is root's, 0700, and the user cannot read it.
	events := filepath.Join(w.root, "home/0/session/model/debug/echo/rootsess/events.jsonl")
	if r := w.as(t, "/bin/cat", events); r.code == 0 || strings.Contains(r.stdout, secret) {
		t.Errorf("the user read root's session log:\n%s", r)
	}
	own := filepath.Join(w.home, "session/model/debug/echo/rootsess/events.jsonl")
	if r := w.as(t, "/bin/cat", own); r.code != 0 || strings.Contains(r.stdout, secret) {
		t.Errorf("the user's own session named rootsess: %s", r)
	}
}

// reachForeign has c (who) try another uid's (whose) live run and session:
// cancelling the run is ENOENT, and resuming the session's name follows
// c's own session of that name, which is empty, so the pong comes first.
func reachForeign(t *testing.T, c *conn, who, whose, run, session string) {
	t.Helper()
	c.send(map[string]any{"op": "cancel", "id": run})
	if f := c.next(); f.Type != "error" || f.Code != "ENOENT" {
		t.Errorf("%s cancelled %s run: got %+v, want an ENOENT error", who, whose, f)
	}
	c.send(map[string]any{"op": "resume", "session": session, "after": "0"})
	c.send(map[string]any{"op": "ping"})
	if f := c.next(); f.Type != "pong" {
		t.Errorf("after resuming %s session name %s got %+v before the pong", whose, who, f)
	}
}
