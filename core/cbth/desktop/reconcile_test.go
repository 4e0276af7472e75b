package desktop

import (
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/sweep"
)

// armPending leaves T's head arm_pending under request q.
func armPending(f *fixture) tok {
	f.t.Helper()
	k := f.tok("T")
	if r, err := f.sv.NoteArmPending(f.ctx, actor, k.arm("q")); err != nil || r.Outcome != delivery.OutcomeOK {
		f.t.Fatalf("arm-pending: %+v %v", r, err)
	}
	return k
}

func reconcileReq(k tok, hb HeartbeatState) ReconcileRequest {
	return ReconcileRequest{SourceThreadID: k.thread, AttemptID: k.attempt, Generation: k.gen, BridgeRequestID: "q", Heartbeat: hb}
}

// The seed's order after a lost note-arm answer.
func TestReconcileArmOrder(t *testing.T) {
	t.Run("arm succeeded, answer lost", func(t *testing.T) {
		f := world(t)
		k := f.armed("T", "q")
		var res *ReconcileResult
		var err error
		f.unchanged("reconcile", func() { res, err = f.sv.ReconcileArm(f.ctx, actor, reconcileReq(k, HeartbeatUnknown)) })
		if err != nil || res.Outcome != delivery.OutcomeOK || res.Resolution != ResolvedArmSucceeded {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("boundary already crossed", func(t *testing.T) {
		f := world(t)
		k := f.armed("T", "q")
		f.sv.NoteBoundaryCrossed(f.ctx, actor, k.boundary())
		var res *ReconcileResult
		var err error
		f.unchanged("reconcile", func() { res, err = f.sv.ReconcileArm(f.ctx, actor, reconcileReq(k, HeartbeatUnknown)) })
		if err != nil || res.Resolution != ResolvedBoundaryCrossed || *f.batch(k.batch).CloseReason != "handoff_recorded" {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("update accepted but note-arm never landed", func(t *testing.T) {
		f := world(t)
		k := armPending(f)
		res, err := f.sv.ReconcileArm(f.ctx, actor, reconcileReq(k, HeartbeatActive))
		if err != nil || res.Resolution != ResolvedArmSucceeded || f.head("T").HeadAttempt.State != delivery.AttemptCooldown ||
			*f.binding("T").ArmedGeneration != k.gen || f.head("T").DeliveryAttemptCount != 1 {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("heartbeat proven paused", func(t *testing.T) {
		f := world(t)
		k := armPending(f)
		res, err := f.sv.ReconcileArm(f.ctx, actor, reconcileReq(k, HeartbeatPaused))
		b := f.batch(k.batch)
		if err != nil || res.Resolution != ResolvedAbandonedReplay || b.ReplayPolicy != delivery.ReplayAutomatic ||
			b.Attempts[0].State != delivery.AttemptAbandoned || f.binding("T").BindingState != Bound {
			t.Fatalf("%+v %v batch %+v", res, err, b)
		}
	})
	t.Run("nothing provable", func(t *testing.T) {
		f := world(t)
		k := armPending(f)
		res, err := f.sv.ReconcileArm(f.ctx, actor, reconcileReq(k, HeartbeatUnknown))
		b, bind := f.batch(k.batch), f.binding("T")
		if err != nil || res.Resolution != ResolvedManualResolution || b.ReplayPolicy != delivery.ReplayManualResolutionOnly ||
			b.HeadAttempt.State != delivery.AttemptAbandoned || bind.BindingState != Degraded || bind.DegradedReason == nil {
			t.Fatalf("%+v %v batch %+v binding %+v", res, err, b, bind)
		}
	})
	for _, c := range []struct {
		name string
		prep func(f *fixture) ReconcileRequest
		want delivery.Outcome
	}{
		{"other request", func(f *fixture) ReconcileRequest {
			r := reconcileReq(armPending(f), HeartbeatPaused)
			r.BridgeRequestID = "q2"
			return r
		}, delivery.OutcomeLeaseHeld},
		{"never arm_pending", func(f *fixture) ReconcileRequest { return reconcileReq(f.tok("T"), HeartbeatPaused) }, delivery.OutcomeStaleOrSuperseded},
		{"unknown attempt", func(f *fixture) ReconcileRequest {
			r := reconcileReq(armPending(f), HeartbeatPaused)
			r.AttemptID = "att_x"
			return r
		}, delivery.OutcomeStaleOrSuperseded},
		{"already abandoned", func(f *fixture) ReconcileRequest {
			k := armPending(f)
			f.sv.ReconcileArm(f.ctx, actor, reconcileReq(k, HeartbeatPaused))
			return reconcileReq(k, HeartbeatUnknown)
		}, delivery.OutcomeStaleOrSuperseded},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := world(t)
			r := c.prep(f)
			var res *ReconcileResult
			var err error
			f.unchanged(c.name, func() { res, err = f.sv.ReconcileArm(f.ctx, actor, r) })
			if err != nil || res.Outcome != c.want || res.Resolution != "" {
				t.Fatalf("%+v %v, want %s", res, err, c.want)
			}
		})
	}
}

// The sweep's resolver: an arm_pending attempt past its deadline that
// nobody settled fails closed; an attempt that moved on is left alone.
func TestExpireArmPending(t *testing.T) {
	f := world(t)
	k := armPending(f)
	run := func() (changed bool) {
		err := f.sv.run(f.ctx, actor, func(o *delivery.Op) (err error) {
			changed, err = expireArmPending(o, delivery.Token{SourceThreadID: k.thread, BatchID: k.batch, AttemptID: k.attempt, Generation: k.gen})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}
	if !run() {
		t.Fatal("expiry changed nothing")
	}
	b, bind := f.batch(k.batch), f.binding("T")
	if b.ReplayPolicy != delivery.ReplayManualResolutionOnly || b.HeadAttempt.State != delivery.AttemptAbandoned ||
		bind.BindingState != Degraded || bind.DegradedReason == nil {
		t.Fatalf("after expiry: batch %+v binding %+v", b, bind)
	}
	f.unchanged("second expiry", func() {
		if run() {
			t.Error("second expiry changed something")
		}
	})
}

func TestReconcileDegrades(t *testing.T) {
	t.Run("fingerprint change stops automation", func(t *testing.T) {
		f := world(t)
		k := f.armed("T", "q")
		f.in.CodexBuild = "codex 2"
		rep, err := f.sv.Reconcile(f.ctx, actor)
		if err != nil || !rep.FingerprintMismatch || rep.Degraded["T"] == "" {
			t.Fatalf("%+v %v", rep, err)
		}
		b := f.batch(k.batch)
		if f.binding("T").BindingState != Degraded || b.HeadAttempt.State != delivery.AttemptAbandoned ||
			b.ReplayPolicy != delivery.ReplayAutomatic || b.State == delivery.BatchClosed {
			t.Fatalf("after fingerprint change: %+v", b)
		}
		// The operator re-validates; the binding repair moves the head to a
		// fresh generation and automation resumes.
		f.install()
		r := f.bind("T", "auto-1")
		if !r.FreshAttemptForced || r.FreshAttempt == nil || r.FreshAttempt.Generation <= k.gen || len(r.NotAutomaticBecause) > 0 {
			t.Fatalf("repair: %+v", r)
		}
	})
	t.Run("pause deadline passed", func(t *testing.T) {
		f := world(t)
		f.armed("T", "q")
		f.now = f.now.Add(f.cfg().Desktop.PauseNotBeforeDelay + f.cfg().Desktop.PauseDeadlineWindow)
		rep, err := f.sv.Reconcile(f.ctx, actor)
		bind := f.binding("T")
		if err != nil || rep.Degraded["T"] == "" || bind.BindingState != Degraded || bind.PauseDeadline != nil ||
			bind.ArmedGenerationQuiescedAt != nil {
			t.Fatalf("%+v %v %+v", rep, err, bind)
		}
		// Repair with the same automation: the armed generation is not
		// proven quiet, so a fresh generation and a fresh pause window.
		r := f.bind("T", "auto-1")
		bind = f.binding("T")
		if !r.FreshAttemptForced || r.PreviousAutomationQuiesced || bind.PauseDeadline == nil || bind.BindingState != Bound {
			t.Fatalf("repair: %+v %+v", r, bind)
		}
	})
	t.Run("requires artifact read goes manual", func(t *testing.T) {
		f := newFixture(t)
		f.cfg().MaxInlineArtifactBytes = 10
		f.install()
		f.job("T", "big", 100)
		f.bind("T", "auto-1")
		rep, err := f.sv.Reconcile(f.ctx, actor)
		if err != nil || rep.ManualArtifactRead != 1 || f.head("T").ReplayPolicy != delivery.ReplayManualResolutionOnly {
			t.Fatalf("%+v %v", rep, err)
		}
	})
	t.Run("nothing to do changes nothing", func(t *testing.T) {
		f := world(t)
		f.sv.Reconcile(f.ctx, actor)
		f.unchanged("quiet reconcile", func() {
			if _, err := f.sv.Reconcile(f.ctx, actor); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestInstallationRepair(t *testing.T) {
	f := newFixture(t)
	st, _ := f.sv.Installation(f.ctx)
	if st.ReadTransport != nil || st.ReadTransportGeneration != 0 || st.Validated {
		t.Fatalf("fresh installation %+v", st)
	}
	v := CapValidated
	r := f.repair(RepairRequest{ReadTransport: DirectFileRead, ReadTransportCapability: &v, WritebackCapability: &v})
	i := r.Installation
	if !r.Changed || i.ReadTransportGeneration != 1 || i.ArtifactReadCapability != CapUnknown || i.ValidatedAt == nil ||
		!i.Validated || *i.ValidationFingerprint != f.in.Fingerprint() {
		t.Fatalf("first repair %+v", r)
	}
	f.job("T", "a", 0)
	f.bind("T", "auto-1")
	// Identical repair: a no-op (no bump, validated_at kept).
	f.now = f.now.Add(time.Minute)
	f.unchanged("identical repair", func() {
		r = f.repair(RepairRequest{ReadTransport: DirectFileRead, ReadTransportCapability: &v, WritebackCapability: &v})
	})
	if r.Changed || r.Installation.ReadTransportGeneration != 1 || *r.Installation.ValidatedAt != *i.ValidatedAt {
		t.Fatalf("identical repair %+v", r)
	}
	// A transport change without capability flags: all unknown, no
	// validated_at, generation bumped, the binding degraded.
	r = f.repair(RepairRequest{ReadTransport: HelperCLIRead})
	i = r.Installation
	if !r.Changed || i.ReadTransportGeneration != 2 || i.ReadTransportCapability != CapUnknown || i.WritebackCapability != CapUnknown ||
		i.ValidatedAt != nil || i.Validated || len(r.DegradedBindings) != 1 || f.binding("T").BindingState != Degraded {
		t.Fatalf("transport change %+v", r)
	}
	// The same parameters but a new observed fingerprint is a real change.
	f.in.CbthBuild = "cbth 2"
	r = f.repair(RepairRequest{ReadTransport: HelperCLIRead})
	if !r.Changed || r.Installation.ReadTransportGeneration != 3 || !r.Installation.FingerprintMatches {
		t.Fatalf("fingerprint change %+v", r)
	}
	for _, bad := range []RepairRequest{{ReadTransport: "smoke_signals"}, {ReadTransport: DirectFileRead, WritebackCapability: ptr(Capability("maybe"))}} {
		f.unchanged("bad repair", func() {
			if _, err := f.sv.RepairInstallation(f.ctx, actor, bad); err == nil {
				t.Errorf("bad repair %+v accepted", bad)
			}
		})
	}
}

func TestBindingRepairAndUnbind(t *testing.T) {
	f := newFixture(t)
	f.job("T", "a", 0)
	var r *BindingRepairResult
	f.unchanged("bind before installation", func() { r = f.bind("T", "auto-1") })
	if r.Outcome != delivery.OutcomeBindingInvalid || r.Binding != nil {
		t.Fatalf("binding without an installation state: %+v", r)
	}
	f.install()
	r = f.bind("T", "auto-1")
	if r.Outcome != delivery.OutcomeOK || !r.Changed || r.Binding.BindingState != Bound || r.WritebackCapability != CapValidated ||
		len(r.NotAutomaticBecause) > 0 {
		t.Fatalf("bootstrap: %+v", r)
	}
	f.unchanged("identical repair", func() { r = f.bind("T", "auto-1") })
	if r.Changed || r.FreshAttemptForced {
		t.Fatalf("identical repair: %+v", r)
	}
	k := f.armed("T", "q")
	r = f.bind("T", "auto-2")
	if !r.AutomationReplaced || r.PreviousAutomationQuiesced || !r.FreshAttemptForced || r.FreshAttempt.Generation <= k.gen ||
		*r.PreviousCallerAutomationID != "auto-1" || r.Binding.ArmedGeneration != nil {
		t.Fatalf("replace automation: %+v", r)
	}
	if b := f.batch(k.batch); b.Attempts[0].State != delivery.AttemptSuperseded || b.HeadAttempt.State != delivery.AttemptPrepared {
		t.Fatalf("after replace: %+v", b)
	}
	if _, err := f.sv.Unbind(f.ctx, actor, UnbindRequest{SourceThreadID: "T"}); err == nil {
		t.Error("unbind without --delete-automation accepted")
	}
	u, err := f.sv.Unbind(f.ctx, actor, UnbindRequest{SourceThreadID: "T", DeleteAutomation: ptr(true)})
	if err != nil || u.Binding.BindingState != Unbound || u.Binding.CallerAutomationID != nil || !u.AutomationDeleted ||
		f.head("T").HeadAttempt.State != delivery.AttemptAbandoned {
		t.Fatalf("unbind: %+v %v", u, err)
	}
	f.unchanged("unbind unknown", func() {
		if _, err := f.sv.Unbind(f.ctx, actor, UnbindRequest{SourceThreadID: "nope", DeleteAutomation: ptr(false)}); err == nil {
			t.Error("unbind of an unknown thread succeeded")
		}
	})
	// Re-binding an unbound thread with an abandoned head gives it a fresh attempt.
	r = f.bind("T", "auto-3")
	if r.Binding.BindingState != Bound || !r.FreshAttemptForced || f.head("T").HeadAttempt.State != delivery.AttemptPrepared {
		t.Fatalf("rebind: %+v", r)
	}
}

// The daemon's overdue sweep resolves an expired arm_pending attempt
// through this package's resolver: a reasoned, audited degrade.
func TestSweepExpiresArmPending(t *testing.T) {
	f := world(t)
	k := armPending(f)
	sw := &sweep.Sweeper{Store: f.sv.Store, Cfg: f.sv.Cfg, Actor: actor}
	if r, err := sw.Run(f.ctx, false); err != nil || r.ArmPendingExpired != 0 {
		t.Fatalf("early sweep: %+v %v", r, err)
	}
	f.now = f.now.Add(f.cfg().ArmPendingWindow + time.Second)
	r, err := sw.Run(f.ctx, false)
	bind := f.binding("T")
	if err != nil || r.ArmPendingExpired != 1 || bind.BindingState != Degraded ||
		!strings.Contains(*bind.DegradedReason, "arm_pending_deadline") ||
		f.batch(k.batch).ReplayPolicy != delivery.ReplayManualResolutionOnly {
		t.Fatalf("sweep %+v %v binding %+v", r, err, bind)
	}
	var n int
	f.sv.Store.DB.QueryRow(`SELECT COUNT(*) FROM audit WHERE action = 'binding.transition' AND to_state = 'degraded'`).Scan(&n)
	if n != 1 {
		t.Errorf("%d degrade audit rows", n)
	}
}
