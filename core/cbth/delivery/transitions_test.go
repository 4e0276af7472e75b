package delivery

import (
	"context"
	"fmt"
	"github.com/cortexfs/cortexfs/core/abi"
	"testing"
)

// The seed's "Attempt 迁移" table, written out independently of the code.
var seedAttemptTable = map[[2]AttemptState]bool{
	{"prepared", "arm_pending"}: true, {"arm_pending", "cooldown"}: true, {"cooldown", "closed"}: true,
	{"prepared", "accept_pending"}: true, {"accept_pending", "cooldown"}: true,
	{"accept_pending", "prepared"}: true,
	{"prepared", "abandoned"}:      true, {"prepared", "superseded"}: true,
	{"accept_pending", "abandoned"}: true, {"accept_pending", "superseded"}: true,
	{"arm_pending", "abandoned"}: true, {"arm_pending", "superseded"}: true,
	{"cooldown", "abandoned"}: true, {"cooldown", "superseded"}: true,
}

func TestAttemptStatesAreTheSeeds(t *testing.T) {
	want := []AttemptState{"prepared", "accept_pending", "arm_pending", "cooldown", "closed", "superseded", "abandoned"}
	if fmt.Sprint(AttemptStates) != fmt.Sprint(want) {
		t.Errorf("AttemptStates = %v, want %v", AttemptStates, want)
	}
	n := 0
	for _, from := range AttemptStates {
		for _, to := range AttemptStates {
			if AttemptAllowed(from, to) != seedAttemptTable[[2]AttemptState{from, to}] {
				t.Errorf("AttemptAllowed(%s, %s) = %v, seed says %v", from, to, AttemptAllowed(from, to), !AttemptAllowed(from, to))
			}
			if AttemptAllowed(from, to) {
				n++
			}
		}
	}
	if n != 14 {
		t.Errorf("%d allowed pairs, the seed has 14", n)
	}
}

func TestCloseReasonsAreTheNine(t *testing.T) {
	want := "[delivered superseded operator_confirmed_delivery operator_closed_unconfirmed cancelled " +
		"redelivery_window_exhausted manual_resolution_expired max_attempts_exhausted handoff_recorded]"
	if fmt.Sprint(CloseReasons) != want {
		t.Errorf("CloseReasons = %v", CloseReasons)
	}
	if CloseReason("closed").Valid() || !CloseHandoffRecorded.Valid() {
		t.Error("Valid is wrong")
	}
}

// Every allowed transition succeeds exactly once (a repeat is stale); every
// other pair is refused as a bug (EIO) and changes nothing.
func TestAttemptCASEveryPair(t *testing.T) {
	f := newFixture(t)
	for _, from := range AttemptStates {
		for _, to := range AttemptStates {
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				_, _, id := f.rawAttempt(from)
				before := f.auditCount(id)
				var out Outcome
				var casErr error
				_ = Run(context.Background(), f.s, f.cfg, testActor, func(o *Op) error {
					out, casErr = casAttempt(o, AttemptCAS{AttemptID: id, Generation: 1, From: from, To: to, Reason: "test"})
					return casErr
				})
				if !seedAttemptTable[[2]AttemptState{from, to}] {
					if abi.CodeOf(casErr) != abi.EIO || f.attemptState(id) != from || f.auditCount(id) != before {
						t.Fatalf("illegal %s->%s: outcome %q, state %s, audit rows %d->%d", from, to, out,
							f.attemptState(id), before, f.auditCount(id))
					}
					return
				}
				if casErr != nil || out != OutcomeOK || f.attemptState(id) != to || f.auditCount(id) != before+1 {
					t.Fatalf("allowed %s->%s: outcome %q, state %s, audit %d->%d", from, to, out, f.attemptState(id),
						before, f.auditCount(id))
				}
				f.run(func(o *Op) (err error) {
					out, err = casAttempt(o, AttemptCAS{AttemptID: id, Generation: 1, From: from, To: to})
					return err
				})
				if out != OutcomeStaleOrSuperseded || f.attemptState(id) != to || f.auditCount(id) != before+1 {
					t.Fatalf("repeat %s->%s: outcome %q, state %s", from, to, out, f.attemptState(id))
				}
			})
		}
	}
}

