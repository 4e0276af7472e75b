package t

import (
	"encoding/json"
	"fmt"
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
	figure("TASK warm cbth task run --json -- true", runs[len(runs)/2].String(),
		fmt.Sprintf("%.2fx exec floor (returns once the supervisor's identity is durable)", ratio(runs[len(runs)/2], f.exec)))
	figure("TASK task run to job ready", ready[len(ready)/2].String(),
		fmt.Sprintf("%.2fx exec floor (includes the client's inspect polling)", ratio(ready[len(ready)/2], f.exec)))
}
