package t

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Desktop path end to end through the installed cbth: a simulated
// bridge and caller heartbeats deliver batches for two threads through
// bridge-preflight snapshots, the helper path and the transcript relay
// (real codex rollouts), across a torn read it injects, a lost note-arm
// answer, a daemon SIGKILL between arm and boundary, a fingerprint change,
// an expired pause deadline and an operator close-head.
func TestCbthDesktopBridgeAndCaller(t *testing.T) {
	s := &desktopScenario{w: newDesktopWorld(t)}
	s.b = &simBridge{w: s.w}
	s.bootstrap()
	s.tornRead()
	s.helperAndRelay()
	s.sigkillBetweenArmAndBoundary()
	s.pauses()
	s.fingerprintChange()
	s.w.operatorRecovers(s.job4, s.big)
	s.expiredPauseDeadline()
	s.finalState()
}

// desktopScenario is the story's state: the world, the bridge and the jobs.
type desktopScenario struct {
	w                            *desktopWorld
	b                            *simBridge
	job1, job2, job3, job4, job5 string
	big                          string
}

var validatedRepair = []string{"desktop", "installation-state", "repair", "--read-transport", "direct_file_read",
	"--read-transport-capability", "validated", "--artifact-read-capability", "validated", "--writeback-capability", "validated"}

type repairAnswer struct {
	Outcome      string `json:"outcome"`
	Changed      bool   `json:"changed"`
	Installation struct {
		Generation  int64   `json:"read_transport_generation"`
		ValidatedAt *string `json:"validated_at"`
		Validated   bool    `json:"validated"`
	} `json:"installation"`
}

// bootstrap: the operator validates the installation (a repeat is a
// no-op), binds two threads, and four jobs become ready.
func (s *desktopScenario) bootstrap() {
	w, t := s.w, s.w.t
	var repair repairAnswer
	w.json(&repair, validatedRepair...)
	first := repair.Installation
	if !repair.Changed || first.Generation != 1 || first.ValidatedAt == nil || !first.Validated {
		t.Fatalf("first repair: %+v", repair)
	}
	w.json(&repair, validatedRepair...)
	if repair.Changed || repair.Installation.Generation != 1 || *repair.Installation.ValidatedAt != *first.ValidatedAt {
		t.Fatalf("identical repair was not a no-op: %+v", repair)
	}
	if fi, err := os.Stat(filepath.Join(w.home, "inbox", "desktop-installation-state.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("published installation state: %v %v", fi, err)
	}
	for thread, auto := range map[string]string{"T1": "A1", "T2": "A2"} {
		w.expect("success", "desktop", "binding", "repair", "--source-thread-id", thread, "--caller-automation-id", auto)
	}
	s.job1 = w.job("T1", "nightly build", "build log line\n")
	s.job2 = w.job("T2", "review wait", "")
	s.job3 = w.job("T1", "second build", "")
	s.big = strings.Repeat("BIG artifact line\n", 200)
	s.job4 = w.job("T2", "big report", s.big)
}

// tornRead: files of another revision than the manifest held make the
// bridge fail closed; nothing is armed.
func (s *desktopScenario) tornRead() {
	w, t := s.w, s.w.t
	r := s.b.wake(wakeOpts{injectTornRead: true})
	if !strings.Contains(r.failedClosed, "file revision") || len(r.armed) != 0 {
		t.Fatalf("torn read not refused: %+v", r)
	}
	for _, th := range []string{"T1", "T2"} {
		if h := w.head(th); h.HeadAttempt.State != "prepared" {
			t.Fatalf("%s armed after a torn read: %+v", th, h.HeadAttempt)
		}
	}
}

// helperAndRelay: T1 through the helper path with its note-arm answer
// lost, T2 through the transcript relay; T1's caller crosses the boundary.
func (s *desktopScenario) helperAndRelay() {
	w, t := s.w, s.w.t
	r := s.b.wake(wakeOpts{relay: map[string]bool{"T2": true}, loseNoteArm: map[string]bool{"T1": true}})
	if r.failedClosed != "" || !slices.Equal(r.armed, []string{"T1", "T2"}) {
		t.Fatalf("wake 2: %+v", r)
	}
	if out := w.fire("A1"); out != "success" {
		t.Fatalf("caller T1: %s", out)
	}
	if got := w.delivered[0]; got.Jobs[0].JobID != s.job1 || got.Jobs[0].Artifact == nil || *got.Jobs[0].Artifact.Text != "build log line\n" {
		t.Fatalf("T1's continuation: %+v", got)
	}
	// The same heartbeat firing again (FREQ=MINUTELY before the pause) is a
	// stale wake: no second continuation.
	if out := w.fire("A1"); out != "already_crossed_or_handoff_recorded" {
		t.Fatalf("second wake of A1: %s", out)
	}
	batch1 := w.batch(*w.jobBatch(s.job1))
	if batch1.State != "closed" || *batch1.CloseReason != "handoff_recorded" || batch1.ContinuationBoundaryState != "crossed_unacknowledged" ||
		batch1.ReplayPolicy != "manual_resolution_only" || batch1.BoundaryRecoveryEnvelope == nil ||
		batch1.BoundaryRecoveryEnvelope.InlinePayload == nil || batch1.DeliveryAttemptCount != 1 {
		t.Fatalf("handed-off batch: %+v", batch1)
	}
}

// sigkillBetweenArmAndBoundary: T2 is armed; the daemon dies by SIGKILL;
// the caller's helper starts a new daemon and succeeds.
func (s *desktopScenario) sigkillBetweenArmAndBoundary() {
	w, t := s.w, s.w.t
	_, pid := daemonStatus(t, w.home)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, "daemon gone")
	if out := w.fire("A2"); out != "success" {
		t.Fatalf("caller T2 after SIGKILL: %s", out)
	}
	if _, pid2 := daemonStatus(t, w.home); pid2 == pid {
		t.Fatal("the daemon was not restarted")
	}
	if got := w.delivered[1]; got.Jobs[0].JobID != s.job2 {
		t.Fatalf("T2's continuation: %+v", got)
	}
}

