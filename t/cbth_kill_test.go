package t

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The kill campaign: tasks and jobs are started concurrently while the
// daemon is SIGKILLed at random points; after each kill the next daemon's
// recovery must leave every job/task pairing consistent, no process of a
// task running unsupervised, and every pid-reuse decoy (a stranger that
// got a recorded pid) alive. CBTH_KILL_ROUNDS sets the size (make soak).
func TestCbthKillCampaign(t *testing.T) {
	rounds, budget := 12, 50*time.Second
	if n, err := strconv.Atoi(os.Getenv("CBTH_KILL_ROUNDS")); err == nil && n > 0 {
		rounds, budget = n, time.Duration(n)*10*time.Second
	}
	if testing.Short() {
		rounds = 3
	}
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	token := fmt.Sprintf("cbth18kill%d", time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	c := &campaign{t: t, home: home, token: token}
	defer c.cleanup()
	start := time.Now()
	done := 0
	for round := 0; round < rounds && time.Since(start) < budget; round++ {
		c.round(rng, round)
		done++
	}
	c.check(true)
	t.Logf("kill campaign: %d rounds, %d tasks started, %d kills, %d decoys spared, %d jobs in %v",
		done, c.tasks, c.kills, c.decoys, c.jobs, time.Since(start).Round(time.Second))
	if done < 3 {
		t.Fatalf("only %d rounds ran", done)
	}
	// The pid-reuse check is only a check if a stranger really held a
	// dead task's pid when a daemon recovered (root: ns_last_pid).
	switch {
	case os.Getuid() != 0:
		t.Logf("kill campaign: not root, so no pid-reuse decoys were planted (ns_last_pid needs root); run as root for that check")
	case c.decoys == 0:
		t.Fatalf("no pid-reuse decoy was planted in %d rounds: the never-signal-a-stranger check tested nothing", done)
	}
}

type campaign struct {
	t                          *testing.T
	home, token                string
	mu                         sync.Mutex
	pids                       map[string]int // task id -> recorded supervisor pid
	decoyCmds                  []*exec.Cmd
	tasks, kills, decoys, jobs int
	lastDaemon                 int
}

func (c *campaign) cleanup() {
	for _, d := range c.decoyCmds {
		d.Process.Kill()
	}
}

// quiet runs cbth with a short deadline and never fails the test: during
// a kill any call may be refused.
func (c *campaign) quiet(args ...string) result {
	return run(c.t, runOpts{env: []string{"CBTH_HOME=" + c.home, "CBTH_CLIENT_TIMEOUT=20"}, timeout: 40 * time.Second},
		applet("cbth"), args...)
}

func (c *campaign) round(rng *rand.Rand, round int) {
	t := c.t
	mustOK(t, c.quiet("daemon", "ensure"))
	_, pid := daemonStatus(t, c.home)
	c.lastDaemon = pid
	var wg sync.WaitGroup
	var killed atomic.Bool
	for w := range 4 {
		wg.Go(func() {
			for i := range 4 {
				if killed.Load() {
					return
				}
				if w == 3 {
					c.jobOps(fmt.Sprintf("kj%d-%d-%d", round, w, i))
					continue
				}
				// A mix of quick, slow and TERM-ignoring commands, each with
				// the campaign token in its argv so leftovers are findable.
				script := []string{"echo out; exit 0", "sleep 30", "trap '' TERM; sleep 30", "exit 3"}[rng.IntN(4)]
				r := c.quiet("task", "run", "--json", "--source-thread-id", "kill", "--summary", "k", "--",
					"sh", "-c", script, c.token)
				var tk struct {
					TaskID string `json:"task_id"`
					PID    *int   `json:"pid"`
				}
				if r.code == 0 && json.Unmarshal([]byte(r.stdout), &tk) == nil && tk.TaskID != "" {
					c.mu.Lock()
					c.tasks++
					if tk.PID != nil {
						if c.pids == nil {
							c.pids = map[string]int{}
						}
						c.pids[tk.TaskID] = *tk.PID
					}
					c.mu.Unlock()
				}
			}
		})
	}
	time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
	// Holding the start lock keeps the clients from starting the next
	// daemon until the decoys have taken the dead tasks' pids.
	unlock := c.holdStartLock()
	killed.Store(true)
	syscall.Kill(pid, syscall.SIGKILL)
	c.kills++
	waitFor(t, 20*time.Second, "killed daemon gone", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err)
	})
	c.spawnDecoys()
	unlock()
	wg.Wait()
	c.check(false)
}

