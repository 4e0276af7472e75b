package t

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The simulated Desktop bridge: one wake is what the bridge heartbeat does
// each minute. It runs the mandatory bridge-preflight, reads the manifest
// and the files it names (direct_file_read), refuses to act on any file
// whose embedded revision differs from the manifest's, pauses due caller
// heartbeats first, then arms ready threads through the helper path or
// the transcript relay.

type snapManifest struct {
	SnapshotRevision string            `json:"snapshot_revision"`
	Files            map[string]string `json:"files"`
	Installation     struct {
		ReadTransportGeneration int64   `json:"read_transport_generation"`
		ValidationFingerprint   *string `json:"validation_fingerprint"`
		Validated               bool    `json:"validated"`
	} `json:"installation"`
}

type snapReady struct {
	SourceThreadID       string `json:"source_thread_id"`
	BatchID              string `json:"batch_id"`
	AttemptID            string `json:"attempt_id"`
	Generation           int64  `json:"generation"`
	SnapshotRevision     string `json:"snapshot_revision"`
	SnapshotPath         string `json:"snapshot_path"`
	RequiresArtifactRead bool   `json:"requires_artifact_read"`
}

type snapPauseDue struct {
	SourceThreadID  string `json:"source_thread_id"`
	ArmedGeneration int64  `json:"armed_generation"`
}

type snapFile[T any] struct {
	SnapshotRevision string `json:"snapshot_revision"`
	Entries          []T    `json:"entries"`
}

type wakeOpts struct {
	injectTornRead bool            // read the files of a newer revision than the manifest held
	noArm          bool            // reconcile and pause only
	relay          map[string]bool // threads armed through the transcript relay
	loseNoteArm    map[string]bool // threads whose note-arm answer is lost
	skipPause      map[string]bool // threads whose heartbeat the bridge fails to pause
}

type wakeReport struct {
	revision     string
	failedClosed string
	validated    bool
	armed        []string
	quiesced     []string
}

type simBridge struct {
	w     *desktopWorld
	wakes int
}

