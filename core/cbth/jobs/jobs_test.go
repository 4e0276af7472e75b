package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

var actor = audit.Actor{Name: "client", UID: 1000, PID: 42}

func newService(t *testing.T) (*Service, string) { return newServiceB(t) }

func newServiceB(t testing.TB) (*Service, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(context.Background(), filepath.Join(dir, "cbth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	art := filepath.Join(dir, "artifacts")
	if err := os.Mkdir(art, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.MaxWaitWindow = 0
	return &Service{Store: s, Cfg: cfg, ArtifactsDir: art}, dir
}

func bp(b bool) *bool { return &b }

// openOrNil opens path as a client would hand it over ("" is no file).
func openOrNil(t *testing.T, path string) *os.File {
	t.Helper()
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestSubmitNormalization(t *testing.T) {
	sv, dir := newService(t)
	meta := filepath.Join(dir, "meta.json")
	os.WriteFile(meta, []byte(`{"delivery_policy":{"read_only":true,"requires_approval":false,
		"requires_network":false,"requires_write_access":false},"x":1}`), 0o600)
	tests := []struct {
		name  string
		flags PolicyInput
		meta  string
		want  Policy
	}{
		{"fail-closed defaults", PolicyInput{}, "", Policy{false, true, true, true}},
		{"metadata only", PolicyInput{}, meta, Policy{true, false, false, false}},
		{"flags override metadata", PolicyInput{ReadOnly: bp(false), RequiresNetwork: bp(true)}, meta,
			Policy{false, false, true, false}},
		{"flags only", PolicyInput{ReadOnly: bp(true), RequiresApproval: bp(false)}, "", Policy{true, false, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := sv.Submit(context.Background(), actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "th",
				TaskKind: "ci", Summary: "s", MetadataFile: tt.meta, Metadata: openOrNil(t, tt.meta), Policy: tt.flags})
			if err != nil {
				t.Fatal(err)
			}
			if j.Policy != tt.want || j.Status != Running || j.AcceptedAt == "" {
				t.Errorf("policy = %+v status %s, want %+v", j.Policy, j.Status, tt.want)
			}
		})
	}
}

func TestSubmitValidationAndDedupe(t *testing.T) {
	sv, dir := newService(t)
	bad := []SubmitRequest{
		{TargetKind: "web", SourceThreadID: "t", TaskKind: "k", Summary: "s"},
		{TargetKind: "cli", SourceThreadID: "", TaskKind: "k", Summary: "s"},
		{TargetKind: "cli", SourceThreadID: "t\n", TaskKind: "k", Summary: "s"},
		{TargetKind: "cli", SourceThreadID: "t", TaskKind: "k", Summary: ""},
		{TargetKind: "cli", SourceThreadID: "t", TaskKind: "k", Summary: "s", MetadataFile: filepath.Join(dir, "none")},
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"delivery_policy":{"read_only":"yes"}}`), 0o600)
	bad = append(bad, SubmitRequest{TargetKind: "cli", SourceThreadID: "t", TaskKind: "k", Summary: "s",
		MetadataFile: filepath.Join(dir, "bad.json"), Metadata: openOrNil(t, filepath.Join(dir, "bad.json"))})
	for _, r := range bad {
		if _, err := sv.Submit(context.Background(), actor, r); err == nil {
			t.Errorf("accepted %+v", r)
		}
	}
	var n int
	sv.Store.DB.QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n)
	if n != 0 {
		t.Fatalf("bad input wrote %d jobs", n)
	}
	r := SubmitRequest{TargetKind: "desktop", SourceThreadID: "t", TaskKind: "k", Summary: "s", DedupeKey: "d1"}
	a, err := sv.Submit(context.Background(), actor, r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sv.Submit(context.Background(), actor, r)
	if err != nil || b.JobID != a.JobID || !b.Deduplicated || a.Deduplicated {
		t.Fatalf("dedupe: %v %+v %+v", err, a, b)
	}
}

func TestCompleteIngestsResultFile(t *testing.T) {
	sv, dir := newService(t)
	ctx := context.Background()
	j, _ := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "T", TaskKind: "k", Summary: "s"})
	res := filepath.Join(dir, "result.txt")
	data := []byte("the result\n")
	os.WriteFile(res, data, 0o644)
	done, err := sv.Complete(ctx, actor, CompleteRequest{JobID: j.JobID, Summary: "done", ResultFile: res, Result: openOrNil(t, res)})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(res) // the original may go right away
	sum := sha256.Sum256(data)
	a := done.Artifact
	if done.Status != Ready || a == nil || a.SHA256 != hex.EncodeToString(sum[:]) || a.SizeBytes != int64(len(data)) ||
		a.ContentType != "text/plain; charset=utf-8" || a.SourceJobID != j.JobID || done.BatchID == nil {
		t.Fatalf("completed job = %+v artifact %+v", done, a)
	}
	got, err := os.ReadFile(a.ManagedPath)
	if err != nil || string(got) != string(data) {
		t.Fatalf("payload %q %v", got, err)
	}
	for _, p := range []string{a.ManagedPath, a.ManifestPath} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v %v", p, fi.Mode(), err)
		}
	}
	if _, err := sv.Complete(ctx, actor, CompleteRequest{JobID: j.JobID, Summary: "again"}); abi.CodeOf(err) != abi.EEXIST {
		t.Errorf("second complete: %v", err)
	}
	if _, err := sv.Complete(ctx, actor, CompleteRequest{JobID: "job_nope", Summary: "x"}); abi.CodeOf(err) != abi.ENOENT {
		t.Errorf("complete unknown: %v", err)
	}
	b, err := delivery.InspectHead(ctx, sv.Store.DB, "T")
	if err != nil || b == nil || b.State != delivery.BatchMaterialized || len(b.JobIDs) != 1 || b.JobIDs[0] != j.JobID ||
		len(b.ArtifactIDs) != 1 || *b.InlinePayloadBytes < int64(len(data)) {
		t.Fatalf("head batch %+v %v", b, err)
	}
}

func TestFailIsDeliveredAndCancel(t *testing.T) {
	sv, _ := newService(t)
	ctx := context.Background()
	sv.Cfg.MaxWaitWindow = time.Hour
	j, _ := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "F", TaskKind: "k", Summary: "s"})
	f, err := sv.Fail(ctx, actor, FailRequest{JobID: j.JobID, Reason: "boom"})
	if err != nil || f.Status != Failed || f.BatchID == nil || *f.BatchState != "queued" {
		t.Fatalf("fail: %v %+v", err, f)
	}
	c, err := sv.Cancel(ctx, actor, CancelRequest{JobID: j.JobID})
	if err != nil || c.Status != Cancelled || c.BatchID != nil {
		t.Fatalf("cancel queued failed job: %v %+v", err, c)
	}
	b, _ := delivery.Inspect(ctx, sv.Store.DB, *f.BatchID)
	if b.State != delivery.BatchClosed || *b.CloseReason != "cancelled" {
		t.Errorf("emptied batch %s %v", b.State, b.CloseReason)
	}
	r, _ := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "F", TaskKind: "k", Summary: "s"})
	if c, err := sv.Cancel(ctx, actor, CancelRequest{JobID: r.JobID}); err != nil || c.Status != Cancelled {
		t.Fatalf("cancel running: %v", err)
	}
	if _, err := sv.Cancel(ctx, actor, CancelRequest{JobID: r.JobID}); abi.CodeOf(err) != abi.EEXIST {
		t.Errorf("cancel twice: %v", err)
	}
	if _, err := sv.Fail(ctx, actor, FailRequest{JobID: r.JobID, Reason: "x"}); abi.CodeOf(err) != abi.EEXIST {
		t.Errorf("fail after cancel: %v", err)
	}
	sv.Cfg.MaxWaitWindow = 0
	m, _ := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "M", TaskKind: "k", Summary: "s"})
	sv.Complete(ctx, actor, CompleteRequest{JobID: m.JobID, Summary: "ok"})
	if _, err := sv.Cancel(ctx, actor, CancelRequest{JobID: m.JobID}); abi.CodeOf(err) != abi.EBUSY {
		t.Errorf("cancel materialized: %v", err)
	}
}

func TestJobTransitions(t *testing.T) {
	all := []Status{Running, Ready, Failed, Cancelled}
	ok := map[[2]Status]bool{{Running, Ready}: true, {Running, Failed}: true, {Running, Cancelled}: true,
		{Ready, Cancelled}: true, {Failed, Cancelled}: true}
	for _, a := range all {
		for _, b := range all {
			if Allowed(a, b) != ok[[2]Status{a, b}] {
				t.Errorf("Allowed(%s,%s) = %v", a, b, Allowed(a, b))
			}
		}
	}
}

// A dedupe key is the request's identity, not a global slot: the same
// request gets the same job back; another request (here another thread)
// with the key is EEXIST and never sees the first thread's job.
func TestDedupeKeyBindsTheRequest(t *testing.T) {
	sv, _ := newService(t)
	ctx := context.Background()
	a, err := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "A", TaskKind: "k", Summary: "s", DedupeKey: "K"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []SubmitRequest{
		{TargetKind: "cli", SourceThreadID: "B", TaskKind: "k", Summary: "s", DedupeKey: "K"},
		{TargetKind: "cli", SourceThreadID: "A", TaskKind: "k2", Summary: "s", DedupeKey: "K"},
		{TargetKind: "cli", SourceThreadID: "A", TaskKind: "k", Summary: "other", DedupeKey: "K"},
		{TargetKind: "cli", SourceThreadID: "A", TaskKind: "k", Summary: "s", DedupeKey: "K", Policy: PolicyInput{ReadOnly: bp(true)}},
	} {
		j, err := sv.Submit(ctx, actor, r)
		if abi.CodeOf(err) != abi.EEXIST {
			t.Errorf("reused key for %+v: job %v err %v, want EEXIST", r, j != nil, err)
		}
	}
	again, err := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "A", TaskKind: "k", Summary: "s", DedupeKey: "K"})
	if err != nil || again.JobID != a.JobID || !again.Deduplicated {
		t.Fatalf("same request: %+v %v", again, err)
	}
}
