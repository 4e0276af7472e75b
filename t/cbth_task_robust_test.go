package t

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Arguments reach the command byte for byte, non-UTF-8 included.
func TestCbthTaskArgvBytes(t *testing.T) {
	home := cbthHome(t, "")
	out := filepath.Join(t.TempDir(), "out")
	arg := "a\xff\xfe\x80z é"
	task := taskRun(t, home, "sh", "-c", `printf %s "$1" > "$0"`, out, arg)
	waitTask(t, home, task.TaskID, "exited")
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, []byte(arg)) {
		t.Fatalf("the command got %q, want %q (%v)", got, arg, err)
	}
}

// A task runs with the environment and working directory of the client
// that asked for it, not those of whichever client started the daemon.
func TestCbthTaskClientEnvAndCwd(t *testing.T) {
	home := cbthHome(t, "")
	mustOK(t, run(t, runOpts{env: []string{"CBTH_HOME=" + home, "CBTH18_WHO=daemon-starter", "CBTH18_ONLY_DAEMON=1"}},
		applet("cbth"), "daemon", "ensure"))
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	r := mustOK(t, run(t, runOpts{env: []string{"CBTH_HOME=" + home, "CBTH18_WHO=client"}, dir: dir}, applet("cbth"),
		"task", "run", "--json", "--source-thread-id", "E", "--summary", "env", "--",
		"sh", "-c", `printf '%s|%s|%s' "$CBTH18_WHO" "${CBTH18_ONLY_DAEMON-unset}" "$PWD" > out`))
	var task cbthTask
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil {
		t.Fatal(err)
	}
	waitTask(t, home, task.TaskID, "exited")
	got, _ := os.ReadFile(out)
	if string(got) != "client|unset|"+dir {
		t.Fatalf("task saw %q, want the client's environment and cwd %q", got, "client|unset|"+dir)
	}
}

// After the spool is capped, inspect shows the true end of the output.
func TestCbthTaskTailAfterTruncation(t *testing.T) {
	home := cbthHome(t, "[tasks]\nspool_max_bytes = 100\ntail_bytes = 64\n")
	task := taskRun(t, home, "sh", "-c", `i=0; while [ $i -lt 400 ]; do echo line-$i; i=$((i+1)); done`)
	waitTask(t, home, task.TaskID, "exited")
	var ti struct {
		StdoutTail      string `json:"stdout_tail"`
		StdoutTruncated bool   `json:"stdout_truncated"`
	}
	cbthJSON(t, home, &ti, "task", "inspect", task.TaskID)
	if !strings.HasSuffix(strings.TrimSpace(ti.StdoutTail), "line-399") || !ti.StdoutTruncated {
		t.Fatalf("tail after truncation = %q (truncated %v), want it to end with line-399", ti.StdoutTail, ti.StdoutTruncated)
	}
}

// `daemon stop` leaves no task unsupervised: running tasks are cancelled
// with their jobs and their whole process trees end.
func TestCbthDaemonStopCancelsTasks(t *testing.T) {
	home := cbthHome(t, "")
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	task := taskRun(t, home, "sh", "-c", "sleep 300 & echo $! > "+pidFile+"; wait")
	var bg int
	waitFor(t, 10*time.Second, "background sleep pid", func() bool {
		b, _ := os.ReadFile(pidFile)
		bg, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return bg > 0
	})
	mustOK(t, cbth(t, home, "daemon", "stop"))
	waitFor(t, 10*time.Second, "the task's tree to end with the daemon", func() bool { return !alive(bg) })
	var ti cbthTask
	cbthJSON(t, home, &ti, "task", "inspect", task.TaskID)
	if ti.State != "cancelled" || ti.JobStatus != "cancelled" || ti.Reason == nil || !strings.Contains(*ti.Reason, "daemon stopped") {
		t.Fatalf("after daemon stop: %+v", ti)
	}
}

