package t

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func init() { addBench("DESKTOP", benchDesktop) }

// DESKTOP: a bridge wake's mandatory bridge-preflight (sweep, reconcile,
// five files published) and the claim-next-ready peek, with 50 bound
// threads each holding a ready batch, against the exec floor. Issue 14
// sets no goal; the figures show what a wake costs.
func benchDesktop(t *testing.T, f floors) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	mustOK(t, cbth(t, home, "desktop", "installation-state", "repair", "--read-transport", "direct_file_read",
		"--read-transport-capability", "validated", "--writeback-capability", "validated", "--json"))
	const threads = 50
	for i := 0; i < threads; i++ {
		th := fmt.Sprintf("bench-%d", i)
		var j cbthJob
		cbthJSON(t, home, &j, "job", "submit", "--target", "desktop", "--thread-id", th, "--task-kind", "k", "--summary", "s")
		cbthJSON(t, home, &j, "job", "complete", "--job-id", j.JobID, "--summary", "done")
		mustOK(t, cbth(t, home, "desktop", "binding", "repair", "--source-thread-id", th, "--caller-automation-id", "a-"+th, "--json"))
	}
	median := func(args ...string) time.Duration {
		ds := make([]time.Duration, 0, 30)
		for i := 0; i < 30; i++ {
			cmd := exec.Command(applet("cbth"), args...)
			cmd.Env = append(cmd.Environ(), "CBTH_HOME="+home)
			s := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cbth %v: %v\n%s", args, err, out)
			}
			ds = append(ds, time.Since(s))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	pf := median("desktop", "bridge-preflight", "--bridge-thread-id", "bench", "--json")
	addRow(row{figure: fmt.Sprintf("DESKTOP bridge-preflight, %d ready threads", threads), ours: ms(pf), floor: ms(f.hello),
		note: "issue 14 sets no goal; floor: static Go hello"})
	cl := median("desktop", "claim-next-ready", "--bridge-thread-id", "bench", "--json")
	addRow(row{figure: "DESKTOP claim-next-ready (pure peek)", ours: ms(cl), floor: ms(f.hello)})
}