// holdStartLock takes $CBTH_HOME/run/start.lock the way a client does
// before it starts a daemon.
func (c *campaign) holdStartLock() func() {
	f, err := os.OpenFile(filepath.Join(c.home, "run", "start.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		c.t.Fatal(err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}

// jobOps submits, completes (with a result file) and cancels jobs.
func (c *campaign) jobOps(thread string) {
	r := c.quiet("job", "submit", "--json", "--target", "cli", "--thread-id", thread, "--task-kind", "k", "--summary", "s")
	var j cbthJob
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &j) != nil {
		return
	}
	c.mu.Lock()
	c.jobs++
	c.mu.Unlock()
	res := filepath.Join(c.t.TempDir(), "r")
	os.WriteFile(res, []byte("result"), 0o600)
	c.quiet("job", "complete", "--job-id", j.JobID, "--summary", "ok", "--result-file", res)
	c.quiet("job", "cancel", "--job-id", j.JobID)
}

// spawnDecoys gives strangers the pids recorded for tasks whose processes
// are gone (root only: ns_last_pid), before the next daemon starts.
func (c *campaign) spawnDecoys() {
	if os.Getuid() != 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, pid := range c.pids {
		if n >= 3 {
			break
		}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if d := tryPid(pid); d != nil {
			c.decoyCmds = append(c.decoyCmds, d)
			c.decoys++
			n++
		}
		delete(c.pids, id)
	}
}

// tryPid starts a decoy with exactly pid, or nil if another process won it.
func tryPid(pid int) *exec.Cmd {
	for range 50 {
		if os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644) != nil {
			return nil
		}
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if cmd.Start() != nil {
			return nil
		}
		if cmd.Process.Pid == pid {
			go cmd.Wait()
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	return nil
}

type pairing struct {
	TaskID    string `json:"task_id"`
	JobID     string `json:"job_id"`
	State     string `json:"state"`
	JobStatus string `json:"job_status"`
	PID       *int   `json:"pid"`
}

// pairingOK judges one task/job pairing; a running task must be
// supervised by the live daemon (its supervisor pid is returned).
func pairingOK(p pairing, daemonPID int) (bool, int) {
	switch p.State {
	case "running":
		// Started after the restart by a call that was in flight.
		if p.PID != nil {
			if st, err := procStat(*p.PID); err == nil && st.ppid == daemonPID {
				return p.JobStatus == "running", *p.PID
			}
		}
		return false, 0
	case "exited":
		return p.JobStatus == "ready", 0
	case "failed":
		return p.JobStatus == "failed", 0
	case "cancelled":
		return p.JobStatus == "cancelled", 0
	}
	return false, 0
}

// check starts a daemon (recovery runs before it serves) and verifies
// every pairing, the processes and the decoys.
func (c *campaign) check(final bool) {
	t := c.t
	var list []pairing
	cbthJSON(t, c.home, &list, "task", "list", "--limit", "1000000")
	_, daemonPID := daemonStatus(t, c.home)
	supervised := map[int]bool{} // live supervisors (session ids) of the current daemon
	for _, p := range list {
		// A task that ends between the list and the /proc read is judged
		// again from a fresh inspect.
		for try := 0; ; try++ {
			ok, sup := pairingOK(p, daemonPID)
			if sup != 0 {
				supervised[sup] = true
			}
			if ok {
				break
			}
			if try == 3 {
				st, err := procStat(derefInt(p.PID))
				t.Fatalf("after recovery task %s is %s with job %s %s (daemon %d, supervisor %+v %v)",
					p.TaskID, p.State, p.JobID, p.JobStatus, daemonPID, st, err)
			}
			time.Sleep(200 * time.Millisecond)
			cbthJSON(t, c.home, &p, "task", "inspect", p.TaskID)
		}
	}
	// Every job a task run created has its task row, and vice versa.
	var all []cbthJob
	cbthJSON(t, c.home, &all, "job", "list", "--source-thread-id", "kill", "--limit", "1000000")
	if len(all) != len(list) {
		t.Fatalf("%d task jobs but %d task rows: a job and its task were not recorded together", len(all), len(list))
	}
	// No process of a task runs unsupervised: the token is in every
	// command's argv, and each must belong to a live supervisor's session.
	var left []string
	waitFor(t, 15*time.Second, "no task process left unsupervised", func() bool {
		left = c.leftovers(supervised)
		return len(left) == 0
	})
	for _, d := range c.decoyCmds {
		if !alive(d.Process.Pid) {
			t.Fatalf("decoy pid %d (a reused task pid) was signalled", d.Process.Pid)
		}
	}
	if final {
		mustOK(t, cbth(t, c.home, "doctor"))
	}
}

// leftovers lists live processes whose argv holds the campaign token and
// whose session is not one of the supervised ones.
func (c *campaign) leftovers(supervised map[int]bool) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(b), c.token) {
			continue
		}
		if st, err := procStat(pid); err == nil && supervised[st.session] {
			continue
		}
		out = append(out, fmt.Sprintf("%d %q", pid, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return out
}

type stat struct{ ppid, session int }

// procStat reads the parent and session of pid from /proc/PID/stat.
func procStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 4 {
		return stat{}, fmt.Errorf("short stat")
	}
	ppid, _ := strconv.Atoi(f[1])
	sid, _ := strconv.Atoi(f[3])
	return stat{ppid: ppid, session: sid}, nil
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