// At most [tasks] max_running tasks run at once; the next is EBUSY.
func TestCbthTaskConcurrencyCap(t *testing.T) {
	home := cbthHome(t, "[tasks]\nmax_running = 2\n")
	a := taskRun(t, home, "sleep", "300")
	b := taskRun(t, home, "sleep", "300")
	cbthErr(t, home, "EBUSY", 69, "task", "run", "--json", "--source-thread-id", "TT", "--summary", "third", "--", "true")
	mustOK(t, cbth(t, home, "task", "cancel", a.TaskID))
	c := taskRun(t, home, "true")
	waitTask(t, home, c.TaskID, "exited")
	mustOK(t, cbth(t, home, "task", "cancel", b.TaskID))
}

// Spools of ended tasks are collected after [tasks] spool_ttl; the result
// stays as the job's artifact.
func TestCbthTaskSpoolCollected(t *testing.T) {
	home := cbthHome(t, "[tasks]\nspool_ttl = 1\n")
	task := taskRun(t, home, "sh", "-c", "echo hello")
	waitTask(t, home, task.TaskID, "exited")
	var ti struct {
		SpoolDir       string  `json:"spool_dir"`
		SpoolCollected *string `json:"spool_collected_at"`
	}
	waitFor(t, 20*time.Second, "spool collected", func() bool {
		cbthJSON(t, home, &ti, "task", "inspect", task.TaskID)
		return ti.SpoolCollected != nil
	})
	if _, err := os.Stat(ti.SpoolDir); !os.IsNotExist(err) {
		t.Fatalf("spool dir %s still there: %v", ti.SpoolDir, err)
	}
	var j cbthJob
	cbthJSON(t, home, &j, "job", "query", task.JobID)
	if b, err := os.ReadFile(j.Artifact.ManagedPath); err != nil || !strings.Contains(string(b), "hello") {
		t.Fatalf("artifact after spool collection: %q %v", b, err)
	}
}

// Recovery never signals a process it cannot prove is its own: after the
// daemon is killed, a decoy that got the task's recorded pid survives the
// next daemon's start.
func TestCbthTaskRecoverySparesPidReuse(t *testing.T) {
	needRoot(t)
	home := cbthHome(t, "")
	task := taskRun(t, home, "sleep", "300")
	var ti struct {
		PID *int `json:"pid"`
	}
	cbthJSON(t, home, &ti, "task", "inspect", task.TaskID)
	if ti.PID == nil {
		t.Fatalf("no pid recorded: %+v", ti)
	}
	p := *ti.PID
	_, dpid := daemonStatus(t, home)
	syscall.Kill(dpid, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "daemon gone", func() bool { r, _ := daemonStatus(t, home); return !r })
	// Whatever still holds p is ended by us, the test, standing in for
	// "the task finished while nobody watched".
	syscall.Kill(-p, syscall.SIGKILL)
	syscall.Kill(p, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "recorded pid free (reaped)", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(p))
		return os.IsNotExist(err)
	})
	decoy := spawnWithPid(t, p)
	defer decoy.Process.Kill()
	cbthJSON(t, home, &ti, "task", "inspect", task.TaskID) // a new daemon reconciles first
	time.Sleep(500 * time.Millisecond)
	if !alive(p) {
		t.Fatalf("recovery killed the decoy that reused pid %d", p)
	}
	var after cbthTask
	cbthJSON(t, home, &after, "task", "inspect", task.TaskID)
	if after.State != "failed" || after.JobStatus != "failed" {
		t.Fatalf("task after recovery: %+v", after)
	}
}

// spawnWithPid starts a sleeping decoy (its own process group) whose pid is
// want, using ns_last_pid (root); it retries while other processes race.
func spawnWithPid(t *testing.T, want int) *exec.Cmd {
	t.Helper()
	for range 200 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(want-1)), 0o644); err != nil {
			t.Skipf("LOUD SKIP: cannot steer pid allocation: %v", err)
		}
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == want {
			go cmd.Wait()
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Fatalf("could not get pid %d for the decoy", want)
	return nil
}

