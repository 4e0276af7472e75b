package t

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/t/codexfake"
)

// codexBinDir is where t/npm/install.sh put the pinned @openai/codex.
func codexBinDir(t testing.TB) string {
	t.Helper()
	cache := os.Getenv("NPM_CACHE")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache", "cortexfs-npm")
	}
	dir := filepath.Join(cache, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(dir, "codex")); err != nil {
		out, ierr := exec.Command(filepath.Join(repoRoot, "t", "npm", "install.sh")).CombinedOutput()
		if ierr != nil {
			t.Fatalf("the real codex is required: t/npm/install.sh failed: %v\n%s", ierr, out)
		}
	}
	return dir
}

// codexVersions are the codex releases delivery must work with: the first
// with turn/start clientUserMessageId (0.136.0) and the pinned one.
var codexVersions = []struct{ name, dir string }{{"0.169", ""}, {"0.136", "codex-0.136"}}

// codexDir is a version's bin directory under the npm cache ("" is the
// pinned one, installed by t/npm/install.sh).
func codexDir(t testing.TB, sub string) string {
	t.Helper()
	if sub == "" {
		return codexBinDir(t)
	}
	codexBinDir(t) // installs every pinned peer
	cache := os.Getenv("NPM_CACHE")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache", "cortexfs-npm")
	}
	dir := filepath.Join(cache, sub, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(dir, "codex")); err != nil {
		t.Fatalf("codex in %s is required (make peers): %v", dir, err)
	}
	return dir
}

// cliWorld is one CLI scenario: a fake model, a CODEX_HOME pointing at it,
// a trusted project dir and a cbth home.
type cliWorld struct {
	t         *testing.T
	fake      *codexfake.Server
	home      string
	proj      string
	codexHome string
	env       []string
	bin       string // the codex bin directory
}

const cliConfig = `[daemon]
idle_timeout = 20
[delivery]
max_wait_window = 0
min_delivery_interval = 0
cooldown_window = 1
max_turn_observation_window = 60
`

// newCLIWorld builds the world; sandbox is the codex sandbox_mode.
func newCLIWorld(t *testing.T, sandbox string) *cliWorld {
	t.Helper()
	return newCLIWorldBin(t, sandbox, codexBinDir(t))
}