// pauses: once pause_not_before passes the bridge pauses both heartbeats
// and records the quiesce; T2's next batch needs an artifact read, so it
// went to the operator instead of the caller.
func (s *desktopScenario) pauses() {
	w, t := s.w, s.w.t
	waitFor(t, 30*time.Second, "both heartbeats quiesced", func() bool {
		s.b.wake(wakeOpts{noArm: true})
		return w.binding("T1").ArmedGenerationQuiescedAt != nil && w.binding("T2").ArmedGenerationQuiescedAt != nil
	})
	if w.automations["A1"].state != "PAUSED" || w.automations["A2"].state != "PAUSED" {
		t.Fatalf("automations not paused: %+v %+v", w.automations["A1"], w.automations["A2"])
	}
	if h := w.head("T2"); h.JobIDs[0] != s.job4 || h.ReplayPolicy != "manual_resolution_only" || !*h.RequiresArtifactRead {
		t.Fatalf("T2's artifact batch: %+v", h)
	}
}

// fingerprintChange: the Codex Desktop build changes; automatic
// continuation stops and the bindings degrade with the reason; the
// operator re-validates and repairs; automation resumes with a fresh
// generation.
func (s *desktopScenario) fingerprintChange() {
	w, t := s.w, s.w.t
	if err := os.WriteFile(w.codexBuild, []byte("build 2, a little longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.b.wake(wakeOpts{})
	if r.validated || len(r.armed) != 0 {
		t.Fatalf("wake after the fingerprint change: %+v", r)
	}
	for _, th := range []string{"T1", "T2"} {
		if bnd := w.binding(th); bnd.BindingState != "degraded" || !strings.Contains(*bnd.DegradedReason, "validation_fingerprint") {
			t.Fatalf("%s after the fingerprint change: %+v", th, bnd)
		}
	}
	doc := cbth(t, w.home, "doctor")
	if doc.code != 1 || !strings.Contains(doc.stdout, "FAIL desktop installation") || !strings.Contains(doc.stdout, "T1: validation_fingerprint changed") {
		t.Fatalf("doctor after the fingerprint change:\n%s", doc)
	}
	stale := w.head("T1")
	w.expect("binding_or_capability_invalid", append([]string{"desktop", "note-arm-pending"},
		append(tokenArgs(promptToken{"T1", stale.BatchID, stale.HeadAttempt.AttemptID, stale.HeadAttempt.Generation, ""}),
			"--bridge-request-id", "late")...)...)
	var repair repairAnswer
	w.json(&repair, validatedRepair...)
	if !repair.Changed || repair.Installation.Generation != 2 || !repair.Installation.Validated {
		t.Fatalf("repair after the fingerprint change: %+v", repair)
	}
	var rb struct {
		Outcome            string `json:"outcome"`
		FreshAttemptForced bool   `json:"fresh_attempt_forced"`
		FreshAttempt       *struct {
			Generation int64 `json:"generation"`
		} `json:"fresh_attempt"`
	}
	w.json(&rb, "desktop", "binding", "repair", "--source-thread-id", "T1", "--caller-automation-id", "A1")
	if rb.Outcome != "success" || !rb.FreshAttemptForced || rb.FreshAttempt.Generation <= stale.HeadAttempt.Generation {
		t.Fatalf("binding repair: %+v", rb)
	}
	w.expect("success", "desktop", "binding", "repair", "--source-thread-id", "T2", "--caller-automation-id", "A2")
	if doc := cbth(t, w.home, "doctor"); !strings.Contains(doc.stdout, "ok   desktop installation") {
		t.Fatalf("doctor after repair:\n%s", doc)
	}
	r = s.b.wake(wakeOpts{})
	if !slices.Equal(r.armed, []string{"T1"}) {
		t.Fatalf("wake after repair: %+v", r)
	}
	if out := w.fire("A1"); out != "success" || w.delivered[2].Jobs[0].JobID != s.job3 {
		t.Fatalf("caller T1, second batch: %s %+v", out, w.delivered)
	}
}

// expiredPauseDeadline: the bridge fails to pause T1's heartbeat;
// pause_deadline passes and the binding degrades; the operator's repair
// resumes delivery of the next batch.
func (s *desktopScenario) expiredPauseDeadline() {
	w, t := s.w, s.w.t
	s.job5 = w.job("T1", "third build", "")
	waitFor(t, 60*time.Second, "T1 degraded by its pause deadline", func() bool {
		s.b.wake(wakeOpts{noArm: true, skipPause: map[string]bool{"T1": true}})
		return w.binding("T1").BindingState == "degraded"
	})
	if bnd := w.binding("T1"); !strings.Contains(*bnd.DegradedReason, "pause_deadline") {
		t.Fatalf("degraded for %v", *bnd.DegradedReason)
	}
	w.expect("success", "desktop", "binding", "repair", "--source-thread-id", "T1", "--caller-automation-id", "A1")
	waitFor(t, 30*time.Second, "T1 armed again", func() bool {
		return slices.Contains(s.b.wake(wakeOpts{}).armed, "T1")
	})
	if out := w.fire("A1"); out != "success" || w.delivered[3].Jobs[0].JobID != s.job5 {
		t.Fatalf("caller T1 after repair: %s %+v", out, w.delivered)
	}
}

// finalState: every batch ended as the seed says, and no payload ever
// reached the bridge's files.
func (s *desktopScenario) finalState() {
	w, t := s.w, s.w.t
	for _, j := range []string{s.job1, s.job2, s.job3, s.job5} {
		if b := w.batch(*w.jobBatch(j)); *b.CloseReason != "handoff_recorded" {
			t.Errorf("batch of %s: %+v", j, b)
		}
	}
	filepath.Walk(filepath.Join(w.home, "inbox"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			data, _ := os.ReadFile(p)
			for _, secret := range []string{"build log line", "result of", "BIG artifact"} {
				if strings.Contains(string(data), secret) {
					t.Errorf("%s carries payload %q", p, secret)
				}
			}
		}
		return nil
	})
	rows := auditRows(t, w.home)
	for action, want := range map[string]int{"desktop.boundary_crossed": 4, "desktop.relay.consume": 2} {
		if n := countAction(rows, action); n != want {
			t.Errorf("audit %s: %d rows, want %d", action, n, want)
		}
	}
}

// jobBatch is the batch id of a job.
func (w *desktopWorld) jobBatch(job string) *string {
	w.t.Helper()
	var j cbthJob
	cbthJSON(w.t, w.home, &j, "job", "query", job)
	return j.BatchID
}

// operatorRecovers reads T2's artifact batch under a recovery lease and
// closes it as delivered by the operator.
func (w *desktopWorld) operatorRecovers(job, content string) {
	w.t.Helper()
	b := w.batch(*w.jobBatch(job))
	if b.ArtifactRecoveryLeaseID == nil || len(b.ArtifactIDs) != 1 {
		w.t.Fatalf("no recovery lease on the artifact batch: %+v", b)
	}
	var got []byte
	for off := 0; ; {
		var chunk struct {
			Outcome string `json:"outcome"`
			Bytes   int    `json:"bytes"`
			EOF     bool   `json:"eof"`
			Data    string `json:"data_base64"`
			SHA256  string `json:"sha256"`
		}
		w.json(&chunk, "desktop", "read-artifact", "--artifact-id", b.ArtifactIDs[0], "--artifact-read-lease-id",
			*b.ArtifactRecoveryLeaseID, "--offset", strconv.Itoa(off), "--max-bytes", "1000")
		data, _ := base64.StdEncoding.DecodeString(chunk.Data)
		if chunk.Outcome != "success" || len(data) != chunk.Bytes {
			w.t.Fatalf("read-artifact at %d: %+v", off, chunk)
		}
		got, off = append(got, data...), off+chunk.Bytes
		if chunk.EOF {
			sum := sha256.Sum256(got)
			if string(got) != content || hex.EncodeToString(sum[:]) != chunk.SHA256 {
				w.t.Fatalf("recovered artifact differs (%d bytes)", len(got))
			}
			break
		}
	}
	w.expect("stale_or_superseded", "desktop", "read-artifact", "--artifact-id", b.ArtifactIDs[0],
		"--artifact-read-lease-id", "arl_forged", "--offset", "0", "--max-bytes", "10")
	var closed struct {
		Outcome string `json:"outcome"`
		BatchID string `json:"batch_id"`
	}
	cbthJSON(w.t, w.home, &closed, "batch", "close-head", "--source-thread-id", "T2", "--reason", "operator_confirmed_delivery")
	if closed.Outcome != "success" || closed.BatchID != b.BatchID || *w.batch(b.BatchID).CloseReason != "operator_confirmed_delivery" {
		w.t.Fatalf("close-head: %+v", closed)
	}
}

func auditRows(t *testing.T, home string) []struct{ Action string } {
	t.Helper()
	var rows []struct{ Action string }
	cbthJSON(t, home, &rows, "audit", "list", "--limit", "5000")
	return rows
}

func countAction(rows []struct{ Action string }, action string) int {
	n := 0
	for _, r := range rows {
		if r.Action == action {
			n++
		}
	}
	return n
}

// A job submitted with --target desktop reaches the Desktop path: a bound
// thread appears in ready-threads.json with the whole prompt token, the
// CLI path never picks it up, and bad input is EINVAL with nothing stored.
func TestCbthDesktopJobFlowsToTheBridge(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	var rep struct{ Outcome string }
	cbthJSON(t, home, &rep, "desktop", "installation-state", "repair", "--read-transport", "helper_cli_read",
		"--read-transport-capability", "validated", "--writeback-capability", "validated")
	cbthJSON(t, home, &rep, "desktop", "binding", "repair", "--source-thread-id", "D1", "--caller-automation-id", "auto")
	var j cbthJob
	cbthJSON(t, home, &j, "job", "submit", "--target", "desktop", "--thread-id", "D1", "--task-kind", "k", "--summary", "s")
	cbthJSON(t, home, &j, "job", "complete", "--job-id", j.JobID, "--summary", "done")
	var pf struct {
		Outcome    string `json:"outcome"`
		ReadyCount int    `json:"ready_count"`
		Manifest   string `json:"snapshot_manifest_path"`
	}
	cbthJSON(t, home, &pf, "desktop", "bridge-preflight", "--bridge-thread-id", "B")
	var claim struct {
		Outcome string     `json:"outcome"`
		Ready   bool       `json:"ready"`
		Entry   *snapReady `json:"entry"`
	}
	cbthJSON(t, home, &claim, "desktop", "claim-next-ready", "--bridge-thread-id", "B")
	if pf.ReadyCount != 1 || !claim.Ready || claim.Entry.SourceThreadID != "D1" || claim.Entry.BatchID != *j.BatchID ||
		claim.Entry.AttemptID == "" || claim.Entry.Generation != 1 || claim.Entry.SnapshotRevision == "" || claim.Entry.SnapshotPath == "" {
		t.Fatalf("preflight %+v claim %+v", pf, claim)
	}
	// The file says the same as the helper.
	var m snapManifest
	data, _ := os.ReadFile(pf.Manifest)
	json.Unmarshal(data, &m)
	var ready snapFile[snapReady]
	data, _ = os.ReadFile(filepath.Join(filepath.Dir(pf.Manifest), m.Files["ready_threads"]))
	json.Unmarshal(data, &ready)
	if len(ready.Entries) != 1 || ready.Entries[0] != *claim.Entry {
		t.Fatalf("file %+v vs helper %+v", ready.Entries, claim.Entry)
	}
	for _, bad := range [][]string{
		{"desktop", "installation-state", "repair", "--read-transport", "carrier_pigeon"},
		{"desktop", "installation-state", "repair", "--read-transport", "direct_file_read", "--writeback-capability", "maybe"},
		{"desktop", "note-arm-pending", "--source-thread-id", "D1", "--attempt-id", "a", "--generation", "0", "--bridge-request-id", "r"},
		{"desktop", "binding", "unbind", "--source-thread-id", "D1"},
		{"desktop", "read-artifact", "--artifact-id", "a", "--artifact-read-lease-id", "l", "--max-bytes", "9999999"},
		{"desktop", "relay", "marker", "issue", "--bridge-thread-id", "B", "--kind", "arm-now", "--source-thread-id", "D1",
			"--attempt-id", "a", "--generation", "1", "--bridge-request-id", "r"},
	} {
		cbthErr(t, home, "EINVAL", 2, bad...)
	}
	cbthErr(t, home, "ENOENT", 1, "desktop", "relay", "consume-transcript", "--rollout-path", "/nonexistent/rollout.jsonl", "--marker", "cbth-relay/v1/x")
}

// A caller whose note-boundary-crossed request reached a daemon that then
// did not answer (here: stopped, and the client's deadline passed) gets
// unknown_after_helper_failure, never a guess; after the daemon resumes,
// durable reconciliation (batch inspect) says what happened and the
// automatic path never receives the continuation twice.
func TestCbthDesktopUnknownAfterHelperFailure(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	w := &desktopWorld{t: t, home: home, automations: map[string]*automation{}}
	w.expect("success", validatedRepair...)
	w.expect("success", "desktop", "binding", "repair", "--source-thread-id", "U1", "--caller-automation-id", "AU")
	w.job("U1", "the job", "")
	h := w.head("U1")
	tok := promptToken{"U1", h.BatchID, h.HeadAttempt.AttemptID, h.HeadAttempt.Generation, ""}
	var p struct {
		Lease string `json:"bridge_arm_lease_id"`
		Rev   string `json:"snapshot_revision"`
	}
	w.json(&p, append(append([]string{"desktop", "note-arm-pending"}, tokenArgs(tok)...), "--bridge-request-id", "r")...)
	w.expect("success", append(append([]string{"desktop", "note-arm"}, tokenArgs(tok)...), "--bridge-request-id", "r",
		"--bridge-arm-lease-id", p.Lease)...)
	_, pid := daemonStatus(t, home)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	boundary := []string{"desktop", "note-boundary-crossed", "--source-thread-id", "U1", "--batch-id", tok.BatchID,
		"--attempt-id", tok.AttemptID, "--generation", strconv.FormatInt(tok.Generation, 10),
		"--expected-snapshot-revision", p.Rev, "--json"}
	r := run(t, runOpts{env: []string{"CBTH_HOME=" + home, "CBTH_CLIENT_TIMEOUT=2"}}, applet("cbth"), boundary...)
	var res struct {
		Outcome      string           `json:"outcome"`
		Continuation *json.RawMessage `json:"continuation"`
	}
	if json.Unmarshal([]byte(r.stdout), &res) != nil || res.Outcome != "unknown_after_helper_failure" || r.code != 1 ||
		res.Continuation != nil {
		t.Fatalf("boundary against a stopped daemon:\n%s", r)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	// Reconcile after not_after (the client's deadline, already past): the
	// daemon refuses the stale request if it reaches it now, so the batch
	// alone says whether the boundary was crossed.
	var b desktopBatch
	waitFor(t, 20*time.Second, "the daemon answers again", func() bool {
		r := cbth(t, home, "batch", "inspect", "--batch-id", tok.BatchID, "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &b) == nil
	})
	retry := cbth(t, home, boundary...)
	json.Unmarshal([]byte(retry.stdout), &res)
	t.Logf("after SIGCONT the batch is %s (%s); the retry got %s", b.State, b.ContinuationBoundaryState, res.Outcome)
	if b.ContinuationBoundaryState != "not_crossed" || res.Outcome != "success" || res.Continuation == nil {
		t.Fatalf("the stale request crossed after its not_after, or the retry failed: batch %+v retry %s", b, retry)
	}
	b = w.batch(tok.BatchID)
	if b.State != "closed" || *b.CloseReason != "handoff_recorded" {
		t.Fatalf("after the retry: %+v", b)
	}
	rows := auditRows(t, home)
	if n := countAction(rows, "desktop.boundary_crossed"); n != 1 {
		t.Fatalf("%d boundary crossings recorded", n)
	}
}

// A Desktop job whose thread cannot be continued automatically says why,
// with the command that fixes it, in job query and batch inspect-head,
// instead of waiting silently until its redelivery window closes it; once
// the installation state and the binding are repaired, nothing blocks it.
func TestCbthDesktopBlockedReason(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	var j cbthJob
	cbthJSON(t, home, &j, "job", "submit", "--target", "desktop", "--thread-id", "D9", "--task-kind", "k", "--summary", "s")
	cbthJSON(t, home, &j, "job", "complete", "--job-id", j.JobID, "--summary", "done")
	var q struct {
		Reason *string `json:"delivery_blocked_reason"`
	}
	cbthJSON(t, home, &q, "job", "query", "--job-id", j.JobID)
	if q.Reason == nil || !strings.Contains(*q.Reason, "no read_transport") || !strings.Contains(*q.Reason, "no desktop binding") ||
		!strings.Contains(*q.Reason, "cbth desktop installation-state repair") {
		t.Fatalf("unset-up Desktop job: delivery_blocked_reason %v", q.Reason)
	}
	var rep struct{ Outcome string }
	cbthJSON(t, home, &rep, "desktop", "installation-state", "repair", "--read-transport", "helper_cli_read",
		"--read-transport-capability", "validated", "--writeback-capability", "validated")
	out := mustOK(t, cbth(t, home, "batch", "inspect-head", "--source-thread-id", "D9", "--json")).stdout
	if !strings.Contains(out, "no desktop binding") || !strings.Contains(out, "cbth desktop binding repair --source-thread-id D9") {
		t.Fatalf("validated installation, no binding: inspect-head %s", out)
	}
	cbthJSON(t, home, &rep, "desktop", "binding", "repair", "--source-thread-id", "D9", "--caller-automation-id", "auto")
	q.Reason = nil
	cbthJSON(t, home, &q, "job", "query", "--job-id", j.JobID)
	if q.Reason != nil {
		t.Fatalf("bound and validated, still blocked: %s", *q.Reason)
	}
}
