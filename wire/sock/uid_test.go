package sock

import (
	"context"
	"os"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Rule 11: the session key is (peer uid, name); one uid never sees,
// resumes, retries into or cancels another uid's session.
func TestSessionsPerUID(t *testing.T) {
	turns := make(chan Turn, 4)
	r := &countRunner{fn: func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		turns <- t
		return echo(ctx, t, emit)
	}}
	ts := startServer(t, r)
	alice, bob := ts.dialAs(1000), ts.dialAs(2000)

	alice.send(Request{Op: OpSend, ID: "m1", Input: input("alice's secret")})
	aliceRun := alice.untilDone()
	if tr := <-turns; tr.Session != (SessionKey{UID: 1000, Name: "default"}) || tr.Peer.UID != 1000 {
		t.Fatalf("alice's turn: session %v, peer %v", tr.Session, tr.Peer)
	}

	// Same name, same client id: bob's own session, a new run.
	bob.send(Request{Op: OpSend, ID: "m1", Input: input("bob")})
	bobRun := bob.untilDone()
	tr := <-turns
	if tr.Session.UID != 2000 || len(tr.History) != 0 {
		t.Fatalf("bob's turn: session %v, history %v", tr.Session, tr.History)
	}
	if bobRun[0].Run == aliceRun[0].Run || bobRun[0].ID != "1" || r.calls.Load() != 2 {
		t.Fatalf("bob's m1 was not a fresh run in his own session: %+v", bobRun[0])
	}

	// Bob resuming "default" sees his frames only.
	watch := ts.dialAs(2000)
	watch.send(Request{Op: OpResume, Session: "default"})
	for _, want := range bobRun {
		if got := watch.next(); got.Run != bobRun[0].Run || got.ID != want.ID || got.Text == "\"alice's secret\"" {
			t.Fatalf("bob's resume got %+v", got)
		}
	}

	// Separate directories, owned by each uid when we can chown.
	da, db := ts.sessionDir(1000, "default"), ts.sessionDir(2000, "default")
	if da == db {
		t.Fatalf("both uids share %s", da)
	}
	if os.Geteuid() == 0 {
		for uid, dir := range map[uint32]string{1000: da, 2000: db} {
			if got := ownerOf(t, dir); got != uid {
				t.Errorf("%s owned by %d, want %d", dir, got, uid)
			}
		}
	}
}
