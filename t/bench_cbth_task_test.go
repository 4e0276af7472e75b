package t

import (
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func init() { addBench("TASK", benchTask) }

// TASK: `cbth task run --json -- true` on a warm daemon (job and task rows
// in one transaction, the supervisor started and its identity durable
// before the command runs) vs the exec floor, and the time until the
// command's job is ready (the end recorded with its job in one
// transaction).
func benchTask(t *testing.T, f floors) {
	home := cbthHome(t, "")
	mustOK(t, cbth(t, home, "daemon", "ensure"))
	var runs, ready []time.Duration
	for range 30 {
		start := time.Now()
		cmd := exec.Command(applet("cbth"), "task", "run", "--json", "--source-thread-id", "bench", "--summary", "b", "--", "true")
		cmd.Env = append(cmd.Environ(), "CBTH_HOME="+home)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, time.Since(start))
		var task cbthTask
		if err := json.Unmarshal(out, &task); err != nil {
			t.Fatal(err)
		}
		waitTask(t, home, task.TaskID, "exited")
		ready = append(ready, time.Since(start))
	}
	slices.Sort(runs)
	slices.Sort(ready)
	addRow(row{figure: "TASK warm cbth task run --json -- true", ours: ms(runs[len(runs)/2]), floor: ms(f.hello),
		note: "returns once the supervisor's identity is durable; floor: static Go hello; no goal set"})
	addRow(row{figure: "TASK task run to job ready", ours: ms(ready[len(ready)/2]), floor: ms(f.hello),
		note: "includes the client's inspect polling"})
}
