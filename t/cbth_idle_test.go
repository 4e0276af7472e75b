package t

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonAlive checks the daemon's flock without talking to it (a status
// request would count as activity and keep it awake).
func daemonAlive(t *testing.T, home string) bool {
	f, err := os.OpenFile(filepath.Join(home, "run", "daemon.lock"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func TestCbthIdleExit(t *testing.T) {
	home := cbthHome(t, "[daemon]\nidle_timeout = 1\n[delivery]\nmax_wait_window = 0\n")
	mustOK(t, cbth(t, home, "daemon", "ping"))
	waitFor(t, 10*time.Second, "idle daemon to exit", func() bool { return !daemonAlive(t, home) })
	log, _ := os.ReadFile(filepath.Join(home, "log", "daemon.log"))
	if !strings.Contains(string(log), "exiting: idle") {
		t.Fatalf("log:\n%s", log)
	}
	// An active (running) job keeps it alive past the idle timeout.
	j := submit(t, home, "I")
	time.Sleep(2500 * time.Millisecond)
	if !daemonAlive(t, home) {
		t.Fatal("daemon exited with an active job")
	}
	mustOK(t, cbth(t, home, "job", "complete", "--job-id", j.JobID, "--summary", "ok"))
	// Only long-window durable work is left (24h redelivery window): exit.
	waitFor(t, 10*time.Second, "daemon to exit once the job is done", func() bool { return !daemonAlive(t, home) })
}

func TestCbthHelpEverywhere(t *testing.T) {
	home := cbthHome(t, "")
	cmds := [][]string{{}, {"doctor"}, {"audit", "list"}}
	for _, g := range []string{"daemon run", "daemon ensure", "daemon status", "daemon ping", "daemon stop",
		"job submit", "job complete", "job fail", "job cancel", "job query", "batch inspect-head", "batch inspect",
		"batch close-head", "task run", "task list", "task inspect", "task cancel"} {
		cmds = append(cmds, strings.Fields(g))
	}
	for _, c := range cmds {
		r := mustOK(t, cbth(t, home, append(c, "--help")...))
		if !strings.Contains(r.stdout, "usage: cbth") {
			t.Errorf("cbth %v --help: %s", c, r)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "run", "cbth.sock")); err == nil {
		t.Error("--help started a daemon")
	}
}
