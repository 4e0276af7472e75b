package t

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Usage errors are EINVAL (exit 2): resume without a thread id, and empty
// ids anywhere an id is required.
func TestCbthUsageErrors(t *testing.T) {
	home := cbthHome(t, "")
	cbthErr(t, home, "EINVAL", 2, "resume")
	cbthErr(t, home, "EINVAL", 2, "resume", "")
	cbthErr(t, home, "EINVAL", 2, "batch", "inspect", "--batch-id", "")
	cbthErr(t, home, "EINVAL", 2, "batch", "inspect")
	cbthErr(t, home, "EINVAL", 2, "job", "query", "")
	cbthErr(t, home, "EINVAL", 2, "task", "inspect", "")
	cbthErr(t, home, "EINVAL", 2, "cli", "session", "inspect", "")
	// close-head with no open batch is an error, not a silent exit 0.
	cbthErr(t, home, "ENOENT", 1, "batch", "close-head", "--source-thread-id", "nothing-here", "--reason", "operator_closed_unconfirmed")
}

// A daemon that cannot start says why, with its own error code and the
// log line, instead of ECONNREFUSED.
func TestCbthDaemonStartFailureSaysWhy(t *testing.T) {
	home := cbthHome(t, "[daemon]\nidle_timeuot = 5\n")
	r := cbth(t, home, "daemon", "ping", "--json")
	if r.code != 2 || !strings.Contains(r.stdout, `"code":"EINVAL"`) || !strings.Contains(r.stdout, "idle_timeuot") {
		t.Fatalf("start failure: %s", r)
	}
}

// doctor fails a home whose socket path does not fit sun_path, and the
// commands say so clearly.
func TestCbthSocketPathTooLong(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, strings.Repeat("h", 120-len(base)))
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	r := run(t, runOpts{env: []string{"CBTH_HOME=" + home}}, applet("cbth"), "doctor", "--json")
	var rep struct {
		OK     bool
		Checks []struct {
			Name   string
			OK     bool
			Detail string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.OK || r.code != 1 {
		t.Fatalf("doctor with a %d-byte socket path: %s", len(home)+len("/run/cbth.sock"), r)
	}
	found := false
	for _, c := range rep.Checks {
		found = found || !c.OK && strings.Contains(c.Detail, "sun_path")
	}
	if !found {
		t.Fatalf("no failing sun_path check: %+v", rep.Checks)
	}
	r = run(t, runOpts{env: []string{"CBTH_HOME=" + home}}, applet("cbth"), "daemon", "ping", "--json")
	if r.code != 2 || !strings.Contains(r.stdout, `"code":"EINVAL"`) || !strings.Contains(r.stdout, "sun_path") {
		t.Fatalf("ping with a too-long socket path: %s", r)
	}
}

// A corrupt store is detected before anything writes to it: the daemon
// refuses to run and the file is kept byte for byte.
func TestCbthCorruptStoreRefused(t *testing.T) {
	home := cbthHome(t, "")
	for i := range 20 {
		submit(t, home, "C"+strings.Repeat("x", i))
	}
	mustOK(t, cbth(t, home, "daemon", "stop"))
	db := filepath.Join(home, "cbth.db")
	os.Remove(db + "-wal")
	os.Remove(db + "-shm")
	b, err := os.ReadFile(db)
	if err != nil || len(b) < 3*4096 {
		t.Fatalf("store %d bytes %v", len(b), err)
	}
	for i := 4096 + 100; i < 3*4096; i++ {
		b[i] = 0xA5
	}
	os.WriteFile(db, b, 0o600)
	before := sha256.Sum256(b)
	r := cbth(t, home, "daemon", "ping", "--json")
	if r.code == 0 || !strings.Contains(r.stdout, "corrupt") {
		t.Fatalf("daemon ran on a corrupt store: %s", r)
	}
	time.Sleep(200 * time.Millisecond)
	after, _ := os.ReadFile(db)
	if sha256.Sum256(after) != before {
		t.Fatal("the corrupt store was written to")
	}
	if _, err := os.Stat(db + "-wal"); err == nil {
		if fi, _ := os.Stat(db + "-wal"); fi.Size() > 0 {
			t.Fatal("the corrupt store got a write-ahead log")
		}
	}
	r = cbth(t, home, "doctor", "--json")
	if r.code != 1 || !strings.Contains(r.stdout, "corrupt") {
		t.Fatalf("doctor on a corrupt store: %s", r)
	}
}

// The home's and run dir's modes are checked on every request, not only
// before autostart: a home that became group/world accessible fails closed.
func TestCbthModesCheckedOnEveryRequest(t *testing.T) {
	home := cbthHome(t, "")
	submit(t, home, "M")
	for _, dir := range []string{home, filepath.Join(home, "run")} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cbthErr(t, home, "EACCES", 13, "job", "submit", "--target", "cli", "--thread-id", "M", "--task-kind", "k", "--summary", "s")
		os.Chmod(dir, 0o700)
		submit(t, home, "M")
	}
}

