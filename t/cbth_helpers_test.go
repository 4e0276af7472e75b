package t

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cbthHome makes a private CBTH_HOME with config.ini holding cfg and stops
// its daemon when the test ends.
func cbthHome(t *testing.T, cfg string) string {
	t.Helper()
	h := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(h, 0o700); err != nil {
		t.Fatal(err)
	}
	if cfg != "" {
		if err := os.WriteFile(filepath.Join(h, "config.ini"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		r := run(t, runOpts{env: []string{"CBTH_HOME=" + h}, timeout: 30 * time.Second}, applet("cbth"), "daemon", "stop")
		if r.code != 0 {
			t.Logf("daemon stop: %s", r)
		}
	})
	return h
}

// cbth runs the installed cbth hardlink against home.
func cbth(t testing.TB, home string, args ...string) result {
	t.Helper()
	return run(t, runOpts{env: []string{"CBTH_HOME=" + home}}, applet("cbth"), args...)
}

// cbthJSON runs cbth … --json, requires exit 0 and decodes the answer
// (the object, or its items when v points to a slice) into v.
func cbthJSON(t testing.TB, home string, v any, args ...string) {
	t.Helper()
	r := mustOK(t, cbth(t, home, append(args, "--json")...))
	if err := fromEnvelope([]byte(r.stdout), v); err != nil {
		t.Fatalf("cbth %v: bad JSON %v\n%s", args, err, r)
	}
}

// cbthErr runs cbth … --json expecting failure with code and exit status.
func cbthErr(t testing.TB, home, code string, exit int, args ...string) {
	t.Helper()
	r := cbth(t, home, append(args, "--json")...)
	var e struct {
		OK    bool
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || e.OK || e.Error.Code != code || r.code != exit {
		t.Fatalf("cbth %v: want %s exit %d, got:\n%s", args, code, exit, r)
	}
}

type cbthJob struct {
	JobID         string            `json:"job_id"`
	Status        string            `json:"status"`
	AcceptedAt    string            `json:"accepted_at"`
	BatchID       *string           `json:"batch_id"`
	ArtifactID    *string           `json:"artifact_id"`
	FailureReason *string           `json:"failure_reason"`
	ReadOnly      bool              `json:"delivery_read_only"`
	Approval      bool              `json:"delivery_requires_approval"`
	Network       bool              `json:"delivery_requires_network"`
	Write         bool              `json:"delivery_requires_write_access"`
	PolicySources map[string]string `json:"delivery_policy_sources"`
	Artifact      *struct {
		ManagedPath string `json:"managed_path"`
		SHA256      string `json:"sha256"`
		SizeBytes   int64  `json:"size_bytes"`
	} `json:"artifact"`
}

type cbthBatch struct {
	BatchID                string   `json:"batch_id"`
	SourceThreadID         string   `json:"source_thread_id"`
	State                  string   `json:"state"`
	JobIDs                 []string `json:"job_ids"`
	ArtifactIDs            []string `json:"artifact_ids"`
	FirstReadyAt           string   `json:"first_ready_at"`
	RedeliveryWindowEndsAt *string  `json:"redelivery_window_ends_at"`
	CloseReason            *string  `json:"close_reason"`
	ReplayPolicy           string   `json:"replay_policy"`
	HeadAttempt            *struct {
		State      string `json:"state"`
		Generation int    `json:"generation"`
	} `json:"head_attempt"`
}

func submit(t testing.TB, home, thread string, extra ...string) cbthJob {
	t.Helper()
	var j cbthJob
	cbthJSON(t, home, &j, append([]string{"job", "submit", "--target", "cli", "--thread-id", thread,
		"--task-kind", "ci", "--summary", "job on " + thread}, extra...)...)
	return j
}

func inspectHead(t testing.TB, home, thread string) *cbthBatch {
	t.Helper()
	var r struct{ Batch *cbthBatch }
	cbthJSON(t, home, &r, "batch", "inspect-head", "--source-thread-id", thread)
	return r.Batch
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// daemonRunning reads `cbth daemon status` without starting a daemon.
func daemonStatus(t testing.TB, home string) (running bool, pid int) {
	t.Helper()
	var s struct {
		Running bool
		PID     int
	}
	cbthJSON(t, home, &s, "daemon", "status")
	return s.Running, s.PID
}

// waitGone waits until process pid has exited. After a SIGKILL the daemon
// needs a moment to die, and a `daemon status` sent in that moment is
// accepted by the kernel and then reset (ECONNREFUSED, exit 69): ask /proc,
// not the dying daemon.
func waitGone(t testing.TB, pid int, what string) {
	t.Helper()
	waitFor(t, 20*time.Second, what, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err)
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
