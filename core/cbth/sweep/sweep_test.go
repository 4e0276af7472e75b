package sweep

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

type env struct {
	now time.Time
	sv  *jobs.Service
	sw  *Sweeper
	dir string
}

func setup(t *testing.T) *env {
	dir := t.TempDir()
	s, err := store.Open(context.Background(), filepath.Join(dir, "cbth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := &env{now: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), dir: dir}
	s.Now = func() time.Time { return e.now }
	cfg := config.Default()
	cfg.MaxWaitWindow, cfg.RedeliveryWindow = 0, time.Minute
	cfg.MinArtifactTTL, cfg.PostCloseTTL = time.Hour, 2*time.Hour
	art := filepath.Join(dir, "artifacts")
	os.Mkdir(art, 0o700)
	e.sv = &jobs.Service{Store: s, Cfg: cfg, ArtifactsDir: art}
	e.sw = &Sweeper{Store: s, Cfg: cfg, ArtifactsDir: art, Actor: audit.Actor{Name: "sweep"}}
	return e
}

func (e *env) ready(t *testing.T, thread string, withFile bool) *jobs.Job {
	ctx := context.Background()
	j, err := e.sv.Submit(ctx, audit.Actor{}, jobs.SubmitRequest{TargetKind: "cli", SourceThreadID: thread, TaskKind: "k", Summary: "s"})
	if err != nil {
		t.Fatal(err)
	}
	req := jobs.CompleteRequest{JobID: j.JobID, Summary: "done"}
	if withFile {
		req.ResultFile = filepath.Join(e.dir, "r-"+thread)
		os.WriteFile(req.ResultFile, []byte("payload"), 0o600)
		f, err := os.Open(req.ResultFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		req.Result = f
	}
	j, err = e.sv.Complete(ctx, audit.Actor{}, req)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestSweepClosesExpiredWindowsAndCollects(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	a := e.ready(t, "A", true)
	m := e.ready(t, "M", false)
	err := delivery.Run(ctx, e.sv.Store, e.sv.Cfg, audit.Actor{}, func(o *delivery.Op) error {
		b, _ := delivery.Inspect(ctx, o.Tx, *m.BatchID)
		tok := delivery.Token{SourceThreadID: "M", BatchID: b.BatchID, AttemptID: b.HeadAttempt.AttemptID, Generation: 1}
		if _, err := delivery.BeginAccept(o, tok, delivery.ModeCLITurnStart, "r", "m", "s", 1); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.sw.Run(ctx, false)
	if err != nil || len(r.Closed) != 0 || r.AcceptPendingAbandons != 0 {
		t.Fatalf("early sweep %+v %v", r, err)
	}
	r, err = e.sw.Run(ctx, true) // a restart: accept_pending continuity is lost
	if err != nil || r.AcceptPendingAbandons != 1 {
		t.Fatalf("startup sweep %+v %v", r, err)
	}
	if nt, why, _ := NearTerm(ctx, e.sv.Store, e.sv.Cfg, 2*time.Minute); !nt || why != "redelivery_window_ends_at" {
		t.Errorf("NearTerm = %v %q", nt, why)
	}
	e.now = e.now.Add(61 * time.Second)
	r, err = e.sw.Run(ctx, false)
	if err != nil || r.Closed["redelivery_window_exhausted"] != 1 || r.Closed["manual_resolution_expired"] != 1 {
		t.Fatalf("window sweep %+v %v", r, err)
	}
	ba, _ := delivery.Inspect(ctx, e.sv.Store.DB, *a.BatchID)
	if *ba.CloseReason != "redelivery_window_exhausted" {
		t.Errorf("A closed as %v", *ba.CloseReason)
	}
	art, _ := artifacts.Get(ctx, e.sv.Store.DB, *a.ArtifactID)
	if art.LastBatchClosedAt == nil || art.GCEligibleAt == nil {
		t.Fatalf("retention not recorded: %+v", art)
	}
	e.now = e.now.Add(time.Hour) // past min_artifact_ttl, not post_close_ttl
	if r, _ = e.sw.Run(ctx, false); r.ArtifactsCollected != 0 {
		t.Fatal("collected before post_close_ttl")
	}
	e.now = e.now.Add(2 * time.Hour)
	if r, _ = e.sw.Run(ctx, false); r.ArtifactsCollected != 1 {
		t.Fatalf("not collected: %+v", r)
	}
	if _, err := os.Stat(art.ManagedPath); !os.IsNotExist(err) {
		t.Errorf("payload still there: %v", err)
	}
}

func TestPinAndOpenBatchBlockGC(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.sv.Cfg.RedeliveryWindow = 1000 * time.Hour
	e.sw.Cfg = e.sv.Cfg
	a := e.ready(t, "P", true)
	e.now = e.now.Add(500 * time.Hour) // TTLs long over, but the batch is open
	if r, _ := e.sw.Run(ctx, false); r.ArtifactsCollected != 0 {
		t.Fatal("collected while a non-terminal batch refers to it")
	}
	err := delivery.Run(ctx, e.sv.Store, e.sv.Cfg, audit.Actor{}, func(o *delivery.Op) error {
		if err := artifacts.Pin(ctx, o.Tx, *a.ArtifactID, e.now.Add(10*time.Hour), e.sv.Cfg); err != nil {
			return err
		}
		_, _, err := delivery.CloseHead(o, "P", delivery.CloseOperatorConfirmedDelivery)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(3 * time.Hour) // past post_close_ttl, not the pin
	if r, _ := e.sw.Run(ctx, false); r.ArtifactsCollected != 0 {
		t.Fatal("collected while pinned")
	}
	e.now = e.now.Add(8 * time.Hour)
	if r, _ := e.sw.Run(ctx, false); r.ArtifactsCollected != 1 {
		t.Fatal("not collected after the pin")
	}
}
