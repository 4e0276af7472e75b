package t

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func init() { addBench("agent-loop", benchAgentLoop) }

// benchAgentLoop: the agent loop's cost per tool round-trip (scripted fake
// model asking for fs.read) against its floor measured in the same run —
// one fake-model call (model exec) plus one direct tool/fs.read exec.
func benchAgentLoop(t *testing.T, _ floors) {
	const n = 15
	fake := newFakeChat(t)
	root, work := agentRoot(t, fake, "bencher", "--tool", "fs.read")
	os.WriteFile(filepath.Join(work, "notes.txt"), []byte("bench"), 0o644)
	agentObj := filepath.Join(root, "agent/bencher")
	call := fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}}
	timeRun := func(calls int) time.Duration {
		ds := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			for j := 0; j < calls; j++ {
				fake.script(call)
			}
			fake.script(fakeStep{Text: "ok"})
			start := time.Now()
			mustOK(t, run(t, runOpts{}, agentObj, "--session", fmt.Sprintf("b%d-%d", calls, i), "read"))
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[n/2]
	}
	one, five := timeRun(1), timeRun(5)
	perTrip := (five - one) / 4
	model := medianWallOK(t, n, func() {
		fake.script(fakeStep{Text: "ok"})
		mustOK(t, run(t, runOpts{}, filepath.Join(root, "model/fake/chat"), "hi"))
	})
	tool := medianWallOK(t, n, func() {
		mustOK(t, run(t, runOpts{dir: work}, filepath.Join(root, "tool/fs.read"), `{"path":"notes.txt"}`))
	})
	floor := model + tool
	note := fmt.Sprintf("floor: one fake-model exec (%v) + one tool/fs.read exec (%v), same run", model.Round(time.Microsecond), tool.Round(time.Microsecond))
	addRow(row{figure: "agent run with 1 fs.read round-trip", ours: ms(one), floor: ms(floor),
		note: note + "; ours: 2 model calls + 1 tool + agent start"})
	addRow(row{figure: "agent loop per extra tool round-trip", ours: ms(perTrip), floor: ms(floor),
		note: fmt.Sprintf("(5 trips - 1 trip)/4, median of %d", n)})
}

func medianWallOK(t *testing.T, n int, fn func()) time.Duration {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		fn()
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[n/2]
}
