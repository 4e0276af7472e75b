package t

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Restart with short windows: kill -9 the daemon, wait past the redelivery
// window, run any command -> the startup sweep closed the batch with
// redelivery_window_exhausted before the command was served.
func TestCbthSweepAfterKill9(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\nredelivery_window = 2\n")
	j := submit(t, home, "K")
	mustOK(t, cbth(t, home, "job", "complete", "--job-id", j.JobID, "--summary", "done"))
	b := inspectHead(t, home, "K")
	if b == nil || b.State != "materialized" || b.RedeliveryWindowEndsAt == nil {
		t.Fatalf("head %+v", b)
	}
	running, pid := daemonStatus(t, home)
	if !running || pid <= 0 {
		t.Fatal("no daemon after commands")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, "killed daemon to release its lock")
	ends, _ := time.Parse(time.RFC3339Nano, *b.RedeliveryWindowEndsAt)
	time.Sleep(time.Until(ends) + 300*time.Millisecond)
	var after cbthBatch
	cbthJSON(t, home, &after, "batch", "inspect", "--batch-id", b.BatchID) // starts a new daemon
	if after.State != "closed" || after.CloseReason == nil || *after.CloseReason != "redelivery_window_exhausted" {
		t.Fatalf("after restart: %+v", after)
	}
	_, pid2 := daemonStatus(t, home)
	if pid2 == pid {
		t.Fatal("same daemon pid after kill -9")
	}
	// The new daemon's log shows the close in its startup sweep, which runs
	// before it listens.
	log, _ := os.ReadFile(filepath.Join(home, "log", "daemon.log"))
	var startup string
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "startup sweep:") && strings.Contains(line, `"redelivery_window_exhausted":1`) {
			startup = line
		}
	}
	if startup == "" || strings.Index(string(log), startup) > strings.LastIndex(string(log), "serving ") {
		t.Fatalf("startup sweep did not close the batch before serving:\n%s", log)
	}
	var rows []struct {
		Actor, Action, Reason string
		To                    string `json:"to_state"`
	}
	cbthJSON(t, home, &rows, "audit", "list", "--entity-id", b.BatchID)
	found := false
	for _, r := range rows {
		found = found || (r.Actor == "sweep" && r.To == "closed" && strings.HasPrefix(r.Reason, "redelivery_window_exhausted"))
	}
	if !found {
		t.Errorf("no sweep close in the audit: %+v", rows)
	}
}

// Ten concurrent first commands start exactly one daemon; then 8 clients ×
// 200 submits give 1600 distinct jobs.
func TestCbthConcurrentStartAndSubmits(t *testing.T) {
	home := cbthHome(t, "")
	var wg sync.WaitGroup
	pids := make([]float64, 10)
	for i := range 10 {
		wg.Go(func() {
			var r map[string]any
			cbthJSON(t, home, &r, "daemon", "ping")
			pids[i], _ = r["pid"].(float64)
		})
	}
	wg.Wait()
	for _, p := range pids {
		if p == 0 || p != pids[0] {
			t.Fatalf("pings answered by pids %v", pids)
		}
	}
	var starts []any
	cbthJSON(t, home, &starts, "audit", "list", "--action", "daemon.start")
	if len(starts) != 1 {
		t.Fatalf("%d daemon starts, want 1", len(starts))
	}
	clients, per := 8, 200
	if testing.Short() {
		per = 20
	}
	ids := make([][]string, clients)
	for c := range clients {
		wg.Go(func() {
			for i := range per {
				var j cbthJob
				cbthJSON(t, home, &j, "job", "submit", "--target", "cli", "--thread-id", fmt.Sprintf("c%d", c),
					"--task-kind", "bulk", "--summary", fmt.Sprintf("job %d", i))
				ids[c] = append(ids[c], j.JobID)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, l := range ids {
		for _, id := range l {
			seen[id] = true
		}
	}
	var submits []any
	cbthJSON(t, home, &submits, "audit", "list", "--action", "job.submit", "--limit", "5000")
	if len(seen) != clients*per || len(submits) != clients*per {
		t.Fatalf("%d distinct job ids, %d audited submits, want %d", len(seen), len(submits), clients*per)
	}
}

// A connection from another uid is refused and audited; every file under
// CBTH_HOME is 0600 and every dir 0700 after a full scenario.
func TestCbthForeignUIDRefusedAndModes(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("LOUD SKIP: needs root to run a client as nobody")
	}
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	j := submit(t, home, "M")
	res := filepath.Join(t.TempDir(), "r.txt")
	os.WriteFile(res, []byte("result"), 0o644)
	mustOK(t, cbth(t, home, "job", "complete", "--job-id", j.JobID, "--summary", "ok", "--result-file", res))
	var task struct {
		TaskID string `json:"task_id"`
	}
	r := mustOK(t, cbth(t, home, "task", "run", "--json", "--source-thread-id", "M", "--summary", "t", "--", "sh", "-c", "echo out; echo err >&2"))
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil || task.TaskID == "" {
		t.Fatalf("task run: %v\n%s", err, r)
	}
	waitFor(t, 10*time.Second, "task end", func() bool {
		var ti struct{ State string }
		cbthJSON(t, home, &ti, "task", "inspect", task.TaskID)
		return ti.State == "exited"
	})

	// The client runs as nobody. With CAP_DAC_OVERRIDE (ambient) it can
	// traverse the 0700 home and open the 0600 socket, so only the daemon's
	// SO_PEERCRED check stands between it and the store.
	asNobody := func(caps []uintptr) (string, int) {
		cmd := exec.Command(applet("cbth"), "job", "query", j.JobID, "--json")
		cmd.Env = append(os.Environ(), "CBTH_HOME="+home)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534},
			AmbientCaps: caps}
		out, _ := cmd.Output()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := asNobody([]uintptr{1 /* CAP_DAC_OVERRIDE */})
	if code != 13 || !strings.Contains(out, `"code":"EACCES"`) || strings.Contains(out, j.JobID) {
		t.Fatalf("nobody with DAC override: exit %d %s", code, out)
	}
	if out, code := asNobody(nil); code != 13 || !strings.Contains(out, "EACCES") {
		t.Errorf("nobody without caps: exit %d %s", code, out)
	}
	var refusals []struct {
		ActorUID *int64 `json:"actor_uid"`
		Outcome  string
	}
	cbthJSON(t, home, &refusals, "audit", "list", "--action", "ipc.refused")
	if len(refusals) != 1 || refusals[0].ActorUID == nil || *refusals[0].ActorUID != 65534 || refusals[0].Outcome != "EACCES" {
		t.Fatalf("refusal audit = %+v", refusals)
	}
	mustOK(t, cbth(t, home, "doctor"))
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An old client gets a clear EPROTO from the daemon.
func TestCbthOldProtocolClient(t *testing.T) {
	home := cbthHome(t, "")
	mustOK(t, cbth(t, home, "daemon", "ensure"))
	c, err := net.Dial("unix", filepath.Join(home, "run", "cbth.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, `{"v":0,"id":1,"op":"daemon.ping"}`)
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var r struct {
		OK    bool
		Error struct{ Code, Message string }
	}
	if err != nil || json.Unmarshal(line, &r) != nil || r.OK || r.Error.Code != "EPROTO" || !strings.Contains(r.Error.Message, "v0") {
		t.Fatalf("old client got %q (%v)", line, err)
	}
}
