package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// Cancelling a job of a queued batch, then completing another job that
// joins the same batch, must not reuse a taken position (it did: the
// position was the batch's job_count, which the withdrawal lowered, and
// the next complete failed with UNIQUE constraint batch_jobs.position).
func TestCancelThenCompleteInQueuedBatch(t *testing.T) {
	sv, _ := newService(t)
	sv.Cfg.MaxWaitWindow = time.Hour
	ctx := context.Background()
	var js []*Job
	for range 3 {
		j, err := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: "Q", TaskKind: "k", Summary: "s"})
		if err != nil {
			t.Fatal(err)
		}
		js = append(js, j)
	}
	if _, err := sv.Complete(ctx, actor, CompleteRequest{JobID: js[0].JobID, Summary: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Fail(ctx, actor, FailRequest{JobID: js[1].JobID, Reason: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Cancel(ctx, actor, CancelRequest{JobID: js[0].JobID}); err != nil {
		t.Fatal(err)
	}
	done, err := sv.Complete(ctx, actor, CompleteRequest{JobID: js[2].JobID, Summary: "c"})
	if err != nil {
		t.Fatalf("complete after a withdrawal: %v", err)
	}
	b, err := delivery.Inspect(ctx, sv.Store.DB, *done.BatchID)
	if err != nil || !slices.Equal(b.JobIDs, []string{js[1].JobID, js[2].JobID}) {
		t.Fatalf("batch jobs %v (%v), want the failed then the completed job in order", b.JobIDs, err)
	}
}

// model is the seed's FIFO rules in memory: per thread an ordered list of
// batches; a ready or failed job joins the thread's newest batch while it
// is queued and within max_jobs_per_batch and max_wait_window, else opens
// a new batch; the head (oldest open batch) is materialized when it is
// full, its wait window has passed or a later batch exists; cancelling a
// job withdraws it from a queued batch (closing the batch cancelled when
// it empties) but never from a materialized one; close-head closes the
// head and the next batch becomes head.
type model struct {
	maxJobs int
	window  time.Duration
	jobs    map[string]*mJob
	threads map[string][]*mBatch
}

type mJob struct {
	id, thread string
	status     Status
	batch      *mBatch
}

type mBatch struct {
	id     string // learned from the store when the batch is created
	jobs   []string
	first  time.Time
	state  string // queued, open (materialized or cooldown), closed
	reason string
}

func (m *model) open(thread string) []*mBatch {
	var out []*mBatch
	for _, b := range m.threads[thread] {
		if b.state != "closed" {
			out = append(out, b)
		}
	}
	return out
}

// settle materializes the thread's head when it is due.
func (m *model) settle(thread string, now time.Time) {
	open := m.open(thread)
	if len(open) == 0 || open[0].state != "queued" {
		return
	}
	h, all := open[0], m.threads[thread]
	later := all[len(all)-1] != h
	if !now.Before(h.first.Add(m.window)) || len(h.jobs) >= m.maxJobs || later {
		h.state = "open"
	}
}

// enqueue returns the batch the job joined and whether it is new.
func (m *model) enqueue(j *mJob, now time.Time) (*mBatch, bool) {
	all := m.threads[j.thread]
	if n := len(all); n > 0 {
		last := all[n-1]
		if last.state == "queued" && len(last.jobs) < m.maxJobs && !now.After(last.first.Add(m.window)) {
			last.jobs = append(last.jobs, j.id)
			j.batch = last
			m.settle(j.thread, now)
			return last, false
		}
	}
	b := &mBatch{jobs: []string{j.id}, first: now, state: "queued"}
	m.threads[j.thread] = append(all, b)
	j.batch = b
	m.settle(j.thread, now)
	return b, true
}

func (m *model) closeBatch(thread string, b *mBatch, reason string, now time.Time) {
	b.state, b.reason = "closed", reason
	m.settle(thread, now)
}

// TestJobsAgainstModel runs random submit/complete/fail/cancel/close-head
// sequences with a moving clock and checks every result against the model.
func TestJobsAgainstModel(t *testing.T) {
	seeds := 10
	if testing.Short() {
		seeds = 3
	}
	if n, err := strconv.Atoi(os.Getenv("CBTH_MODEL_SEEDS")); err == nil && n > 0 {
		seeds = n // a longer campaign: CBTH_MODEL_SEEDS=500 go test -run TestJobsAgainstModel
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed, 150) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	sv, _ := newService(t)
	sv.Cfg.MaxJobsPerBatch, sv.Cfg.MaxWaitWindow, sv.Cfg.MaxTotalBytes = 3, 10*time.Second, 1<<40
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	sv.Store.Now = func() time.Time { return now }
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 18))
	m := &model{maxJobs: 3, window: 10 * time.Second, jobs: map[string]*mJob{}, threads: map[string][]*mBatch{}}
	threads := []string{"A", "B", "C"}
	var order []string // job ids in submit order
	pick := func() *mJob {
		if len(order) == 0 {
			return nil
		}
		return m.jobs[order[rng.IntN(len(order))]]
	}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d after %d steps (last: %v): %s", seed, len(log), log[max(len(log)-12, 0):], fmt.Sprintf(format, args...))
	}
	for step := 0; step < steps; step++ {
		switch op := rng.IntN(10); {
		case op < 3:
			th := threads[rng.IntN(len(threads))]
			j, err := sv.Submit(ctx, actor, SubmitRequest{TargetKind: "cli", SourceThreadID: th, TaskKind: "k", Summary: "s"})
			if err != nil {
				fail("submit: %v", err)
			}
			m.jobs[j.JobID] = &mJob{id: j.JobID, thread: th, status: Running}
			order = append(order, j.JobID)
			log = append(log, "submit "+th)
		case op < 6:
			mj := pick()
			if mj == nil {
				continue
			}
			var got *Job
			var err error
			to := Ready
			if rng.IntN(2) == 0 {
				got, err = sv.Complete(ctx, actor, CompleteRequest{JobID: mj.id, Summary: "r"})
			} else {
				to = Failed
				got, err = sv.Fail(ctx, actor, FailRequest{JobID: mj.id, Reason: "f"})
			}
			log = append(log, fmt.Sprintf("%s %s", to, mj.id))
			if mj.status != Running {
				if abi.CodeOf(err) != abi.EEXIST {
					fail("finishing a %s job: %v, want EEXIST", mj.status, err)
				}
				continue
			}
			if err != nil {
				fail("finishing: %v", err)
			}
			mj.status = to
			b, fresh := m.enqueue(mj, now)
			if fresh {
				b.id = *got.BatchID
			} else if *got.BatchID != b.id {
				fail("job joined %s, model says %s", *got.BatchID, b.id)
			}
		case op < 8:
			mj := pick()
			if mj == nil {
				continue
			}
			_, err := sv.Cancel(ctx, actor, CancelRequest{JobID: mj.id})
			log = append(log, "cancel "+mj.id)
			switch {
			case mj.status == Cancelled:
				if abi.CodeOf(err) != abi.EEXIST {
					fail("cancel twice: %v", err)
				}
			case mj.batch != nil && mj.batch.state != "queued":
				if abi.CodeOf(err) != abi.EBUSY {
					fail("cancel of a job in a %s batch: %v, want EBUSY", mj.batch.state, err)
				}
			default:
				if err != nil {
					fail("cancel: %v", err)
				}
				mj.status = Cancelled
				if b := mj.batch; b != nil {
					b.jobs = slices.DeleteFunc(b.jobs, func(id string) bool { return id == mj.id })
					mj.batch = nil
					if len(b.jobs) == 0 {
						m.closeBatch(mj.thread, b, "cancelled", now)
					}
				}
			}
		case op < 9:
			th := threads[rng.IntN(len(threads))]
			var out delivery.Outcome
			err := delivery.Run(ctx, sv.Store, sv.Cfg, actor, func(o *delivery.Op) (err error) {
				_, out, err = delivery.CloseHead(o, th, delivery.CloseOperatorClosedUnconfirmed)
				return err
			})
			log = append(log, "close-head "+th)
			open := m.open(th)
			if len(open) == 0 {
				if abi.CodeOf(err) != abi.ENOENT {
					fail("close-head without a head: %v %q, want ENOENT", err, out)
				}
				continue
			}
			if err != nil || out != delivery.OutcomeOK {
				fail("close-head: %v %q", err, out)
			}
			m.closeBatch(th, open[0], "operator_closed_unconfirmed", now)
		default:
			d := time.Duration(rng.IntN(8)) * time.Second
			now = now.Add(d)
			log = append(log, "+"+d.String())
		}
		check(t, sv, m, threads, fail)
	}
}

