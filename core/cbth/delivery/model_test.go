package delivery

import (
	"context"
	"github.com/cortexfs/cortexfs/core/abi"
	"slices"
	"testing"
	"time"
)

func TestBatchingLimitsAndFIFO(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxJobsPerBatch, f.cfg.MaxTotalBytes, f.cfg.MaxWaitWindow = 2, 100, 10*time.Second
	j1, b1 := f.addJob("T", TargetCLI, 10)
	j2, b2 := f.addJob("T", TargetCLI, 10) // joins: 2 jobs, 20 bytes
	j3, b3 := f.addJob("T", TargetCLI, 10) // count limit -> new batch
	j4, b4 := f.addJob("T", TargetCLI, 95) // byte limit -> new batch
	if b1 != b2 || b3 == b2 || b4 == b3 {
		t.Fatalf("batches %s %s %s %s", b1, b2, b3, b4)
	}
	h := f.head("T")
	if h.BatchID != b1 || h.State != BatchMaterialized || !slices.Equal(h.JobIDs, []string{j1, j2}) {
		t.Fatalf("head = %s %s %v; want materialized %s (full)", h.BatchID, h.State, h.JobIDs, b1)
	}
	if b := f.batch(b3); b.State != BatchQueued || !slices.Equal(b.JobIDs, []string{j3}) {
		t.Errorf("second batch = %s %v", b.State, b.JobIDs)
	}
	if b := f.batch(b4); !slices.Equal(b.JobIDs, []string{j4}) {
		t.Errorf("third batch jobs %v", b.JobIDs)
	}
	// The wait window: a lone job is queued until max_wait_window passes.
	_, bw := f.addJob("W", TargetCLI, 1)
	if f.batch(bw).State != BatchQueued {
		t.Fatal("lone job materialized before max_wait_window")
	}
	f.now = f.now.Add(11 * time.Second)
	jw2, bw2 := f.addJob("W", TargetCLI, 1) // window over: new batch, and the head is due
	if bw2 == bw || f.batch(bw).State != BatchMaterialized {
		t.Errorf("after the window: head %s, new job %s in %s", f.batch(bw).State, jw2, bw2)
	}
	// Closing the head advances the FIFO to the next batch in order.
	f.run(func(o *Op) error {
		_, out, err := CloseHead(o, "T", CloseOperatorClosedUnconfirmed)
		if out != OutcomeOK {
			t.Errorf("close-head outcome %q", out)
		}
		return err
	})
	if h := f.head("T"); h.BatchID != b3 || h.State != BatchMaterialized {
		t.Errorf("after close, head = %s %s, want %s materialized", h.BatchID, h.State, b3)
	}
	if b := f.batch(b1); b.State != BatchClosed || *b.CloseReason != "operator_closed_unconfirmed" ||
		b.HeadAttempt.State != AttemptAbandoned {
		t.Errorf("closed batch = %s %v head attempt %s", b.State, b.CloseReason, b.HeadAttempt.State)
	}
}

// The batch-level superseded close is the operator's decision through
// close-head; any other reason is EINVAL and closes nothing.
func TestCloseHeadSuperseded(t *testing.T) {
	f := newFixture(t)
	_, b := f.addJob("S", TargetCLI, 1)
	f.run(func(o *Op) error {
		_, _, err := CloseHead(o, "S", "cancelled")
		if abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("close-head --reason cancelled: %v, want EINVAL", err)
		}
		return nil
	})
	if f.batch(b).State == BatchClosed {
		t.Fatal("a refused close-head closed the batch")
	}
	f.run(func(o *Op) error {
		_, out, err := CloseHead(o, "S", CloseSuperseded)
		if out != OutcomeOK {
			t.Errorf("close-head superseded outcome %q", out)
		}
		return err
	})
	if got := f.batch(b); got.State != BatchClosed || *got.CloseReason != "superseded" {
		t.Errorf("after close-head superseded: %s %v", got.State, got.CloseReason)
	}
}

func TestMaterializationDerivesPolicyAndPayload(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxWaitWindow, f.cfg.MaxInlineArtifactBytes = 0, 100
	_, b := f.addJob("P", TargetCLI, 5)
	got := f.batch(b)
	if got.State != BatchMaterialized || got.RedeliveryWindowEndsAt == nil || got.HeadAttempt == nil ||
		got.HeadAttempt.State != AttemptPrepared || got.Generation != 1 || got.InlinePayloadBytes == nil ||
		*got.InlinePayloadBytes == 0 || *got.RequiresArtifactRead || !*got.DeliveryReadOnly || *got.DeliveryRequiresApproval {
		t.Fatalf("materialized batch = %+v", got)
	}
	if got.MaxDeliveryAttempts != f.cfg.MaxDeliveryAttempts || got.DeliveryAttemptCount != 0 {
		t.Errorf("attempt budget %d/%d", got.DeliveryAttemptCount, got.MaxDeliveryAttempts)
	}
}

