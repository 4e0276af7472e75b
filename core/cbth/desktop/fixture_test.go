package desktop

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

type fixture struct {
	t    *testing.T
	ctx  context.Context
	sv   *Service
	jobs *jobs.Service
	now  time.Time
	in   FingerprintInputs
	dir  string
}

var actor = audit.Actor{Name: "test", UID: 1, PID: 2}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	h := home.Home{Root: filepath.Join(dir, "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), h.DB())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := config.Default()
	cfg.MaxWaitWindow, cfg.MinDeliveryInterval = 0, 0
	f := &fixture{t: t, ctx: context.Background(), now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), dir: dir,
		in: FingerprintInputs{CodexBuild: "codex 1", HelperSurfaceRevision: HelperSurfaceRevision, CbthBuild: "cbth 1",
			PermissionShape: "uid=1"}}
	s.Now = func() time.Time { return f.now }
	f.sv = NewService(s, cfg, h, nil)
	f.sv.Observe = func() FingerprintInputs { return f.in }
	f.jobs = &jobs.Service{Store: s, Cfg: cfg, ArtifactsDir: h.Artifacts()}
	return f
}

func (f *fixture) cfg() *config.Config { return &f.sv.Cfg }

// syncCfg gives the jobs service the fixture's (possibly edited) config.
func (f *fixture) syncCfg() { f.jobs.Cfg = f.sv.Cfg }

// install repairs the installation state with every capability validated.
func (f *fixture) install() {
	f.t.Helper()
	v := CapValidated
	if _, err := f.sv.RepairInstallation(f.ctx, actor, RepairRequest{ReadTransport: DirectFileRead,
		ReadTransportCapability: &v, ArtifactReadCapability: &v, WritebackCapability: &v}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) bind(thread, automation string) *BindingRepairResult {
	f.t.Helper()
	r, err := f.sv.RepairBinding(f.ctx, actor, BindingRepairRequest{SourceThreadID: thread, CallerAutomationID: automation})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// job submits and completes a Desktop job; withFile adds a result file of
// size bytes. It returns the job id.
func (f *fixture) job(thread, summary string, size int) string {
	f.t.Helper()
	f.syncCfg()
	j, err := f.jobs.Submit(f.ctx, actor, jobs.SubmitRequest{TargetKind: "desktop", SourceThreadID: thread,
		TaskKind: "ci", Summary: summary})
	if err != nil {
		f.t.Fatal(err)
	}
	req := jobs.CompleteRequest{JobID: j.JobID, Summary: "result of " + summary}
	if size > 0 {
		req.ResultFile = filepath.Join(f.dir, j.JobID)
		if err := os.WriteFile(req.ResultFile, []byte(strings.Repeat("r", size)), 0o600); err != nil {
			f.t.Fatal(err)
		}
		fd, err := os.Open(req.ResultFile)
		if err != nil {
			f.t.Fatal(err)
		}
		defer fd.Close()
		req.Result = fd
	}
	if _, err := f.jobs.Complete(f.ctx, actor, req); err != nil {
		f.t.Fatal(err)
	}
	return j.JobID
}

func (f *fixture) head(thread string) *delivery.Batch {
	f.t.Helper()
	b, err := delivery.InspectHead(f.ctx, f.sv.Store.DB, thread)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) batch(id string) *delivery.Batch {
	f.t.Helper()
	b, err := delivery.Inspect(f.ctx, f.sv.Store.DB, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) binding(thread string) *Binding {
	f.t.Helper()
	b, err := GetBinding(f.ctx, f.sv.Store.DB, thread)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// tok is the caller prompt token of the thread's head.
type tok struct {
	thread, batch, attempt, rev string
	gen                         int64
}

func (f *fixture) tok(thread string) tok {
	f.t.Helper()
	b := f.head(thread)
	if b == nil || b.HeadAttempt == nil {
		f.t.Fatalf("thread %s has no head attempt: %+v", thread, b)
	}
	return tok{thread, b.BatchID, b.HeadAttempt.AttemptID, *b.HeadAttempt.SnapshotRevision, b.HeadAttempt.Generation}
}

func (k tok) arm(req string) ArmRequest {
	return ArmRequest{SourceThreadID: k.thread, AttemptID: k.attempt, Generation: k.gen, BridgeRequestID: req}
}

func (k tok) boundary() BoundaryRequest {
	return BoundaryRequest{SourceThreadID: k.thread, BatchID: k.batch, AttemptID: k.attempt, Generation: k.gen,
		ExpectedSnapshotRevision: k.rev}
}

// armed takes the thread's head through note-arm-pending and note-arm.
func (f *fixture) armed(thread, req string) tok {
	f.t.Helper()
	k := f.tok(thread)
	p, err := f.sv.NoteArmPending(f.ctx, actor, k.arm(req))
	if err != nil || p.Outcome != delivery.OutcomeOK {
		f.t.Fatalf("note-arm-pending: %+v %v", p, err)
	}
	r := k.arm(req)
	r.BridgeArmLeaseID = p.BridgeArmLeaseID
	a, err := f.sv.NoteArm(f.ctx, actor, r)
	if err != nil || a.Outcome != delivery.OutcomeOK {
		f.t.Fatalf("note-arm: %+v %v", a, err)
	}
	return k
}

// dump renders every row of every table: two equal dumps mean the store
// did not change at all.
func (f *fixture) dump() string {
	f.t.Helper()
	db := f.sv.Store.DB
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		f.t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, tb := range tables {
		fmt.Fprintf(&b, "== %s\n", tb)
		rs, err := db.Query(`SELECT * FROM ` + tb + ` ORDER BY rowid`)
		if err != nil {
			rs, err = db.Query(`SELECT * FROM ` + tb)
		}
		if err != nil {
			f.t.Fatal(err)
		}
		cols, _ := rs.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rs.Next() {
			if err := rs.Scan(ptrs...); err != nil {
				f.t.Fatal(err)
			}
			for i, v := range vals {
				fmt.Fprintf(&b, "%s=%q ", cols[i], v)
			}
			b.WriteString("\n")
		}
		rs.Close()
	}
	return b.String()
}

// unchanged runs fn and fails unless the store is byte-for-byte the same.
func (f *fixture) unchanged(name string, fn func()) {
	f.t.Helper()
	before := f.dump()
	fn()
	if after := f.dump(); after != before {
		f.t.Errorf("%s changed the store:\n%s", name, diffLines(before, after))
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	seen := map[string]int{}
	for _, l := range al {
		seen[l]++
	}
	var out []string
	for _, l := range bl {
		if seen[l] > 0 {
			seen[l]--
			continue
		}
		out = append(out, "+ "+l)
	}
	for l, n := range seen {
		for ; n > 0; n-- {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}