// newCLIWorldBin is newCLIWorld with codex from bin.
func newCLIWorldBin(t *testing.T, sandbox, bin string) *cliWorld {
	t.Helper()
	fake, err := codexfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	w := &cliWorld{t: t, fake: fake, home: cbthHome(t, cliConfig), bin: bin}
	w.proj = filepath.Join(t.TempDir(), "proj")
	w.codexHome = filepath.Join(t.TempDir(), "codex-home")
	for _, d := range []string{w.proj, w.codexHome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := strings.Replace(fake.ConfigTOML(w.proj), `sandbox_mode = "read-only"`, fmt.Sprintf("sandbox_mode = %q", sandbox), 1)
	if err := os.WriteFile(filepath.Join(w.codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = []string{"CBTH_HOME=" + w.home, "CODEX_HOME=" + w.codexHome, "CODEXFAKE_API_KEY=test",
		"PATH=" + bin + ":" + os.Getenv("PATH"), "TERM=xterm-256color"}
	return w
}

// cbth runs cbth in the world.
func (w *cliWorld) cbth(args ...string) result {
	w.t.Helper()
	return run(w.t, runOpts{env: w.env, dir: w.proj}, applet("cbth"), args...)
}

func (w *cliWorld) json(v any, args ...string) {
	w.t.Helper()
	r := mustOK(w.t, w.cbth(append(args, "--json")...))
	if err := fromEnvelope([]byte(r.stdout), v); err != nil {
		w.t.Fatalf("cbth %v: %v\n%s", args, err, r)
	}
}

// foreground runs `cbth ARGS` (cli run / new / resume) on a real pty with
// a real terminal size: the Codex TUI attaches through it.
func (w *cliWorld) foreground(args ...string) *ptyProc {
	w.t.Helper()
	line := "cd " + shq(w.proj) + " && exec env"
	for _, e := range w.env {
		line += " " + shq(e)
	}
	line += " " + shq(applet("cbth"))
	for _, a := range args {
		line += " " + shq(a)
	}
	p := startPTY(w.t, "/bin/sh", "-c", line)
	_ = unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120})
	return p
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var boundRE = regexp.MustCompile(`cbth: bound thread id: ([0-9a-f-]{36})`)

// newThread starts `cbth new` with a strict-safe explicit profile and
// returns the pty and the bound thread id it printed.
func (w *cliWorld) newThread(extra ...string) (*ptyProc, string) {
	w.t.Helper()
	p := w.foreground(append([]string{"new", "--session-allows-approval", "false", "--session-allows-network", "false",
		"--session-allows-write-access", "false"}, extra...)...)
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		if m := boundRE.FindStringSubmatch(p.output()); m != nil {
			return p, m[1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.t.Fatalf("cbth new never printed the bound thread id; pty:\n%s\ndaemon log:\n%s", p.output(), w.daemonLog())
	return nil, ""
}

func (w *cliWorld) daemonLog() string {
	b, _ := os.ReadFile(filepath.Join(w.home, "log", "daemon.log"))
	return string(b)
}

// readyJob submits a strict-safe (read-only, nothing required) job for
// thread and completes it; it returns the job id.
func (w *cliWorld) readyJob(thread, summary string) string {
	w.t.Helper()
	var j cbthJob
	w.json(&j, "job", "submit", "--target", "cli", "--thread-id", thread, "--task-kind", "ci", "--summary", summary,
		"--delivery-read-only", "true", "--delivery-requires-approval", "false", "--delivery-requires-network", "false",
		"--delivery-requires-write-access", "false")
	w.json(&j, "job", "complete", "--job-id", j.JobID, "--summary", "result of "+summary)
	return j.JobID
}

type cliAttempt struct {
	AttemptID                    string  `json:"attempt_id"`
	State                        string  `json:"state"`
	DeliveryRPCState             *string `json:"delivery_rpc_state"`
	DeliveryRPCCorrelationMarker *string `json:"delivery_rpc_correlation_marker"`
	DeliveryTurnID               *string `json:"delivery_turn_id"`
	ManagedSessionID             *string `json:"managed_session_id"`
	SessionEpoch                 *int64  `json:"session_epoch"`
	DeliveryAcceptedAt           *string `json:"delivery_accepted_at"`
	DeliveryObservationState     *string `json:"delivery_observation_state"`
	DeliveryObservationDeadline  *string `json:"delivery_observation_deadline"`
	LastObservedTurnEvent        *string `json:"last_observed_turn_event"`
	LastObservedTurnEventAt      *string `json:"last_observed_turn_event_at"`
}

type cliBatch struct {
	BatchID      string       `json:"batch_id"`
	State        string       `json:"state"`
	ReplayPolicy string       `json:"replay_policy"`
	CloseReason  *string      `json:"close_reason"`
	Summary      *string      `json:"summary"`
	HeadAttempt  *cliAttempt  `json:"head_attempt"`
	Attempts     []cliAttempt `json:"attempts"`
}

func (w *cliWorld) batchOfJob(job string) cliBatch {
	w.t.Helper()
	var j cbthJob
	w.json(&j, "job", "query", "--job-id", job)
	if j.BatchID == nil {
		w.t.Fatalf("job %s has no batch", job)
	}
	var b cliBatch
	w.json(&b, "batch", "inspect", "--batch-id", *j.BatchID)
	return b
}

// waitBatch polls the job's batch until cond holds.
func (w *cliWorld) waitBatch(job string, d time.Duration, what string, cond func(b cliBatch) bool) cliBatch {
	w.t.Helper()
	var b cliBatch
	end := time.Now().Add(d)
	for {
		b = w.batchOfJob(job)
		if cond(b) {
			return b
		}
		if time.Now().After(end) {
			js, _ := json.MarshalIndent(b, "", " ")
			w.t.Fatalf("timed out waiting for %s; batch:\n%s\ndaemon log:\n%s", what, js, w.daemonLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type cliSession struct {
	ManagedSessionID      string  `json:"managed_session_id"`
	BoundThreadID         *string `json:"bound_thread_id"`
	SessionEpoch          int64   `json:"session_epoch"`
	SessionState          string  `json:"session_state"`
	CapabilityState       string  `json:"capability_state"`
	SessionAllowsWrite    *bool   `json:"session_allows_write_access"`
	DeliveryBlockedReason *string `json:"delivery_blocked_reason"`
	AppServerPID          *int64  `json:"app_server_pid"`
	AppServerURL          *string `json:"app_server_url"`
}

func (w *cliWorld) session(thread string) cliSession {
	w.t.Helper()
	var s cliSession
	w.json(&s, "cli", "session", "inspect", "--thread-id", thread)
	return s
}

type auditRow struct {
	Action  string `json:"action"`
	From    string `json:"from_state"`
	To      string `json:"to_state"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
}

func (w *cliWorld) audit(thread string) []auditRow {
	w.t.Helper()
	var rows []auditRow
	w.json(&rows, "audit", "list", "--source-thread-id", thread, "--limit", "1000")
	return rows
}

func countAudit(rows []auditRow, action, from, to string) int {
	n := 0
	for _, r := range rows {
		if r.Action == action && (from == "" || r.From == from) && (to == "" || r.To == to) {
			n++
		}
	}
	return n
}

func writeExec(path, body string) error { return os.WriteFile(path, []byte(body), 0o755) }