// Only channel-accepted attempts count; a proven pre-accept reject does
// not; the minimum interval holds the thread back; cooldown then yields a
// fresh generation that supersedes the old attempt; the budget closes the
// batch as max_attempts_exhausted.
func TestAttemptCountingAndRedelivery(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxWaitWindow, f.cfg.MaxDeliveryAttempts = 0, 2
	f.cfg.CooldownWindow, f.cfg.MinDeliveryInterval = 5*time.Second, 30*time.Second
	_, b := f.addJob("C", TargetCLI, 1)
	tok := tokenOf(f.batch(b))
	step := func(name string, fn func(o *Op) (Result, error), want Outcome) {
		t.Helper()
		var r Result
		f.run(func(o *Op) (err error) { r, err = fn(o); return err })
		if r.Outcome != want {
			t.Fatalf("%s: outcome %q, want %q", name, r.Outcome, want)
		}
	}
	step("begin", func(o *Op) (Result, error) { return BeginAccept(o, tok, ModeCLITurnStart, "rpc1", "m1", "ms1", 1) }, OutcomeOK)
	step("begin again", func(o *Op) (Result, error) { return BeginAccept(o, tok, ModeCLITurnStart, "rpc1", "m1", "ms1", 1) }, OutcomeTransientNotReady)
	step("reject", func(o *Op) (Result, error) { return RejectBeforeAccept(o, tok) }, OutcomeOK)
	if c := f.batch(b).DeliveryAttemptCount; c != 0 {
		t.Fatalf("benign reject counted: %d", c)
	}
	step("begin while eligible_after", func(o *Op) (Result, error) { return BeginAccept(o, tok, ModeCLITurnStart, "r", "m", "ms1", 1) }, OutcomeTransientNotReady)
	f.now = f.now.Add(31 * time.Second)
	step("begin 2", func(o *Op) (Result, error) { return BeginAccept(o, tok, ModeCLITurnStart, "rpc2", "m2", "ms1", 1) }, OutcomeOK)
	step("accepted", func(o *Op) (Result, error) {
		return NoteAccepted(o, tok, Accepted{Mode: ModeCLITurnStart, DeliveryTurnID: "turn1"})
	}, OutcomeOK)
	step("accepted again", func(o *Op) (Result, error) {
		return NoteAccepted(o, tok, Accepted{Mode: ModeCLITurnStart, DeliveryTurnID: "turn1"})
	}, OutcomeAlreadyArmed)
	got := f.batch(b)
	if got.DeliveryAttemptCount != 1 || got.State != BatchCooldown || *got.HeadAttempt.DeliveryObservationState != "tracking" {
		t.Fatalf("after accept: count %d state %s", got.DeliveryAttemptCount, got.State)
	}
	// A failed turn: abandoned + manual_resolution_only, never replayed.
	step("turn failed", func(o *Op) (Result, error) { return NoteTurnEvent(o, tok, "turn1", TurnFailed) }, OutcomeOK)
	got = f.batch(b)
	if got.ReplayPolicy != ReplayManualResolutionOnly || got.HeadAttempt.State != AttemptAbandoned {
		t.Fatalf("after turn_failed: %s %s", got.ReplayPolicy, got.HeadAttempt.State)
	}
	f.now = f.now.Add(time.Hour)
	f.run(func(o *Op) error {
		out, err := ReviveOrExhaust(o, b)
		if out == OutcomeOK {
			t.Error("a manual_resolution_only batch was revived")
		}
		return err
	})
	step("stale token", func(o *Op) (Result, error) { return BeginAccept(o, tok, ModeCLITurnStart, "r", "m", "ms1", 1) }, OutcomeManualResolutionOnly)

	// Desktop-style path on another thread: cooldown expiry -> new generation.
	_, b2 := f.addJob("D", TargetCLI, 1)
	tok2 := tokenOf(f.batch(b2))
	step("arm pending", func(o *Op) (Result, error) { return NoteArmPending(o, tok2, "req1") }, OutcomeOK)
	step("arm pending other req", func(o *Op) (Result, error) { return NoteArmPending(o, tok2, "req2") }, OutcomeLeaseHeld)
	var lease string
	f.run(func(o *Op) error { r, err := NoteArmPending(o, tok2, "req1"); lease = r.BridgeArmLeaseID; return err })
	if lease == "" {
		t.Fatal("idempotent arm-pending did not return the lease")
	}
	step("arm with wrong lease", func(o *Op) (Result, error) {
		return NoteAccepted(o, tok2, Accepted{Mode: ModeDesktopHeartbeat, BridgeRequestID: "req1", BridgeLeaseID: "x"})
	}, OutcomeLeaseHeld)
	step("arm", func(o *Op) (Result, error) {
		return NoteAccepted(o, tok2, Accepted{Mode: ModeDesktopHeartbeat, BridgeRequestID: "req1", BridgeLeaseID: lease})
	}, OutcomeOK)
	f.run(func(o *Op) error {
		out, err := ReviveOrExhaust(o, b2)
		if out != OutcomeTransientNotReady {
			t.Errorf("revive during cooldown: %q", out)
		}
		return err
	})
	f.now = f.now.Add(6 * time.Second)
	f.run(func(o *Op) error { _, err := ReviveOrExhaust(o, b2); return err })
	got = f.batch(b2)
	if got.Generation != 2 || got.State != BatchMaterialized || got.Attempts[0].State != AttemptSuperseded ||
		got.HeadAttempt.State != AttemptPrepared {
		t.Fatalf("after cooldown: gen %d state %s attempts %v", got.Generation, got.State, got.Attempts)
	}
	step("old generation is stale", func(o *Op) (Result, error) { return NoteArmPending(o, tok2, "req1") }, OutcomeStaleOrSuperseded)
	tok2 = tokenOf(got)
	f.now = f.now.Add(time.Minute)
	step("arm pending 2", func(o *Op) (Result, error) { return NoteArmPending(o, tok2, "req3") }, OutcomeOK)
	f.run(func(o *Op) error { r, err := NoteArmPending(o, tok2, "req3"); lease = r.BridgeArmLeaseID; return err })
	step("arm 2", func(o *Op) (Result, error) {
		return NoteAccepted(o, tok2, Accepted{Mode: ModeDesktopHeartbeat, BridgeRequestID: "req3", BridgeLeaseID: lease})
	}, OutcomeOK)
	f.now = f.now.Add(6 * time.Second)
	f.run(func(o *Op) error { _, err := ReviveOrExhaust(o, b2); return err })
	if got = f.batch(b2); got.State != BatchClosed || *got.CloseReason != "max_attempts_exhausted" ||
		got.DeliveryAttemptCount != 2 || got.HeadAttempt.State != AttemptClosed {
		t.Fatalf("budget: state %s reason %v count %d", got.State, got.CloseReason, got.DeliveryAttemptCount)
	}
}

