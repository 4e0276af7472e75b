package t

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type cbthTask struct {
	TaskID     string  `json:"task_id"`
	JobID      string  `json:"job_id"`
	State      string  `json:"state"`
	ExitStatus *int    `json:"exit_status"`
	Reason     *string `json:"reason"`
	JobStatus  string  `json:"job_status"`
}

func taskRun(t *testing.T, home string, argv ...string) cbthTask {
	t.Helper()
	args := append([]string{"task", "run", "--json", "--source-thread-id", "TT", "--summary", "task"}, "--")
	r := mustOK(t, cbth(t, home, append(args, argv...)...))
	var task cbthTask
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil || task.TaskID == "" || task.JobID == "" {
		t.Fatalf("task run: %v\n%s", err, r)
	}
	return task
}

func waitTask(t *testing.T, home, id string, states ...string) cbthTask {
	t.Helper()
	var ti cbthTask
	waitFor(t, 15*time.Second, "task "+id+" to reach "+strings.Join(states, "|"), func() bool {
		cbthJSON(t, home, &ti, "task", "inspect", id)
		for _, s := range states {
			if ti.State == s && ti.JobStatus != "running" {
				return true
			}
		}
		return false
	})
	return ti
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestCbthTaskFailureResult(t *testing.T) {
	home := cbthHome(t, "")
	task := taskRun(t, home, "sh", "-c", "echo hi; exit 3")
	ti := waitTask(t, home, task.TaskID, "failed")
	if ti.ExitStatus == nil || *ti.ExitStatus != 3 {
		t.Fatalf("task = %+v", ti)
	}
	var j cbthJob
	cbthJSON(t, home, &j, "job", "query", task.JobID)
	if j.Status != "failed" || j.FailureReason == nil || !strings.Contains(*j.FailureReason, "hi") ||
		!strings.Contains(*j.FailureReason, "exit status 3") || j.Artifact == nil {
		t.Fatalf("job = %+v", j)
	}
	body, err := os.ReadFile(j.Artifact.ManagedPath)
	if err != nil || !strings.Contains(string(body), "exit_status: 3") || !strings.Contains(string(body), "hi") {
		t.Fatalf("result artifact %q %v", body, err)
	}
	ok := taskRun(t, home, "sh", "-c", "echo fine")
	waitTask(t, home, ok.TaskID, "exited")
	cbthJSON(t, home, &j, "job", "query", ok.JobID)
	if j.Status != "ready" {
		t.Errorf("exit 0 task job = %s", j.Status)
	}
}

func TestCbthTaskCancelKillsGroup(t *testing.T) {
	home := cbthHome(t, "")
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	task := taskRun(t, home, "sh", "-c", "sleep 300 & echo $! > "+pidFile+"; sleep 300")
	var bg int
	waitFor(t, 10*time.Second, "background sleep pid", func() bool {
		b, _ := os.ReadFile(pidFile)
		bg, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return bg > 0
	})
	var ti cbthTask
	cbthJSON(t, home, &ti, "task", "cancel", task.TaskID)
	ti = waitTask(t, home, task.TaskID, "cancelled")
	if ti.JobStatus != "cancelled" {
		t.Errorf("job after cancel: %+v", ti)
	}
	waitFor(t, 5*time.Second, "background sleep to die with its group", func() bool { return !alive(bg) })
	cbthErr(t, home, "EEXIST", 1, "task", "cancel", task.TaskID)
}

// A daemon restart marks tasks it can no longer supervise as failed.
func TestCbthTaskDaemonRestart(t *testing.T) {
	home := cbthHome(t, "")
	task := taskRun(t, home, "sleep", "300")
	_, pid := daemonStatus(t, home)
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid, "daemon gone")
	var ti cbthTask
	cbthJSON(t, home, &ti, "task", "inspect", task.TaskID)
	if ti.State != "failed" || ti.JobStatus != "failed" || ti.Reason == nil || !strings.Contains(*ti.Reason, "daemon restarted") {
		t.Fatalf("after restart: %+v", ti)
	}
}

// A task past --timeout-seconds ends when its process tree does: the
// supervisor does not wait out a grace period on itself (it waited on
// its own end, then SIGKILLed the shim's pid, which was already reaped
// and could name another process by then).
func TestCbthTaskTimeoutEndsPromptly(t *testing.T) {
	home := cbthHome(t, "")
	args := []string{"task", "run", "--json", "--source-thread-id", "TT", "--summary", "task", "--timeout-seconds", "1", "--", "sleep", "30"}
	start := time.Now()
	r := mustOK(t, cbth(t, home, args...))
	var task cbthTask
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil {
		t.Fatalf("task run: %v\n%s", err, r)
	}
	ti := waitTask(t, home, task.TaskID, "failed")
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("a task with a 1 s timeout, whose sleep dies at SIGTERM, ended after %v (want about 1 s)", took.Round(time.Millisecond))
	}
	if ti.Reason == nil || !strings.Contains(*ti.Reason, "timeout") {
		t.Errorf("reason %v, want the timeout", ti.Reason)
	}
	// 18446744074 s overflows a time.Duration (it wrapped to 290 ms).
	r = cbth(t, home, "task", "run", "--json", "--source-thread-id", "TT", "--summary", "task",
		"--timeout-seconds", "18446744074", "--", "true")
	if r.code != 2 || !strings.Contains(r.stdout, `"EINVAL"`) {
		t.Errorf("a timeout that overflows: want EINVAL exit 2, got\n%s", r)
	}
}
