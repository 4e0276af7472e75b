package sock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// A temp session lives as long as the connection that uses it: its turns
// see each other's history; once the connection is gone its directory is
// removed. A session that also had an ordinary send is durable and stays.
func TestTempSessionLifetime(t *testing.T) {
	var histories []int
	ts := startServer(t, runnerFunc(func(ctx context.Context, t Turn, emit func(abi.Event) error) error {
		histories = append(histories, len(t.History))
		return echo(ctx, t, emit)
	}))
	c := ts.dial()
	for _, id := range []string{"m1", "m2"} {
		c.send(Request{Op: OpSend, ID: id, Session: "tmp", Input: input("hi"), Temp: true})
		if evs := c.untilDone(); types(evs) != "start delta message done:ok" {
			t.Fatalf("%s: %s", id, types(evs))
		}
		time.Sleep(20 * time.Millisecond) // room for the session to be (wrongly) dropped between turns
	}
	if len(histories) != 2 || histories[1] != 1 {
		t.Fatalf("second temp turn saw history %v, want the first turn", histories)
	}
	m := ts.dial()
	m.send(Request{Op: OpSend, ID: "t1", Session: "mixed", Input: input("hi"), Temp: true})
	m.untilDone()
	m.send(Request{Op: OpSend, ID: "d1", Session: "mixed", Input: input("hi")})
	m.untilDone()
	uid := uint32(os.Getuid())
	tmp, mixed := ts.sessionDir(uid, "tmp"), ts.sessionDir(uid, "mixed")
	if _, err := os.Lstat(tmp); err != nil {
		t.Fatalf("temp session gone while its connection is open: %v", err)
	}
	c.Close()
	m.Close()
	waitFor(t, "the temp session's directory to go", func() bool {
		_, err := os.Lstat(tmp)
		return errors.Is(err, fs.ErrNotExist)
	})
	if _, err := os.Stat(mixed); err != nil {
		t.Errorf("a session with an ordinary send was removed: %v", err)
	}
}