func TestTurnCompletedDelivers(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxWaitWindow = 0
	_, b := f.addJob("X", TargetCLI, 1)
	_, next := f.addJob("X", TargetCLI, 1)
	tok := tokenOf(f.batch(b))
	f.run(func(o *Op) error {
		if _, err := BeginAccept(o, tok, ModeCLITurnStart, "r", "m", "ms", 1); err != nil {
			return err
		}
		_, err := NoteAccepted(o, tok, Accepted{Mode: ModeCLITurnStart, DeliveryTurnID: "T1"})
		return err
	})
	f.run(func(o *Op) error {
		r, err := NoteTurnEvent(o, tok, "other-turn", TurnCompleted)
		if r.Outcome != OutcomeStaleOrSuperseded {
			t.Errorf("event for another turn: %q", r.Outcome)
		}
		return err
	})
	f.run(func(o *Op) error { _, err := NoteTurnEvent(o, tok, "T1", TurnCompleted); return err })
	if got := f.batch(b); got.State != BatchClosed || *got.CloseReason != "delivered" {
		t.Fatalf("turn_completed: %s %v", got.State, got.CloseReason)
	}
	if h := f.head("X"); h.BatchID != next || h.State != BatchMaterialized {
		t.Errorf("next head %s %s", h.BatchID, h.State)
	}
}