func (b *simBridge) readFile(name string, v any) error {
	data, err := os.ReadFile(filepath.Join(b.w.home, "inbox", name))
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func (b *simBridge) preflight() (string, bool) {
	var p struct {
		Outcome          string `json:"outcome"`
		SnapshotRevision string `json:"snapshot_revision"`
	}
	r := b.w.cbth("desktop", "bridge-preflight", "--bridge-thread-id", b.w.bridge)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil || p.Outcome != "success" {
		return "", false
	}
	return p.SnapshotRevision, true
}

func (b *simBridge) wake(o wakeOpts) wakeReport {
	w := b.w
	w.t.Helper()
	b.wakes++
	req := "wake-" + strconv.Itoa(b.wakes)
	var rep wakeReport
	rev, ok := b.preflight()
	if !ok {
		rep.failedClosed = "bridge-preflight failed"
		return rep
	}
	var m snapManifest
	if err := b.readFile("current-snapshot.json", &m); err != nil || m.SnapshotRevision != rev {
		rep.failedClosed = fmt.Sprintf("manifest %s is not the preflight's %s (%v)", m.SnapshotRevision, rev, err)
		return rep
	}
	rep.revision, rep.validated = rev, m.Installation.Validated
	files := m.Files
	if o.injectTornRead {
		// Another publication lands between reading the manifest and its
		// files: the files the bridge now reads belong to another revision.
		if _, ok := b.preflight(); ok {
			var newer snapManifest
			b.readFile("current-snapshot.json", &newer)
			files = newer.Files
		}
	}
	var ready snapFile[snapReady]
	var pending snapFile[json.RawMessage]
	var pause snapFile[snapPauseDue]
	var bindings snapFile[desktopBinding]
	for name, v := range map[string]any{"ready_threads": &ready, "arm_pending_bindings": &pending,
		"pause_due_bindings": &pause, "bindings": &bindings} {
		if err := b.readFile(files[name], v); err != nil {
			rep.failedClosed = "cannot read " + name + ": " + err.Error()
			return rep
		}
	}
	for _, got := range []string{ready.SnapshotRevision, pending.SnapshotRevision, pause.SnapshotRevision, bindings.SnapshotRevision} {
		if got != m.SnapshotRevision {
			rep.failedClosed = fmt.Sprintf("file revision %s under manifest %s", got, m.SnapshotRevision)
			return rep
		}
	}
	// Overdue pauses first: pause the heartbeat, then record the quiesce.
	for _, p := range pause.Entries {
		if o.skipPause[p.SourceThreadID] {
			continue
		}
		bnd := bindingOf(bindings.Entries, p.SourceThreadID)
		if a := w.automations[*bnd.CallerAutomationID]; a != nil {
			a.state = "PAUSED"
		}
		w.expect("success", "desktop", "note-quiesced", "--source-thread-id", p.SourceThreadID,
			"--generation", strconv.FormatInt(p.ArmedGeneration, 10), "--bridge-request-id", req)
		rep.quiesced = append(rep.quiesced, p.SourceThreadID)
	}
	if o.noArm || !m.Installation.Validated {
		return rep
	}
	for _, e := range ready.Entries {
		bnd := bindingOf(bindings.Entries, e.SourceThreadID)
		// The caller automation comes from the binding, and only from a bound
		// binding whose mirror matches the installation state.
		if bnd == nil || bnd.BindingState != "bound" || bnd.CallerAutomationID == nil || e.RequiresArtifactRead ||
			*bnd.ReadTransportGeneration != m.Installation.ReadTransportGeneration ||
			*bnd.ValidationFingerprint != *m.Installation.ValidationFingerprint {
			continue
		}
		tok := promptToken{e.SourceThreadID, e.BatchID, e.AttemptID, e.Generation, e.SnapshotRevision}
		if o.relay[e.SourceThreadID] {
			b.armByRelay(tok, *bnd.CallerAutomationID, req)
		} else {
			b.armByHelper(tok, *bnd.CallerAutomationID, req, o.loseNoteArm[e.SourceThreadID])
		}
		rep.armed = append(rep.armed, e.SourceThreadID)
	}
	return rep
}

func bindingOf(bs []desktopBinding, thread string) *desktopBinding {
	for i := range bs {
		if bs[i].SourceThreadID == thread {
			return &bs[i]
		}
	}
	return nil
}

func tokenArgs(tok promptToken) []string {
	return []string{"--source-thread-id", tok.SourceThreadID, "--attempt-id", tok.AttemptID,
		"--generation", strconv.FormatInt(tok.Generation, 10)}
}

// automationUpdate is the bridge's automation_update: the caller heartbeat
// becomes ACTIVE with the prompt token.
func (w *desktopWorld) automationUpdate(id string, tok promptToken) {
	a := w.automations[id]
	if a == nil {
		a = &automation{}
		w.automations[id] = a
	}
	a.state, a.prompt = "ACTIVE", tok
}

func (b *simBridge) armByHelper(tok promptToken, automationID, req string, loseAnswer bool) {
	w := b.w
	w.t.Helper()
	var p struct {
		Outcome string `json:"outcome"`
		Lease   string `json:"bridge_arm_lease_id"`
	}
	w.json(&p, append(append([]string{"desktop", "note-arm-pending"}, tokenArgs(tok)...), "--bridge-request-id", req)...)
	if p.Outcome != "success" || p.Lease == "" {
		w.t.Fatalf("note-arm-pending for %+v: %+v", tok, p)
	}
	// Retrying the barrier with the same request returns the same lease;
	// another request learns nothing.
	var again struct {
		Outcome string `json:"outcome"`
		Lease   string `json:"bridge_arm_lease_id"`
	}
	w.json(&again, append(append([]string{"desktop", "note-arm-pending"}, tokenArgs(tok)...), "--bridge-request-id", req)...)
	if again.Outcome != "already-pending" || again.Lease != p.Lease {
		w.t.Fatalf("retried note-arm-pending: %+v", again)
	}
	w.expect("lease-held", append(append([]string{"desktop", "note-arm-pending"}, tokenArgs(tok)...), "--bridge-request-id", req+"-other")...)
	w.automationUpdate(automationID, tok)
	arm := append(append([]string{"desktop", "note-arm"}, tokenArgs(tok)...), "--bridge-request-id", req, "--bridge-arm-lease-id", p.Lease)
	if !loseAnswer {
		w.expect("success", arm...)
		return
	}
	// The answer is lost: durable reconciliation proves the arm succeeded.
	w.cbth(arm...)
	var rec struct {
		Outcome    string `json:"outcome"`
		Resolution string `json:"resolution"`
	}
	w.json(&rec, append(append([]string{"desktop", "reconcile-arm"}, tokenArgs(tok)...), "--bridge-request-id", req,
		"--heartbeat-state", "active")...)
	if rec.Outcome != "success" || rec.Resolution != "arm_succeeded" {
		w.t.Fatalf("reconcile after a lost note-arm answer: %+v", rec)
	}
	w.expect("already-armed", arm...)
}

// armByRelay asks for both writebacks in the bridge's transcript: a real
// codex turn on the bridge thread prints each marker, and the consumer
// outside the sandbox finds it in the rollout and performs the CAS.
func (b *simBridge) armByRelay(tok promptToken, automationID, req string) {
	w := b.w
	w.t.Helper()
	relay := func(kind, then string) {
		var m struct {
			Outcome string `json:"outcome"`
			Marker  string `json:"marker"`
		}
		w.json(&m, append(append([]string{"desktop", "relay", "marker", "issue", "--bridge-thread-id", w.bridge,
			"--kind", kind}, tokenArgs(tok)...), "--bridge-request-id", req)...)
		if m.Outcome != "success" || m.Marker == "" {
			w.t.Fatalf("marker issue %s: %+v", kind, m)
		}
		// Before the bridge's turn the rollout does not carry it.
		w.expect("transient_not_ready", "desktop", "relay", "consume-transcript", "--rollout-path", w.rollout(), "--marker", m.Marker)
		w.codexTurn(fmt.Sprintf("%s for %s: %s", kind, tok.SourceThreadID, m.Marker), "bridge heartbeat wake "+req)
		w.expect("success", "desktop", "relay", "consume-transcript", "--rollout-path", w.rollout(), "--marker", m.Marker)
		w.expect(then, "desktop", "relay", "consume-transcript", "--rollout-path", w.rollout(), "--marker", m.Marker)
	}
	relay("arm-pending", "already-pending")
	w.automationUpdate(automationID, tok)
	relay("arm-accepted", "already-armed")
}

// fire is one caller heartbeat wake: it reads its prompt token, calls
// note-boundary-crossed, and continues only on a fresh success whose echo
// equals its token.
func (w *desktopWorld) fire(automationID string) string {
	w.t.Helper()
	a := w.automations[automationID]
	if a == nil || a.state != "ACTIVE" {
		return "not active"
	}
	a.fired++
	tok := a.prompt
	var res struct {
		promptToken
		Outcome      string               `json:"outcome"`
		Continuation *desktopContinuation `json:"continuation"`
	}
	w.json(&res, "desktop", "note-boundary-crossed", "--source-thread-id", tok.SourceThreadID, "--batch-id", tok.BatchID,
		"--attempt-id", tok.AttemptID, "--generation", strconv.FormatInt(tok.Generation, 10),
		"--expected-snapshot-revision", tok.SnapshotRevision)
	if res.Outcome != "success" {
		if res.Continuation != nil {
			w.t.Fatalf("a %s answer carries the continuation", res.Outcome)
		}
		return res.Outcome
	}
	if res.promptToken != tok || res.Continuation == nil {
		w.t.Fatalf("boundary echo %+v differs from the prompt token %+v", res.promptToken, tok)
	}
	w.delivered = append(w.delivered, *res.Continuation)
	return "success"
}
