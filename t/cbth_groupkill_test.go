package t

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// groupLoad is the client side of the group-commit kill test: what was
// tried and what was acknowledged.
type groupLoad struct {
	home      string
	mu        sync.Mutex
	tried     map[string]string // dedupe key -> thread
	acked     map[string]string // dedupe key -> job id, answered exit 0
	completed map[string]bool   // job id -> `job complete` answered exit 0
	triedDone map[string]bool   // job id -> a complete was tried
	failures  int
}

// cbthRun runs cbth with input and a bound, returning exit 0's stdout.
func (g *groupLoad) cbthRun(stdin string, args ...string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, applet("cbth"), args...)
	cmd.Env = append(os.Environ(), "CBTH_HOME="+g.home)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		g.mu.Lock()
		g.failures++
		g.mu.Unlock()
	}
	return string(out), err == nil
}

func (g *groupLoad) try(key, thread string) {
	g.mu.Lock()
	g.tried[key] = thread
	g.mu.Unlock()
}

func (g *groupLoad) submitter(stop <-chan struct{}, w int) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key, thread := fmt.Sprintf("s%d-%d", w, i), fmt.Sprintf("gk-%d", w%5)
		g.try(key, thread)
		out, ok := g.cbthRun("", "job", "submit", "--target", "cli", "--thread-id", thread, "--task-kind", "k",
			"--summary", key, "--dedupe-key", key, "--json")
		var j cbthJob
		if !ok || json.Unmarshal([]byte(out), &j) != nil || j.JobID == "" {
			continue
		}
		g.mu.Lock()
		g.acked[key] = j.JobID
		g.triedDone[j.JobID] = true
		g.mu.Unlock()
		if i%2 == 0 { // every other job is completed right away
			if _, ok := g.cbthRun("", "job", "complete", "--job-id", j.JobID, "--summary", "done "+key); ok {
				g.mu.Lock()
				g.completed[j.JobID] = true
				g.mu.Unlock()
			}
		}
	}
}

func (g *groupLoad) bulk(stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var in strings.Builder
		for n := range 400 {
			key := fmt.Sprintf("b%d-%d", i, n)
			g.try(key, "gk-bulk")
			fmt.Fprintf(&in, `{"target":"cli","thread_id":"gk-bulk","task_kind":"k","summary":%q,"dedupe_key":%q}`+"\n", key, key)
		}
		out, _ := g.cbthRun(in.String(), "job", "submit", "--from-jsonl", "-", "--json")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r bulkResult
			if json.Unmarshal([]byte(line), &r) != nil || !r.OK {
				continue
			}
			g.mu.Lock()
			g.acked[fmt.Sprintf("b%d-%d", i, r.Line-1)] = r.JobID
			g.mu.Unlock()
		}
	}
}

// TestCbthGroupCommitSurvivesKill: concurrent single and bulk submits and
// completes while the daemon is SIGKILLed again and again, in the middle
// of its group commits. After a restart, every submit and complete that
// was acknowledged is in the store; nothing is there that nobody asked
// for; every ready job is in its thread's FIFO (a complete is one atomic
// change even when it shared its transaction); and an unacknowledged
// submit retried with its dedupe key finds the job it may have created,
// never a second one. CBTH_GROUPKILL_SECONDS sets the load's length.
func TestCbthGroupCommitSurvivesKill(t *testing.T) {
	secs := 10
	if n, err := strconv.Atoi(os.Getenv("CBTH_GROUPKILL_SECONDS")); err == nil && n > 0 {
		secs = n
	}
	home := cbthHome(t, "")
	g := &groupLoad{home: home, tried: map[string]string{}, acked: map[string]string{}, completed: map[string]bool{},
		triedDone: map[string]bool{}}
	mustOK(t, cbth(t, home, "daemon", "ensure"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); g.submitter(stop, w) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); g.bulk(stop) }()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	kills := 0
	var grouped int64
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(200+rng.IntN(500)) * time.Millisecond)
		raw, err := os.ReadFile(filepath.Join(home, "run", "daemon.pid"))
		var info struct{ PID int }
		if err != nil || json.Unmarshal(raw, &info) != nil || info.PID <= 0 {
			continue
		}
		// The figure is read just before the kill: a daemon under this
		// load commits many writes per fsync.
		var st cbthStatus
		if out, ok := g.cbthRun("", "daemon", "status", "--json"); ok && json.Unmarshal([]byte(out), &st) == nil &&
			st.PID == info.PID {
			grouped = max(grouped, st.StoreWrites-st.StoreCommits)
		}
		if syscall.Kill(info.PID, syscall.SIGKILL) == nil {
			kills++
		}
	}
	close(stop)
	wg.Wait()
	mustOK(t, cbth(t, home, "daemon", "ensure"))

	var all []struct {
		JobID     string  `json:"job_id"`
		Status    string  `json:"status"`
		DedupeKey *string `json:"dedupe_key"`
		BatchID   *string `json:"batch_id"`
	}
	cbthJSON(t, home, &all, "job", "list", "--limit", "1000000")
	stored := map[string]string{} // key -> id
	status := map[string]string{} // id -> status
	for _, j := range all {
		if j.DedupeKey == nil || g.tried[*j.DedupeKey] == "" {
			t.Errorf("job %s (key %v) was never submitted by anyone", j.JobID, j.DedupeKey)
			continue
		}
		stored[*j.DedupeKey] = j.JobID
		status[j.JobID] = j.Status
		if j.Status == "ready" && j.BatchID == nil {
			t.Errorf("job %s is ready but in no batch: its complete was not atomic", j.JobID)
		}
		if j.Status != "ready" && j.Status != "running" {
			t.Errorf("job %s is %s", j.JobID, j.Status)
		}
	}
	lost := 0
	for key, id := range g.acked {
		if stored[key] != id {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged submit %s (job %s) is not in the store after the kills (found %q)", key, id, stored[key])
			}
		}
	}
	for id := range g.completed {
		if status[id] != "ready" {
			t.Errorf("acknowledged complete of %s: job is %q after the kills", id, status[id])
		}
	}
	// Retrying what was never answered is safe with the dedupe key.
	retried := 0
	for key, thread := range g.tried {
		if _, ok := g.acked[key]; ok || retried >= 20 || strings.HasPrefix(key, "b") {
			continue
		}
		retried++
		var j cbthJob
		cbthJSON(t, home, &j, "job", "submit", "--target", "cli", "--thread-id", thread, "--task-kind", "k",
			"--summary", key, "--dedupe-key", key)
		if prev, ok := stored[key]; ok && j.JobID != prev {
			t.Errorf("retried submit %s: got job %s, but %s was stored", key, j.JobID, prev)
		}
	}
	mustOK(t, cbth(t, home, "doctor"))
	t.Logf("%d kills; %d submits tried, %d acknowledged, %d stored; %d completes acknowledged; %d client failures; "+
		"%d unacknowledged submits retried; up to %d writes shared a commit", kills, len(g.tried), len(g.acked),
		len(stored), len(g.completed), g.failures, retried, grouped)
	if kills < 3 || len(g.acked) < 100 {
		t.Fatalf("too little happened to prove anything: %d kills, %d acknowledged", kills, len(g.acked))
	}
	if grouped == 0 {
		t.Errorf("no daemon was seen sharing a commit between writes: the kills did not hit group commits")
	}
}