func TestFairReadyRoundRobin(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxWaitWindow, f.cfg.MinDeliveryInterval = 0, 0
	for _, th := range []string{"A", "B", "C"} {
		f.addJob(th, TargetCLI, 1)
		f.addJob(th, TargetCLI, 1)
	}
	f.addJob("Z", TargetDesktop, 1) // unbound desktop thread: never ready
	order := func() []string {
		es, err := ReadyOrder(context.Background(), f.s, TargetCLI)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.SourceThreadID)
		}
		return out
	}
	if got := order(); !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("initial order %v", got)
	}
	if got := order(); !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("peek moved the cursor: %v", got)
	}
	deliver := func(th string) {
		tok := tokenOf(f.head(th))
		f.run(func(o *Op) error {
			if _, err := BeginAccept(o, tok, ModeCLITurnStart, "r", "m", "ms", 1); err != nil {
				return err
			}
			_, err := NoteAccepted(o, tok, Accepted{Mode: ModeCLITurnStart, DeliveryTurnID: "t"})
			return err
		})
		f.run(func(o *Op) error { _, err := NoteTurnEvent(o, tok, "t", TurnCompleted); return err })
	}
	deliver("A")
	if got := order(); !slices.Equal(got, []string{"B", "C", "A"}) {
		t.Fatalf("after A: %v", got)
	}
	deliver("B")
	if got := order(); !slices.Equal(got, []string{"C", "A", "B"}) {
		t.Fatalf("after B: %v", got)
	}
	deliver("C")
	deliver("A")
	if got := order(); !slices.Equal(got, []string{"B", "C"}) {
		t.Fatalf("after C and A (A drained): %v", got)
	}
	if es, _ := ReadyOrder(context.Background(), f.s, TargetDesktop); len(es) != 0 {
		t.Errorf("unbound desktop thread is ready: %v", es)
	}
}

// An accepted attempt proven not to have woken the caller is abandoned
// with automatic replay; the next attempt must be deliverable again.
func TestAbandonAfterAcceptRevives(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxWaitWindow, f.cfg.MinDeliveryInterval = 0, 0
	_, b := f.addJob("R", TargetCLI, 1)
	tok := tokenOf(f.batch(b))
	f.run(func(o *Op) error {
		if _, err := NoteArmPending(o, tok, "q"); err != nil {
			return err
		}
		var lease string
		o.Tx.QueryRow(`SELECT bridge_arm_lease_id FROM attempts WHERE attempt_id = ?`, tok.AttemptID).Scan(&lease)
		_, err := NoteAccepted(o, tok, Accepted{Mode: ModeDesktopHeartbeat, BridgeRequestID: "q", BridgeLeaseID: lease})
		return err
	})
	f.run(func(o *Op) error { _, err := Abandon(o, tok, false, "caller heartbeat proven paused"); return err })
	f.run(func(o *Op) error {
		out, err := ReviveOrExhaust(o, b)
		if out != OutcomeOK {
			t.Errorf("revive: %q", out)
		}
		return err
	})
	got := f.batch(b)
	if got.State != BatchMaterialized || got.Generation != 2 || got.HeadAttempt.State != AttemptPrepared {
		t.Fatalf("after revive: %s gen %d %s", got.State, got.Generation, got.HeadAttempt.State)
	}
	es, _ := ReadyOrder(context.Background(), f.s, TargetCLI)
	if len(es) != 1 || es[0].AttemptID != got.HeadAttempt.AttemptID {
		t.Errorf("revived batch not ready: %v", es)
	}
}

// An arm_pending attempt past its deadline is expired: before the sweep
// reclaims it, note-arm-pending and note-arm with its old lease are
// stale/no-op (seed: "如果 attempt 已过期…则必须 stale/no-op"), and
// nothing is counted.
func TestExpiredArmLeaseIsStale(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxWaitWindow, f.cfg.ArmPendingWindow = 0, 2*time.Second
	_, b := f.addJob("E", TargetCLI, 1)
	tok := tokenOf(f.batch(b))
	var lease string
	f.run(func(o *Op) error { r, err := NoteArmPending(o, tok, "req1"); lease = r.BridgeArmLeaseID; return err })
	if lease == "" {
		t.Fatal("no lease")
	}
	f.now = f.now.Add(3 * time.Second) // past the deadline; no sweep has run
	for name, fn := range map[string]func(o *Op) (Result, error){
		"note-arm-pending, same request":  func(o *Op) (Result, error) { return NoteArmPending(o, tok, "req1") },
		"note-arm-pending, other request": func(o *Op) (Result, error) { return NoteArmPending(o, tok, "req2") },
		"note-arm": func(o *Op) (Result, error) {
			return NoteAccepted(o, tok, Accepted{Mode: ModeDesktopHeartbeat, BridgeRequestID: "req1", BridgeLeaseID: lease})
		},
	} {
		var r Result
		f.run(func(o *Op) (err error) { r, err = fn(o); return err })
		if r.Outcome != OutcomeStaleOrSuperseded || r.BridgeArmLeaseID != "" {
			t.Errorf("%s on an expired lease: outcome %q lease %q, want %q and no lease", name, r.Outcome, r.BridgeArmLeaseID, OutcomeStaleOrSuperseded)
		}
	}
	if got := f.batch(b); got.DeliveryAttemptCount != 0 || got.HeadAttempt.State != AttemptArmPending {
		t.Errorf("after the refusals: count %d, attempt %s", got.DeliveryAttemptCount, got.HeadAttempt.State)
	}
}