// Read-only views never start the daemon; daemon status carries versions.
func TestCbthViewsWithoutDaemon(t *testing.T) {
	home := cbthHome(t, "")
	var apps []any
	cbthJSON(t, home, &apps, "cli", "app-servers")
	if running, _ := daemonStatus(t, home); running || len(apps) != 0 {
		t.Fatalf("cli app-servers started a daemon (running %v) or listed %v", running, apps)
	}
	var s struct {
		Running       bool
		Version       *string `json:"version"`
		ClientVersion string  `json:"client_version"`
	}
	cbthJSON(t, home, &s, "daemon", "status")
	if s.Running || s.Version != nil || s.ClientVersion == "" {
		t.Fatalf("status of a stopped daemon: %+v", s)
	}
	mustOK(t, cbth(t, home, "daemon", "ensure"))
	cbthJSON(t, home, &s, "daemon", "status")
	if !s.Running || s.Version == nil || *s.Version == "" || *s.Version != s.ClientVersion {
		t.Fatalf("status of a running daemon: %+v", s)
	}
}

// The operator pin: artifact pin sets operator_pin_until, which holds the
// artifact past its other retention, and --clear lets it go.
func TestCbthArtifactPin(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n[artifacts]\nmin_artifact_ttl = 0\npost_close_ttl = 0\n")
	j := submit(t, home, "P")
	res := filepath.Join(t.TempDir(), "r.txt")
	os.WriteFile(res, []byte("keep me"), 0o600)
	mustOK(t, cbth(t, home, "job", "complete", "--job-id", j.JobID, "--summary", "s", "--result-file", res))
	cbthJSON(t, home, &j, "job", "query", j.JobID)
	art := *j.ArtifactID
	type artifact struct {
		OperatorPinUntil *string `json:"operator_pin_until"`
		GCEligibleAt     *string `json:"gc_eligible_at"`
		GCAt             *string `json:"gc_at"`
	}
	var a artifact
	cbthJSON(t, home, &a, "artifact", "pin", "--artifact-id", art, "--for", "1h")
	if a.OperatorPinUntil == nil || a.GCEligibleAt != nil { // an open batch still refers to it
		t.Fatalf("pinned: %+v", a)
	}
	mustOK(t, cbth(t, home, "batch", "close-head", "--source-thread-id", "P", "--reason", "operator_closed_unconfirmed"))
	time.Sleep(2500 * time.Millisecond) // sweeps run every second
	var q struct {
		Artifact *artifact `json:"artifact"`
	}
	cbthJSON(t, home, &q, "job", "query", j.JobID)
	if q.Artifact.GCAt != nil || q.Artifact.GCEligibleAt == nil || *q.Artifact.GCEligibleAt != *a.OperatorPinUntil {
		t.Fatalf("a pinned artifact of a closed batch: %+v", q.Artifact)
	}
	cbthErr(t, home, "EINVAL", 2, "artifact", "pin", "--artifact-id", art, "--until", "2000-01-01T00:00:00Z")
	cbthErr(t, home, "EINVAL", 2, "artifact", "pin", "--artifact-id", art)
	cbthErr(t, home, "ENOENT", 1, "artifact", "pin", "--artifact-id", "art_nope", "--clear")
	cbthJSON(t, home, &a, "artifact", "pin", "--artifact-id", art, "--clear")
	waitFor(t, 15*time.Second, "the unpinned artifact to be collected", func() bool {
		cbthJSON(t, home, &q, "job", "query", j.JobID)
		return q.Artifact.GCAt != nil
	})
}
