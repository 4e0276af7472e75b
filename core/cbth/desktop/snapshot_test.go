package desktop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

func (f *fixture) preflight(bridge string) *PreflightResult {
	f.t.Helper()
	r, err := f.sv.Preflight(f.ctx, actor, PreflightRequest{BridgeThreadID: bridge})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// readSnapshot reads the manifest and its files as a bridge must: every
// file's embedded revision equal to the manifest's.
func readSnapshot(t *testing.T, inbox string) (Manifest, SnapshotFile[ReadyEntry], SnapshotFile[ArmPendingEntry], SnapshotFile[PauseDueEntry]) {
	t.Helper()
	var m Manifest
	readJSON(t, filepath.Join(inbox, ManifestName), &m)
	var ready SnapshotFile[ReadyEntry]
	var pending SnapshotFile[ArmPendingEntry]
	var pause SnapshotFile[PauseDueEntry]
	readJSON(t, filepath.Join(inbox, m.Files["ready_threads"]), &ready)
	readJSON(t, filepath.Join(inbox, m.Files["arm_pending_bindings"]), &pending)
	readJSON(t, filepath.Join(inbox, m.Files["pause_due_bindings"]), &pause)
	for _, rev := range []string{ready.SnapshotRevision, pending.SnapshotRevision, pause.SnapshotRevision} {
		if rev != m.SnapshotRevision {
			t.Fatalf("file revision %s under manifest %s", rev, m.SnapshotRevision)
		}
	}
	return m, ready, pending, pause
}

func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v mode %v", p, err, fi)
	}
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

func TestPreflightPublishesSnapshot(t *testing.T) {
	f := newFixture(t)
	f.install()
	f.job("T", "secret summary SUMMARY-T", 30)
	f.job("U", "unbound job", 0) // no binding: never ready
	f.job("V", "other", 0)
	f.bind("T", "auto-1")
	f.bind("V", "auto-v")
	r := f.preflight("B1")
	if r.Outcome != delivery.OutcomeOK || !r.Validated || r.ReadyCount != 2 || r.SnapshotRevision == "" {
		t.Fatalf("preflight %+v", r)
	}
	m, ready, pending, pause := readSnapshot(t, f.sv.Inbox())
	if m.SnapshotRevision != r.SnapshotRevision || !m.Installation.Validated || len(ready.Entries) != 2 ||
		len(pending.Entries) != 0 || len(pause.Entries) != 0 {
		t.Fatalf("manifest %+v ready %+v", m, ready)
	}
	e := ready.Entries[0]
	k := f.tok(e.SourceThreadID)
	if e.BatchID != k.batch || e.AttemptID != k.attempt || e.Generation != k.gen || e.SnapshotRevision != k.rev ||
		e.RequiresArtifactRead || e.SnapshotPath != snapshotPath(r.SnapshotRevision) {
		t.Fatalf("ready entry %+v, head %+v", e, k)
	}
	// Nothing on disk carries a payload: no summary, result or artifact.
	filepath.Walk(f.sv.Inbox(), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), "SUMMARY-T") || strings.Contains(string(b), "rrrrr") {
				t.Errorf("%s carries payload", p)
			}
		}
		return nil
	})
	// claim-next-ready is the first entry of the same order and a pure peek.
	var c *ClaimResult
	var err error
	f.unchanged("claim-next-ready", func() { c, err = f.sv.ClaimNextReady(f.ctx, "B1") })
	if err != nil || !c.Ready || c.Entry.AttemptID != e.AttemptID || c.Entry.SnapshotPath != e.SnapshotPath ||
		c.SnapshotRevision != m.SnapshotRevision {
		t.Fatalf("claim %+v %v, file %+v", c, err, e)
	}
	if c2, _ := f.sv.ClaimNextReady(f.ctx, "B1"); c2.Entry.AttemptID != c.Entry.AttemptID {
		t.Error("claim-next-ready moved the order")
	}
	// Arm one thread: it leaves ready and shows up arm-pending, then pause-due.
	f.cfg().Desktop.PauseNotBeforeDelay = time.Second
	p, _ := f.sv.NoteArmPending(f.ctx, actor, k.arm("q"))
	r = f.preflight("B1")
	_, ready, pending, _ = readSnapshot(t, f.sv.Inbox())
	if len(ready.Entries) != 1 || len(pending.Entries) != 1 || pending.Entries[0].AttemptID != k.attempt ||
		pending.Entries[0].BridgeRequestID != "q" || pending.Entries[0].CallerAutomationID == nil {
		t.Fatalf("after arm-pending: ready %+v pending %+v", ready, pending)
	}
	if b, _ := os.ReadFile(filepath.Join(f.sv.Inbox(), m.Files["arm_pending_bindings"])); strings.Contains(string(b), p.BridgeArmLeaseID) {
		t.Error("the lease is on disk")
	}
	list, _ := f.sv.ListArmPending(f.ctx, "B1")
	if list.Outcome != delivery.OutcomeOK || len(list.Entries) != 1 || js(list.Entries) != js(pending.Entries) {
		t.Errorf("list-arm-pending %+v vs file %+v", list, pending)
	}
	req := k.arm("q")
	req.BridgeArmLeaseID = p.BridgeArmLeaseID
	f.sv.NoteArm(f.ctx, actor, req)
	f.now = f.now.Add(2 * time.Second)
	f.preflight("B1")
	_, _, _, pause = readSnapshot(t, f.sv.Inbox())
	if len(pause.Entries) != 1 || pause.Entries[0].SourceThreadID != k.thread || pause.Entries[0].ArmedGeneration != k.gen {
		t.Fatalf("pause-due %+v", pause)
	}
	due, _ := f.sv.ListPauseDue(f.ctx, "B1")
	if len(due.Entries) != 1 || due.Entries[0].BindingID != pause.Entries[0].BindingID {
		t.Errorf("list-pause-due %+v vs file %+v", due, pause)
	}
}

