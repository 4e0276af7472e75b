package t

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"
)

func init() { addBench("PF5", benchPF5) }

// PF5: warm `cbth job submit --json` vs the exec floor; 8 concurrent
// clients × 500 durable submits (jobs/s, none lost); cold auto-start.
func benchPF5(t *testing.T, f floors) {
	cold := cbthHome(t, "")
	start := time.Now()
	mustOK(t, cbth(t, cold, "job", "submit", "--target", "cli", "--thread-id", "t0", "--task-kind", "k", "--summary", "s", "--json"))
	coldStart := time.Since(start)

	warm := cbthHome(t, "")
	mustOK(t, cbth(t, warm, "daemon", "ensure"))
	submit := func(thread string) (string, error) {
		cmd := exec.Command(applet("cbth"), "job", "submit", "--target", "cli", "--thread-id", thread, "--task-kind", "k", "--summary", "s", "--json")
		cmd.Env = append(cmd.Environ(), "CBTH_HOME="+warm)
		out, err := cmd.Output()
		if err != nil {
			return "", err
		}
		var v struct {
			JobID string `json:"job_id"`
		}
		return v.JobID, json.Unmarshal(out, &v)
	}
	ds := make([]time.Duration, 0, 60)
	for i := 0; i < 60; i++ {
		s := time.Now()
		if _, err := submit("warm"); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(s))
	}
	slices.Sort(ds)
	med := ds[len(ds)/2]
	figure("PF5 warm cbth job submit --json", med.String(), fmt.Sprintf("%.2fx exec floor (goal <= 1.3x)", ratio(med, f.exec)))

	const clients, each = 8, 500
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	var failures int
	start = time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := submit(fmt.Sprintf("thread-%d", c))
				mu.Lock()
				if err != nil || id == "" {
					failures++
				} else {
					seen[id] = true
				}
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	rate := float64(clients*each) / time.Since(start).Seconds()
	lost := clients*each - len(seen)
	figure("PF5 8 clients x 500 durable submits", fmt.Sprintf("%.0f jobs/s", rate), fmt.Sprintf("%d distinct jobs, %d lost, %d failed (goal >= 1000/s, 0 lost)", len(seen), lost, failures))
	figure("PF5 cold auto-start + first submit", coldStart.String(), fmt.Sprintf("%.1fx exec floor", ratio(coldStart, f.exec)))
}
