package delivery

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

type fixture struct {
	t   *testing.T
	s   *store.Store
	cfg config.Config
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cbth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{t: t, s: s, cfg: config.Default(), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s.Now = func() time.Time { return f.now }
	return f
}

var testActor = audit.Actor{Name: "test", UID: 0, PID: 1}

func (f *fixture) run(fn func(o *Op) error) {
	f.t.Helper()
	if err := Run(context.Background(), f.s, f.cfg, testActor, fn); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.s.DB.Exec(q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

// addJob inserts a ready job row directly (the jobs package is tested on
// its own) and enqueues it.
func (f *fixture) addJob(thread string, target TargetKind, bytes int64) (jobID, batchID string) {
	f.t.Helper()
	jobID = ids.New("job_")
	at := store.TS(f.now)
	f.exec(`INSERT INTO jobs(job_id, target_kind, source_thread_id, status, task_kind, task_summary,
		delivery_read_only, delivery_requires_approval, delivery_requires_network, delivery_requires_write_access,
		delivery_policy_sources, created_at, ready_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		jobID, target, thread, "ready", "k", "summary of "+jobID, 1, 0, 0, 0, "{}", at, at, at)
	f.run(func(o *Op) error {
		var err error
		batchID, err = Enqueue(o, ReadyJob{JobID: jobID, SourceThreadID: thread, TargetKind: target, Bytes: bytes})
		return err
	})
	return jobID, batchID
}

// rawAttempt makes a thread with one batch whose only attempt is in state.
func (f *fixture) rawAttempt(state AttemptState) (thread, batchID, attemptID string) {
	f.t.Helper()
	thread = ids.New("thr_")
	batchID, attemptID = ids.New(BatchPrefix), ids.New(AttemptPrefix)
	at := store.TS(f.now)
	f.exec(`INSERT INTO threads(source_thread_id, updated_at) VALUES (?,?)`, thread, at)
	f.exec(`INSERT INTO batches(batch_id, seq, source_thread_id, target_kind, state, first_ready_at, last_ready_at,
		max_delivery_attempts, head_attempt_id, generation, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		batchID, 1, thread, "cli", "materialized", at, at, 3, attemptID, 1, at, at)
	f.exec(`INSERT INTO attempts(attempt_id, source_thread_id, batch_id, generation, state, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?)`, attemptID, thread, batchID, 1, state, at, at)
	return
}

func (f *fixture) attemptState(id string) AttemptState {
	f.t.Helper()
	var s AttemptState
	if err := f.s.DB.QueryRow(`SELECT state FROM attempts WHERE attempt_id = ?`, id).Scan(&s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) auditCount(entity string) int {
	f.t.Helper()
	var n int
	if err := f.s.DB.QueryRow(`SELECT COUNT(*) FROM audit WHERE entity_id = ?`, entity).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) batch(id string) *Batch {
	f.t.Helper()
	b, err := Inspect(context.Background(), f.s.DB, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) head(thread string) *Batch {
	f.t.Helper()
	b, err := InspectHead(context.Background(), f.s.DB, thread)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func tokenOf(b *Batch) Token {
	if b == nil || b.HeadAttempt == nil {
		panic(fmt.Sprintf("batch without head attempt: %+v", b))
	}
	return Token{SourceThreadID: b.SourceThreadID, BatchID: b.BatchID, AttemptID: b.HeadAttempt.AttemptID,
		Generation: b.HeadAttempt.Generation}
}
