package t

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/t/codexfake"
)

// desktopWorld is one simulated Desktop installation: a cbth home, a real
// codex whose bridge thread's rollout carries relay markers (its model is
// the local fake), the automations the bridge arms, and the file whose
// identity stands for the Codex Desktop build in the fingerprint.
type desktopWorld struct {
	t          *testing.T
	home       string
	codexBuild string
	// The real codex bridge thread.
	fake      *codexfake.Server
	codexHome string
	proj      string
	codexEnv  []string
	bridge    string
	// Simulated Codex automations by id: the bridge updates them, the
	// caller heartbeat fires from them.
	automations map[string]*automation
	delivered   []desktopContinuation
}

type automation struct {
	state  string // ACTIVE or PAUSED
	prompt promptToken
	fired  int
}

// promptToken is what the bridge writes into the caller heartbeat prompt.
type promptToken struct {
	SourceThreadID   string `json:"source_thread_id"`
	BatchID          string `json:"batch_id"`
	AttemptID        string `json:"attempt_id"`
	Generation       int64  `json:"generation"`
	SnapshotRevision string `json:"snapshot_revision"`
}

type desktopContinuation struct {
	BatchID        string `json:"batch_id"`
	SourceThreadID string `json:"source_thread_id"`
	Summary        string `json:"summary"`
	Jobs           []struct {
		JobID         string  `json:"job_id"`
		ResultSummary *string `json:"result_summary"`
		Artifact      *struct {
			Text   *string `json:"text"`
			SHA256 string  `json:"sha256"`
		} `json:"artifact"`
	} `json:"jobs"`
}

const desktopConfig = `[delivery]
max_wait_window = 0
min_delivery_interval = 0
cooldown_window = 120
arm_pending_window = 120
max_delivery_attempts = 5
max_inline_artifact_bytes = 1024
[desktop]
pause_not_before_delay = 1
pause_deadline_window = 20
snapshot_reader_grace = 3
codex_bin = %s
`

func newDesktopWorld(t *testing.T) *desktopWorld {
	t.Helper()
	dir := t.TempDir()
	w := &desktopWorld{t: t, automations: map[string]*automation{}, codexBuild: filepath.Join(dir, "codex-desktop")}
	if err := os.WriteFile(w.codexBuild, []byte("build 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.home = cbthHome(t, fmt.Sprintf(desktopConfig, w.codexBuild))
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(w.home, "log", "daemon.log"))
			t.Logf("daemon log:\n%s", log)
			r := cbth(t, w.home, "audit", "list", "--limit", "40")
			t.Logf("audit:\n%s", r.stdout)
		}
	})
	bin := codexBinDir(t)
	fake, err := codexfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	w.fake = fake
	w.proj, w.codexHome = filepath.Join(dir, "bridge"), filepath.Join(dir, "codex-home")
	for _, d := range []string{w.proj, w.codexHome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(w.codexHome, "config.toml"), []byte(fake.ConfigTOML(w.proj)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.codexEnv = []string{"CODEX_HOME=" + w.codexHome, "CODEXFAKE_API_KEY=test", "PATH=" + bin + ":" + os.Getenv("PATH")}
	w.bridge = w.codexTurn("bridge ready", "bridge heartbeat: bootstrap")
	return w
}

// codexTurn runs one real codex turn on the bridge thread (a new one when
// there is none yet) whose assistant message is text; it returns the
// thread id.
func (w *desktopWorld) codexTurn(text, prompt string) string {
	w.t.Helper()
	w.fake.Push(codexfake.Behavior{Kind: codexfake.Answer, Text: text})
	args := []string{"exec", "--skip-git-repo-check", "--json"}
	if w.bridge != "" {
		args = append(args, "resume", w.bridge)
	}
	r := mustOK(w.t, run(w.t, runOpts{env: w.codexEnv, dir: w.proj, timeout: 90 * time.Second},
		filepath.Join(codexBinDir(w.t), "codex"), append(args, prompt)...))
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "thread.started" {
			return ev.ThreadID
		}
	}
	w.t.Fatalf("codex exec printed no thread.started:\n%s", r)
	return ""
}

// rollout is the bridge thread's rollout file in the codex sessions dir.
func (w *desktopWorld) rollout() string {
	w.t.Helper()
	m, _ := filepath.Glob(filepath.Join(w.codexHome, "sessions", "*", "*", "*", "rollout-*-"+w.bridge+".jsonl"))
	if len(m) != 1 {
		w.t.Fatalf("want one rollout for thread %s, found %v", w.bridge, m)
	}
	return m[0]
}

func (w *desktopWorld) cbth(args ...string) result {
	w.t.Helper()
	return cbth(w.t, w.home, append(args, "--json")...)
}