// The two halves joined: a CortexFS object run as a task (detected from its
// runner shebang) completes its job with the run's final assistant message
// as the summary and the full event stream as the artifact; a failed run
// (an error frame, done with status error) fails the job with its code and
// message, whatever the exit status.
func TestCbthTaskEventStream(t *testing.T) {
	root := newRoot(t)
	home := cbthHome(t, "")
	echo := filepath.Join(root, "model", "debug", "echo")
	task := taskRun(t, home, echo, "the", "final", "answer")
	waitTask(t, home, task.TaskID, "exited")
	var j struct {
		cbthJob
		ResultSummary *string `json:"result_summary"`
	}
	cbthJSON(t, home, &j, "job", "query", task.JobID)
	if j.Status != "ready" || j.ResultSummary == nil || *j.ResultSummary != "the final answer" || j.Artifact == nil {
		t.Fatalf("event-stream task job: %+v summary %v", j.cbthJob, j.ResultSummary)
	}
	stream, err := os.ReadFile(j.Artifact.ManagedPath)
	if err != nil || !strings.HasPrefix(string(stream), `{"type":"start"`) || !strings.Contains(string(stream), `"type":"done"`) {
		t.Fatalf("artifact is not the full stream: %q %v", stream, err)
	}
	var ti struct {
		OutputFormat string `json:"output_format"`
	}
	cbthJSON(t, home, &ti, "task", "inspect", task.TaskID)
	if ti.OutputFormat != "events" {
		t.Errorf("output_format %q, want events (detected from the shebang)", ti.OutputFormat)
	}

	script := `echo '{"type":"start","run":"r1","agent":"a"}'; echo '{"type":"error","run":"r1","code":"ENOKEY","message":"no key for openai"}'; echo '{"type":"done","run":"r1","status":"error"}'`
	r := mustOK(t, cbth(t, home, "task", "run", "--json", "--jsonl-events", "--source-thread-id", "TT", "--summary", "agent", "--", "sh", "-c", script))
	var failed cbthTask
	json.Unmarshal([]byte(r.stdout), &failed)
	waitTask(t, home, failed.TaskID, "exited")
	cbthJSON(t, home, &j, "job", "query", failed.JobID)
	if j.Status != "failed" || j.FailureReason == nil || *j.FailureReason != "ENOKEY: no key for openai" {
		t.Fatalf("failed run: job %s reason %v", j.Status, j.FailureReason)
	}
}

// README's recipe, with a real agent: `cbth task run -- R/agent/NAME TASK`
// turns the agent's run into a ready job whose summary is the agent's final
// answer and whose artifact is the whole canonical stream, tool call
// included.
func TestCbthTaskRunsAnAgent(t *testing.T) {
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"/etc/hostname"}`}}},
		fakeStep{Text: "the review is done: nothing to change"})
	root, _ := agentRoot(t, fake, "reviewer", "--tool", "fs.read")
	sandboxBinds(t, root, "reviewer")
	home := cbthHome(t, "")
	task := taskRun(t, home, filepath.Join(root, "agent", "reviewer"), "review the staged diff")
	waitTask(t, home, task.TaskID, "exited")
	var j struct {
		cbthJob
		ResultSummary *string `json:"result_summary"`
	}
	cbthJSON(t, home, &j, "job", "query", task.JobID)
	if j.Status != "ready" || j.ResultSummary == nil || *j.ResultSummary != "the review is done: nothing to change" || j.Artifact == nil {
		t.Fatalf("agent task job: %+v summary %v", j.cbthJob, j.ResultSummary)
	}
	stream, err := os.ReadFile(j.Artifact.ManagedPath)
	if err != nil || !strings.Contains(string(stream), `"type":"tool_call"`) || !strings.Contains(string(stream), `"type":"done"`) {
		t.Fatalf("artifact is not the agent's whole stream: %q %v", stream, err)
	}
}
