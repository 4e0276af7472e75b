package t

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func init() { addBench("PF15-history", benchSessionHistory) }

// benchSessionHistory replays issue 15's defect 6: 100 turns of ~900 KB
// input in one socket session. Figures: the daemon's RSS growth (no
// history held: goal <= 96 MiB) and the cost of a late turn against an
// early one once the replay window is full (goal: flat, ratio <= 1.5).
func benchSessionHistory(t *testing.T, _ floors) {
	root := newRoot(t)
	dm := startDaemonArgs(t, root, "--session-quota", strconv.Itoa(1<<30), "--uid-quota", strconv.Itoa(2<<30))
	before := rssKiB(t, dm.cmd.Process.Pid)
	c := dial(t, dm.sock)
	in := strings.Repeat("x ", 450<<10)
	var early, late time.Duration
	peak := before
	for i := range 100 {
		start := time.Now()
		c.send(sendReq("m"+strconv.Itoa(i), "hist", in))
		fs := c.untilDone()
		if fs[len(fs)-1].Status != "ok" {
			t.Fatalf("turn %d: %s", i, types(fs))
		}
		d := time.Since(start)
		switch {
		case i >= 10 && i < 20: // the replay window (4 MiB by default) is full from turn 6 on
			early += d
		case i >= 90:
			late += d
		}
		peak = max(peak, rssKiB(t, dm.cmd.Process.Pid))
	}
	addRow(row{figure: "PF15 cortexfsd RSS growth, 100 x 900 KB turns", ours: mib(peak - before), goal: atMost(96, "MiB"),
		note: "one session; history is read from disk, not held (issue 15 measured 414 MiB for 100 x 1 MB)"})
	addRow(row{figure: "PF15 turn cost, turns 91-100", ours: ms(late / 10), floor: ms(early / 10), goal: ratioAtMost(1.5),
		note: "floor: turns 11-20 of the same session; replay bounded by history_bytes"})
}