// json runs cbth … --json and decodes stdout whatever the exit status;
// non-success outcomes exit 1 and still print their result.
func (w *desktopWorld) json(v any, args ...string) result {
	w.t.Helper()
	r := w.cbth(args...)
	if r.code != 0 && r.code != 1 {
		w.t.Fatalf("cbth %v:\n%s", args, r)
	}
	if err := fromEnvelope([]byte(r.stdout), v); err != nil {
		w.t.Fatalf("cbth %v: bad JSON %v\n%s", args, err, r)
	}
	return r
}

type outcomeOnly struct {
	Outcome string `json:"outcome"`
}

// expect runs a helper and requires its outcome (exit 0 for successes,
// 1 otherwise).
func (w *desktopWorld) expect(want string, args ...string) result {
	w.t.Helper()
	var o outcomeOnly
	r := w.json(&o, args...)
	wantExit := 1
	if want == "success" || strings.HasPrefix(want, "already") && !strings.Contains(want, "crossed") {
		wantExit = 0
	}
	if o.Outcome != want || r.code != wantExit {
		w.t.Fatalf("cbth %v: outcome %q exit %d, want %q exit %d\n%s", args, o.Outcome, r.code, want, wantExit, r)
	}
	return r
}

// job submits and completes a read-only Desktop job for thread; with a
// result file of the given content when content is not empty.
func (w *desktopWorld) job(thread, summary, content string) string {
	w.t.Helper()
	var j cbthJob
	cbthJSON(w.t, w.home, &j, "job", "submit", "--target", "desktop", "--thread-id", thread, "--task-kind", "ci",
		"--summary", summary, "--delivery-read-only", "true", "--delivery-requires-approval", "false",
		"--delivery-requires-network", "false", "--delivery-requires-write-access", "false")
	args := []string{"job", "complete", "--job-id", j.JobID, "--summary", "result of " + summary}
	if content != "" {
		p := filepath.Join(w.t.TempDir(), "result.txt")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			w.t.Fatal(err)
		}
		args = append(args, "--result-file", p)
	}
	cbthJSON(w.t, w.home, &j, args...)
	return j.JobID
}

type desktopBinding struct {
	BindingID                 string  `json:"binding_id"`
	SourceThreadID            string  `json:"source_thread_id"`
	BindingState              string  `json:"binding_state"`
	CallerAutomationID        *string `json:"caller_automation_id"`
	ArmedGeneration           *int64  `json:"armed_generation"`
	ArmedGenerationQuiescedAt *string `json:"armed_generation_quiesced_at"`
	PauseNotBefore            *string `json:"pause_not_before"`
	PauseDeadline             *string `json:"pause_deadline"`
	ReadTransport             *string `json:"read_transport"`
	ReadTransportGeneration   *int64  `json:"read_transport_generation"`
	ValidationFingerprint     *string `json:"validation_fingerprint"`
	DegradedReason            *string `json:"degraded_reason"`
}

func (w *desktopWorld) binding(thread string) desktopBinding {
	w.t.Helper()
	var bs []desktopBinding
	cbthJSON(w.t, w.home, &bs, "desktop", "binding", "list", "--source-thread-id", thread)
	return bs[0]
}

// desktopBatch is what the e2e test reads of a batch.
type desktopBatch struct {
	BatchID                   string   `json:"batch_id"`
	State                     string   `json:"state"`
	CloseReason               *string  `json:"close_reason"`
	ReplayPolicy              string   `json:"replay_policy"`
	ContinuationBoundaryState string   `json:"continuation_boundary_state"`
	DeliveryAttemptCount      int      `json:"delivery_attempt_count"`
	JobIDs                    []string `json:"job_ids"`
	ArtifactIDs               []string `json:"artifact_ids"`
	RequiresArtifactRead      *bool    `json:"requires_artifact_read"`
	BoundaryRecoveryEnvelope  *struct {
		CloseReason   string               `json:"close_reason"`
		InlinePayload *desktopContinuation `json:"inline_payload"`
	} `json:"boundary_recovery_envelope"`
	ArtifactRecoveryLeaseID *string `json:"artifact_recovery_lease_id"`
	HeadAttempt             *struct {
		AttemptID  string `json:"attempt_id"`
		State      string `json:"state"`
		Generation int64  `json:"generation"`
	} `json:"head_attempt"`
}

func (w *desktopWorld) batch(id string) desktopBatch {
	w.t.Helper()
	var b desktopBatch
	cbthJSON(w.t, w.home, &b, "batch", "inspect", "--batch-id", id)
	return b
}

func (w *desktopWorld) head(thread string) *desktopBatch {
	w.t.Helper()
	var r struct{ Batch *desktopBatch }
	cbthJSON(w.t, w.home, &r, "batch", "inspect-head", "--source-thread-id", thread)
	return r.Batch
}
