package t

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cbthd "github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
)

func init() { addBench("PF5", benchPF5) }

// PF5: durable submits. A single `cbth job submit` against the start-up
// floor plus one fsync'd commit; 16 concurrent clients x 500 submits as
// processes (what scripts do) and over persistent connections (the
// daemon's group commit alone); the --from-jsonl bulk path; cold start.
func benchPF5(t *testing.T, f floors) {
	cold := cbthHome(t, "")
	start := time.Now()
	mustOK(t, cbth(t, cold, "job", "submit", "--target", "cli", "--thread-id", "t0", "--task-kind", "k", "--summary", "s", "--json"))
	coldStart := time.Since(start)

	warm := cbthHome(t, "")
	mustOK(t, cbth(t, warm, "daemon", "ensure"))
	submitArgs := []string{applet("cbth"), "job", "submit", "--target", "cli", "--thread-id", "warm", "--task-kind", "k",
		"--summary", "s", "--json"}
	hello, single := alternate(t, 60, []string{f.helloPath}, submitArgs, "CBTH_HOME="+warm)
	addRow(row{figure: "PF5 single cbth job submit (warm daemon)", ours: ms(single), floor: ms(hello + f.commit),
		goal: ratioAtMost(1.3), note: fmt.Sprintf("floor: static Go hello %v + one fsync'd SQLite commit %v, both in this run; "+
			"median of 60, alternating with hello", hello.Round(time.Microsecond), f.commit.Round(time.Microsecond))})

	const clients, each = 16, 500
	procs := cbthHome(t, "")
	mustOK(t, cbth(t, procs, "daemon", "ensure"))
	rate, lost, failed := concurrentSubmits(t, procs, clients, each, func(c, i int) (string, error) {
		cmd := exec.Command(applet("cbth"), "job", "submit", "--target", "cli", "--thread-id", fmt.Sprintf("thread-%d", c),
			"--task-kind", "k", "--summary", "s", "--json")
		cmd.Env = append(cmd.Environ(), "CBTH_HOME="+procs)
		out, err := cmd.Output()
		if err != nil {
			return "", err
		}
		var v struct {
			JobID string `json:"job_id"`
		}
		return v.JobID, json.Unmarshal(out, &v)
	})
	st := statusOf(t, procs)
	addRow(row{figure: "PF5 16 clients x 500 cbth job submit", ours: per(rate, "jobs/s"), goal: atLeast(1000, "jobs/s"),
		note: fmt.Sprintf("each submit a process (start-up + connect + durable insert); %d failed; %d submits in %d commits",
			failed, st.StoreWrites, st.StoreCommits)})
	addRow(row{figure: "PF5 jobs lost of 16 x 500", ours: per(float64(lost), "jobs"), goal: atMost(0, "jobs"),
		note: "acknowledged submits not stored afterwards"})

	ipcHome := cbthHome(t, "")
	mustOK(t, cbth(t, ipcHome, "daemon", "ensure"))
	h := home.Home{Root: ipcHome}
	rate, lost, failed = concurrentSubmits(t, ipcHome, clients, each, func(c, i int) (string, error) {
		var j jobs.Job
		err := cbthd.Call(context.Background(), h, cbthd.OpJobSubmit, jobs.SubmitRequest{TargetKind: "cli",
			SourceThreadID: fmt.Sprintf("thread-%d", c), TaskKind: "k", Summary: "s"}, &j)
		return j.JobID, err
	})
	st = statusOf(t, ipcHome)
	addRow(row{figure: "PF5 16 IPC clients x 500 submits", ours: per(rate, "jobs/s"), floor: per(1/f.commit.Seconds(), "jobs/s"),
		note: fmt.Sprintf("the daemon alone: in-process clients, one connection per request, no process start; floor: "+
			"one fsync'd commit per job; %d lost, %d failed; %d submits in %d commits", lost, failed, st.StoreWrites, st.StoreCommits)})

	bulkHome := cbthHome(t, "")
	mustOK(t, cbth(t, bulkHome, "daemon", "ensure"))
	const lines = 20000
	var in strings.Builder
	for i := range lines {
		fmt.Fprintf(&in, `{"target":"cli","thread_id":"bulk-%d","task_kind":"k","summary":"s%d"}`+"\n", i%64, i)
	}
	file := filepath.Join(t.TempDir(), "bulk.jsonl")
	os.WriteFile(file, []byte(in.String()), 0o600)
	cmd := exec.Command(applet("cbth"), "job", "submit", "--from-jsonl", file, "--json")
	cmd.Env = append(cmd.Environ(), "CBTH_HOME="+bulkHome)
	start = time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("bulk submit: %v", err)
	}
	ok := strings.Count(string(out), `"ok":true`)
	st = statusOf(t, bulkHome)
	addRow(row{figure: "PF5 cbth job submit --from-jsonl, 20000 lines", ours: per(float64(ok)/took.Seconds(), "jobs/s"),
		goal: atLeast(10000, "jobs/s"), note: fmt.Sprintf("one process; %d of %d lines ok, each answered once durable; %d commits",
			ok, lines, st.StoreCommits)})
	addRow(row{figure: "PF5 cold auto-start + first submit", ours: ms(coldStart), floor: ms(f.hello),
		note: "the daemon starts, checks and migrates its store, sweeps, then serves; no goal set"})
}

// concurrentSubmits runs clients x each submits against home h and returns
// jobs/s, how many acknowledged jobs are not in the store afterwards, and
// how many submits failed.
func concurrentSubmits(t *testing.T, h string, clients, each int, submit func(c, i int) (string, error)) (float64, int, int) {
	var mu sync.Mutex
	acked := map[string]bool{}
	failed := 0
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id, err := submit(c, i)
				mu.Lock()
				if err != nil || id == "" {
					failed++
				} else {
					acked[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rate := float64(len(acked)) / time.Since(start).Seconds()
	var all []struct {
		JobID string `json:"job_id"`
	}
	cbthJSON(t, h, &all, "job", "list", "--limit", "1000000")
	for _, j := range all {
		delete(acked, j.JobID)
	}
	return rate, len(acked), failed
}

func statusOf(t *testing.T, h string) cbthStatus {
	var st cbthStatus
	cbthJSON(t, h, &st, "daemon", "status")
	return st
}
