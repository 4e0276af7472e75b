package t

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO (or any non-regular file) named as --result-file or
// --metadata-file is refused with EINVAL at once, and the daemon keeps
// answering: nothing ever opens a user-named path in a way that blocks.
func TestCbthFIFOInputsRefused(t *testing.T) {
	home := cbthHome(t, "")
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	j := submit(t, home, "F")
	quick := runOpts{env: []string{"CBTH_HOME=" + home}, timeout: 20 * time.Second}
	for _, args := range [][]string{
		{"job", "complete", "--job-id", j.JobID, "--summary", "s", "--result-file", fifo, "--json"},
		{"job", "submit", "--target", "cli", "--thread-id", "F", "--task-kind", "k", "--summary", "s", "--metadata-file", fifo, "--json"},
		{"job", "complete", "--job-id", j.JobID, "--summary", "s", "--result-file", "/dev/null", "--json"},
		{"job", "complete", "--job-id", j.JobID, "--summary", "s", "--result-file", t.TempDir(), "--json"},
	} {
		r := run(t, quick, applet("cbth"), args...)
		if r.code != 2 || !strings.Contains(r.stdout, `"code":"EINVAL"`) {
			t.Errorf("cbth %v: want EINVAL exit 2, got\n%s", args, r)
		}
	}
	if r := run(t, quick, applet("cbth"), "daemon", "ping"); r.code != 0 {
		t.Fatalf("the daemon stopped answering after the FIFO inputs:\n%s", r)
	}
	var q cbthJob
	cbthJSON(t, home, &q, "job", "query", j.JobID)
	if q.Status != "running" {
		t.Fatalf("a refused complete changed the job: %+v", q)
	}
	// Too large is EMSGSIZE, named as such.
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`{"x":"`+strings.Repeat("a", 70<<10)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cbthErr(t, home, "EMSGSIZE", 2, "job", "submit", "--target", "cli", "--thread-id", "F", "--task-kind", "k",
		"--summary", "s", "--metadata-file", big)
}

// The client opens --result-file itself, in its own mount view, and hands
// the daemon the descriptor: a client that cannot see a path cannot get it
// ingested by the daemon, which sees another mount view.
func TestCbthResultFileReadByClientOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("LOUD SKIP: needs root for a private mount namespace")
	}
	home := cbthHome(t, "")
	mustOK(t, cbth(t, home, "daemon", "ensure"))
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-18"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := submit(t, home, "S")
	// The client runs in a mount namespace where dir is an empty tmpfs.
	line := fmt.Sprintf("mount -t tmpfs none %s && exec %s job complete --job-id %s --summary s --result-file %s --json",
		shq(dir), shq(applet("cbth")), j.JobID, shq(secret))
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", line)
	cmd.Env = append(os.Environ(), "CBTH_HOME="+home)
	out, _ := cmd.Output()
	if !strings.Contains(string(out), `"code":"ENOENT"`) {
		t.Fatalf("a path the client cannot see was not refused: %s", out)
	}
	var q cbthJob
	cbthJSON(t, home, &q, "job", "query", j.JobID)
	if q.Status != "running" || q.Artifact != nil {
		t.Fatalf("the daemon ingested a file the client could not see: %+v", q)
	}
	// From the ordinary view the same command works, and the artifact holds
	// exactly what the client read.
	mustOK(t, cbth(t, home, "job", "complete", "--job-id", j.JobID, "--summary", "s", "--result-file", secret))
	cbthJSON(t, home, &q, "job", "query", j.JobID)
	if b, err := os.ReadFile(q.Artifact.ManagedPath); err != nil || string(b) != "TOP-SECRET-18" {
		t.Fatalf("artifact %q %v", b, err)
	}
}

// Requests and replies larger than one 1 MiB frame travel in parts:
// a 1.2 MB argv is accepted and run byte for byte, and the task list that
// shows it comes back whole. --limit is honoured above 100.
func TestCbthLargeRequestsAndReplies(t *testing.T) {
	home := cbthHome(t, "")
	out := filepath.Join(t.TempDir(), "argc")
	args := []string{"task", "run", "--json", "--source-thread-id", "L", "--summary", "big", "--",
		"sh", "-c", `echo $# > "$0"`, out}
	chunk := strings.Repeat("x", 100<<10)
	for range 12 {
		args = append(args, chunk)
	}
	r := run(t, runOpts{env: []string{"CBTH_HOME=" + home}, timeout: 30 * time.Second}, applet("cbth"), args...)
	if r.code != 0 {
		t.Fatalf("a 1.2 MB task run request: %s", r.String()[:min(len(r.String()), 2000)])
	}
	var task cbthTask
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil {
		t.Fatal(err)
	}
	waitTask(t, home, task.TaskID, "exited")
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "12" {
		t.Fatalf("the task saw %q arguments, want 12", b)
	}
	r = run(t, runOpts{env: []string{"CBTH_HOME=" + home}, timeout: 30 * time.Second}, applet("cbth"), "task", "list", "--json")
	var list []struct {
		Argv []string `json:"argv"`
	}
	if r.code != 0 || fromEnvelope([]byte(r.stdout), &list) != nil || len(list) != 1 || len(list[0].Argv) != 16 {
		t.Fatalf("task list over 1 MiB: exit %d, %d bytes of stdout, stderr %s", r.code, len(r.stdout), r.stderr)
	}
	for i := range 150 {
		submit(t, home, fmt.Sprint("lim", i%3))
	}
	var rows []json.RawMessage
	cbthJSON(t, home, &rows, "audit", "list", "--limit", "20000")
	if len(rows) <= 150 {
		t.Fatalf("audit list --limit 20000 gave %d rows", len(rows))
	}
	cbthErr(t, home, "EINVAL", 2, "audit", "list", "--limit", "0")
	cbthErr(t, home, "EINVAL", 2, "task", "list", "--limit", "-1")
}

// A stopped daemon (SIGSTOP) cannot hold a client forever: every call has
// a deadline and ends with ETIMEDOUT (exit 69) and a hint.
func TestCbthClientDeadline(t *testing.T) {
	home := cbthHome(t, "")
	_, pid := daemonStatus(t, home)
	if pid == 0 {
		mustOK(t, cbth(t, home, "daemon", "ensure"))
		_, pid = daemonStatus(t, home)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	start := time.Now()
	r := run(t, runOpts{env: []string{"CBTH_HOME=" + home, "CBTH_CLIENT_TIMEOUT=2"}, timeout: 30 * time.Second},
		applet("cbth"), "daemon", "ping", "--json")
	if r.code != 69 || !strings.Contains(r.stdout, `"code":"ETIMEDOUT"`) || !strings.Contains(r.stdout, "SIGSTOP") {
		t.Fatalf("client against a stopped daemon: %s", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the deadline took %v", d)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	mustOK(t, cbth(t, home, "daemon", "ping"))
}