func check(t *testing.T, sv *Service, m *model, threads []string, fail func(string, ...any)) {
	t.Helper()
	ctx := context.Background()
	for id, mj := range m.jobs {
		j, err := Get(ctx, sv.Store.DB, id)
		if err != nil {
			fail("get %s: %v", id, err)
		}
		if j.Status != mj.status {
			fail("job %s is %s, model %s", id, j.Status, mj.status)
		}
		if (j.BatchID == nil) != (mj.batch == nil) || mj.batch != nil && *j.BatchID != mj.batch.id {
			fail("job %s batch %v, model %+v", id, j.BatchID, mj.batch)
		}
	}
	for _, th := range threads {
		for _, mb := range m.threads[th] {
			b, err := delivery.Inspect(ctx, sv.Store.DB, mb.id)
			if err != nil {
				fail("inspect %s: %v", mb.id, err)
			}
			state := string(b.State)
			if state == "materialized" || state == "cooldown" {
				state = "open"
			}
			if state != mb.state {
				fail("batch %s is %s, model %s", mb.id, b.State, mb.state)
			}
			if mb.state == "closed" && (b.CloseReason == nil || *b.CloseReason != mb.reason) {
				fail("batch %s closed %v, model %s", mb.id, b.CloseReason, mb.reason)
			}
			if mb.state != "closed" && !slices.Equal(b.JobIDs, mb.jobs) {
				fail("batch %s jobs %v, model %v", mb.id, b.JobIDs, mb.jobs)
			}
			if b.RedeliveryWindowEndsAt == nil && mb.state != "closed" {
				fail("open batch %s has no durable redelivery_window_ends_at", mb.id)
			}
		}
		h, err := delivery.InspectHead(ctx, sv.Store.DB, th)
		open := m.open(th)
		if err != nil || (h == nil) != (len(open) == 0) || h != nil && h.BatchID != open[0].id {
			fail("head of %s = %v (%v), model %v", th, h, err, open)
		}
	}
}