// A bridge must not see validated entries when the installation is not
// validated; the manifest says why.
func TestPreflightUnvalidated(t *testing.T) {
	f := newFixture(t)
	f.repair(RepairRequest{ReadTransport: DirectFileRead})
	f.job("T", "a", 0)
	f.bind("T", "auto-1")
	r := f.preflight("B1")
	m, ready, _, _ := readSnapshot(t, f.sv.Inbox())
	if r.Validated || r.ReadyCount != 0 || len(ready.Entries) != 0 || len(m.Installation.NotValidatedBecause) == 0 {
		t.Fatalf("unvalidated preflight %+v", r)
	}
	if c, _ := f.sv.ClaimNextReady(f.ctx, "B1"); c.Ready {
		t.Errorf("claim-next-ready on an unvalidated installation: %+v", c)
	}
}

func TestReadHelpersBeforeFirstPreflight(t *testing.T) {
	f := world(t)
	f.unchanged("helpers", func() {
		c, err := f.sv.ClaimNextReady(f.ctx, "B1")
		if err != nil || c.Outcome != delivery.OutcomeTransientNotReady || c.Entry != nil {
			t.Errorf("claim before preflight: %+v %v", c, err)
		}
		l, err := f.sv.ListArmPending(f.ctx, "B1")
		if err != nil || l.Outcome != delivery.OutcomeTransientNotReady {
			t.Errorf("list before preflight: %+v %v", l, err)
		}
	})
}

// Old revisions survive until snapshot_reader_grace after a newer one
// replaced them, then go; the current one always stays.
func TestSnapshotGC(t *testing.T) {
	f := world(t)
	f.cfg().Desktop.SnapshotReaderGrace = time.Minute
	r1 := f.preflight("B1")
	f.now = f.now.Add(time.Second)
	r2 := f.preflight("B1")
	dir := func(rev string) string { return filepath.Join(f.sv.Inbox(), "snapshots", rev) }
	if _, err := os.Stat(dir(r1.SnapshotRevision)); err != nil {
		t.Fatalf("old revision collected at once: %v", err)
	}
	f.now = f.now.Add(2 * time.Minute)
	r3 := f.preflight("B1")
	for rev, want := range map[string]bool{r1.SnapshotRevision: false, r2.SnapshotRevision: true, r3.SnapshotRevision: true} {
		if _, err := os.Stat(dir(rev)); (err == nil) != want {
			t.Errorf("revision %s present=%v, want %v", rev, err == nil, want)
		}
	}
	f.now = f.now.Add(2 * time.Minute)
	f.sv.Reconcile(f.ctx, actor)
	if _, err := os.Stat(dir(r3.SnapshotRevision)); err != nil {
		t.Errorf("current revision collected: %v", err)
	}
	if _, err := os.Stat(dir(r2.SnapshotRevision)); err == nil {
		t.Errorf("replaced revision kept past the grace")
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