// A CAS whose expectation is stale (another generation, another current
// state, an unknown attempt) is a no-op reported as stale_or_superseded.
func TestAttemptCASStale(t *testing.T) {
	f := newFixture(t)
	for pair := range seedAttemptTable {
		from, to := pair[0], pair[1]
		_, _, id := f.rawAttempt(from)
		cases := []AttemptCAS{
			{AttemptID: id, Generation: 2, From: from, To: to},
			{AttemptID: "att_nope", Generation: 1, From: from, To: to},
		}
		for other := range seedAttemptTable {
			if other[0] != from {
				cases = append(cases, AttemptCAS{AttemptID: id, Generation: 1, From: other[0], To: other[1]})
				break
			}
		}
		for _, c := range cases {
			var out Outcome
			f.run(func(o *Op) (err error) { out, err = casAttempt(o, c); return err })
			if out != OutcomeStaleOrSuperseded || f.attemptState(id) != from || f.auditCount(id) != 0 {
				t.Errorf("stale %+v on %s attempt: outcome %q, state %s, audit %d", c, from, out, f.attemptState(id), f.auditCount(id))
			}
		}
	}
}

func TestBatchCASEveryPair(t *testing.T) {
	allowed := map[[2]BatchState]bool{{"queued", "materialized"}: true, {"queued", "closed"}: true,
		{"materialized", "cooldown"}: true, {"materialized", "closed"}: true, {"cooldown", "materialized"}: true,
		{"cooldown", "closed"}: true}
	f := newFixture(t)
	for _, from := range BatchStates {
		for _, to := range BatchStates {
			_, b, _ := f.rawAttempt(AttemptAbandoned)
			reason := any(nil)
			if from == BatchClosed {
				reason = "cancelled"
			}
			f.exec(`UPDATE batches SET state = ?, close_reason = ? WHERE batch_id = ?`, from, reason, b)
			sets := []Set{}
			if to == BatchClosed {
				sets = append(sets, Set{"close_reason", "cancelled"})
			} else if from == BatchClosed {
				sets = append(sets, Set{"close_reason", nil})
			}
			var out Outcome
			var casErr error
			_ = Run(context.Background(), f.s, f.cfg, testActor, func(o *Op) error {
				out, casErr = casBatch(o, BatchCAS{BatchID: b, From: from, To: to, Sets: sets})
				return casErr
			})
			got := f.batch(b).State
			ok := allowed[[2]BatchState{from, to}]
			if ok && (out != OutcomeOK || got != to) || !ok && (abi.CodeOf(casErr) != abi.EIO || got != from) {
				t.Errorf("batch %s->%s: outcome %q state %s (allowed=%v)", from, to, out, got, ok)
			}
			if ok {
				f.run(func(o *Op) (err error) {
					out, err = casBatch(o, BatchCAS{BatchID: b, From: from, To: to, Sets: sets})
					return err
				})
				if out != OutcomeStaleOrSuperseded {
					t.Errorf("batch repeat %s->%s: %q", from, to, out)
				}
			}
		}
	}
}

// The store itself refuses a second non-terminal attempt on one thread.
func TestOneLiveAttemptPerThread(t *testing.T) {
	f := newFixture(t)
	for _, st := range []AttemptState{"prepared", "accept_pending", "arm_pending", "cooldown"} {
		thread, b, _ := f.rawAttempt(st)
		_, err := f.s.DB.Exec(`INSERT INTO attempts(attempt_id, source_thread_id, batch_id, generation, state,
			created_at, updated_at) VALUES ('att_x', ?, ?, 2, 'prepared', 'x', 'x')`, thread, b)
		if err == nil {
			t.Errorf("second live attempt accepted beside a %s one", st)
		}
	}
	thread, b, _ := f.rawAttempt("abandoned")
	f.exec(`INSERT INTO attempts(attempt_id, source_thread_id, batch_id, generation, state, created_at, updated_at)
		VALUES ('att_y', ?, ?, 2, 'prepared', 'x', 'x')`, thread, b)
}
