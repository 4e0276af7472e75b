package desktop

import (
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// world is the common start: a validated installation, thread T bound to
// automation auto-1, one ready Desktop job on T (head materialized, its
// first attempt prepared).
func world(t *testing.T) *fixture {
	f := newFixture(t)
	f.install()
	f.job("T", "build A", 0)
	f.bind("T", "auto-1")
	return f
}

type armCase struct {
	name  string
	setup func(f *fixture) ArmRequest
	want  delivery.Outcome
}

// staleArmCases are requests whose token no longer names the head.
func staleArmCases() []armCase {
	return []armCase{
		{"wrong generation", func(f *fixture) ArmRequest { r := f.tok("T").arm("q"); r.Generation++; return r }, delivery.OutcomeStaleOrSuperseded},
		{"unknown attempt", func(f *fixture) ArmRequest { r := f.tok("T").arm("q"); r.AttemptID = "att_nope"; return r }, delivery.OutcomeStaleOrSuperseded},
		{"other thread", func(f *fixture) ArmRequest { r := f.tok("T").arm("q"); r.SourceThreadID = "U"; return r }, delivery.OutcomeStaleOrSuperseded},
		{"superseded attempt", func(f *fixture) ArmRequest {
			old := f.tok("T")
			f.bind("T", "auto-2") // replaced automation: fresh generation
			return old.arm("q")
		}, delivery.OutcomeStaleOrSuperseded},
		{"batch closed by the operator", func(f *fixture) ArmRequest {
			k := f.tok("T")
			f.closeHead("T")
			return k.arm("q")
		}, delivery.OutcomeStaleOrSuperseded},
	}
}

// gateCases break one automatic-continuation condition each.
func gateCases(prep func(f *fixture, r ArmRequest) ArmRequest) []armCase {
	c := func(name string, breakIt func(f *fixture)) armCase {
		return armCase{name, func(f *fixture) ArmRequest {
			r := prep(f, f.tok("T").arm("q"))
			breakIt(f)
			return r
		}, delivery.OutcomeBindingInvalid}
	}
	return []armCase{
		c("fingerprint changed", func(f *fixture) { f.in.CodexBuild = "codex 2" }),
		c("writeback not validated", func(f *fixture) {
			v, u := CapValidated, CapUnknown
			f.repair(RepairRequest{ReadTransport: DirectFileRead, ReadTransportCapability: &v, WritebackCapability: &u})
			f.rebindMirror("T")
		}),
		c("read transport not validated", func(f *fixture) {
			v := CapValidated
			f.repair(RepairRequest{ReadTransport: DirectFileRead, WritebackCapability: &v})
			f.rebindMirror("T")
		}),
		c("mirror generation stale", func(f *fixture) {
			f.exec(`UPDATE desktop_bindings SET read_transport_generation = read_transport_generation - 1`)
		}),
		c("binding degraded", func(f *fixture) {
			f.exec(`UPDATE desktop_bindings SET binding_state = 'degraded', degraded_reason = 'test'`)
		}),
		c("binding unbound", func(f *fixture) { f.exec(`UPDATE desktop_bindings SET binding_state = 'unbound'`) }),
		c("no binding", func(f *fixture) { f.exec(`DELETE FROM desktop_bindings`) }),
	}
}

func (f *fixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.sv.Store.DB.Exec(q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

func (f *fixture) repair(r RepairRequest) *RepairResult {
	f.t.Helper()
	res, err := f.sv.RepairInstallation(f.ctx, actor, r)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// rebindMirror copies the installation state onto the binding without the
// side effects of a repair (to isolate one gate condition).
func (f *fixture) rebindMirror(thread string) {
	f.exec(`UPDATE desktop_bindings SET binding_state = 'bound', read_transport_generation = (SELECT
		read_transport_generation FROM desktop_installation_state), validation_fingerprint = (SELECT
		validation_fingerprint FROM desktop_installation_state) WHERE source_thread_id = ?`, thread)
}

func (f *fixture) closeHead(thread string) {
	f.t.Helper()
	err := f.sv.run(f.ctx, actor, func(o *delivery.Op) error {
		_, _, err := delivery.CloseHead(o, thread, delivery.CloseOperatorClosedUnconfirmed)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func runArmCases(t *testing.T, cases []armCase, call func(f *fixture, r ArmRequest) (*ArmResult, error)) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := world(t)
			r := c.setup(f)
			var res *ArmResult
			var err error
			f.unchanged(c.name, func() { res, err = call(f, r) })
			if err != nil || res.Outcome != c.want {
				t.Fatalf("outcome %+v %v, want %s", res, err, c.want)
			}
			if res.BridgeArmLeaseID != "" {
				t.Errorf("a %s answer carries a lease", res.Outcome)
			}
		})
	}
}

func TestNoteArmPending(t *testing.T) {
	t.Run("fresh, retry, other request", func(t *testing.T) {
		f := world(t)
		k := f.tok("T")
		r, err := f.sv.NoteArmPending(f.ctx, actor, k.arm("q1"))
		if err != nil || r.Outcome != delivery.OutcomeOK || r.BridgeArmLeaseID == "" || r.BridgeArmLeaseDead == "" ||
			r.AttemptState != delivery.AttemptArmPending || r.CallerAutomationID == nil || *r.CallerAutomationID != "auto-1" {
			t.Fatalf("fresh: %+v %v", r, err)
		}
		a := f.head("T").HeadAttempt
		if a.State != delivery.AttemptArmPending || a.ArmPendingSince == nil || a.ArmPendingDeadline == nil ||
			a.BindingID == nil || *a.BindingID != f.binding("T").BindingID {
			t.Fatalf("attempt after arm-pending: %+v", a)
		}
		var again *ArmResult
		f.unchanged("retry", func() { again, err = f.sv.NoteArmPending(f.ctx, actor, k.arm("q1")) })
		if err != nil || again.Outcome != delivery.OutcomeAlreadyPending || again.BridgeArmLeaseID != r.BridgeArmLeaseID {
			t.Fatalf("retry: %+v %v", again, err)
		}
		var other *ArmResult
		f.unchanged("other request", func() { other, err = f.sv.NoteArmPending(f.ctx, actor, k.arm("q2")) })
		if err != nil || other.Outcome != delivery.OutcomeLeaseHeld || other.BridgeArmLeaseID != "" || other.BridgeArmLeaseDead != "" {
			t.Fatalf("other request learned something: %+v %v", other, err)
		}
	})
	call := func(f *fixture, r ArmRequest) (*ArmResult, error) { return f.sv.NoteArmPending(f.ctx, actor, r) }
	runArmCases(t, staleArmCases(), call)
	runArmCases(t, gateCases(func(f *fixture, r ArmRequest) ArmRequest { return r }), call)
	runArmCases(t, []armCase{
		{"manual batch", func(f *fixture) ArmRequest {
			f.exec(`UPDATE batches SET replay_policy = 'manual_resolution_only'`)
			return f.tok("T").arm("q")
		}, delivery.OutcomeManualResolutionOnly},
		{"requires artifact read", func(f *fixture) ArmRequest {
			f.exec(`UPDATE batches SET requires_artifact_read = 1`)
			return f.tok("T").arm("q")
		}, delivery.OutcomeManualResolutionOnly},
		{"previous generation not quiesced", func(f *fixture) ArmRequest {
			f.exec(`UPDATE desktop_bindings SET armed_generation = 99`)
			return f.tok("T").arm("q")
		}, delivery.OutcomeTransientNotReady},
		{"already armed", func(f *fixture) ArmRequest { return f.armed("T", "q").arm("q") }, delivery.OutcomeStaleOrSuperseded},
		{"abandoned attempt", func(f *fixture) ArmRequest {
			k := f.tok("T")
			f.exec(`UPDATE attempts SET state = 'abandoned'`)
			return k.arm("q")
		}, delivery.OutcomeStaleOrSuperseded},
		{"cli batch", func(f *fixture) ArmRequest {
			f.exec(`UPDATE batches SET target_kind = 'cli'`)
			return f.tok("T").arm("q")
		}, delivery.OutcomeBindingInvalid},
	}, call)
}

func TestNoteArm(t *testing.T) {
	t.Run("fresh and retry", func(t *testing.T) {
		f := world(t)
		f.cfg().Desktop.PauseNotBeforeDelay, f.cfg().Desktop.PauseDeadlineWindow = 90*time.Second, 100*time.Second
		k := f.tok("T")
		p, _ := f.sv.NoteArmPending(f.ctx, actor, k.arm("q1"))
		r := k.arm("q1")
		r.BridgeArmLeaseID, r.AutomationID = p.BridgeArmLeaseID, "auto-1"
		res, err := f.sv.NoteArm(f.ctx, actor, r)
		if err != nil || res.Outcome != delivery.OutcomeOK || res.AttemptState != delivery.AttemptCooldown {
			t.Fatalf("note-arm: %+v %v", res, err)
		}
		b, bind := f.head("T"), f.binding("T")
		if b.DeliveryAttemptCount != 1 || b.State != delivery.BatchCooldown || b.DeliveryMode == nil ||
			*b.DeliveryMode != "desktop_heartbeat" || b.HeadAttempt.AutomationBindingState != "reconciled" {
			t.Fatalf("batch after note-arm: %+v", b)
		}
		last, _ := time.Parse(time.RFC3339Nano, *b.LastDeliveryAttemptAt)
		pnb, _ := time.Parse(time.RFC3339Nano, *bind.PauseNotBefore)
		pdl, _ := time.Parse(time.RFC3339Nano, *bind.PauseDeadline)
		if bind.ArmedGeneration == nil || *bind.ArmedGeneration != k.gen || bind.ArmedGenerationQuiescedAt != nil ||
			pnb.Sub(last) < 90*time.Second || pdl.Sub(pnb) < 100*time.Second {
			t.Fatalf("binding after note-arm: %+v (last attempt %v)", bind, last)
		}
		var again *ArmResult
		f.unchanged("retry", func() { again, err = f.sv.NoteArm(f.ctx, actor, r) })
		if err != nil || again.Outcome != delivery.OutcomeAlreadyArmed || f.head("T").DeliveryAttemptCount != 1 {
			t.Fatalf("retry: %+v %v", again, err)
		}
	})
	// Every other case starts from arm_pending under request q.
	pending := func(f *fixture, r ArmRequest) ArmRequest {
		p, err := f.sv.NoteArmPending(f.ctx, actor, f.tok("T").arm("q"))
		if err != nil || p.Outcome != delivery.OutcomeOK {
			f.t.Fatalf("arm-pending: %+v %v", p, err)
		}
		r.BridgeArmLeaseID = p.BridgeArmLeaseID
		return r
	}
	call := func(f *fixture, r ArmRequest) (*ArmResult, error) {
		if r.BridgeArmLeaseID == "" {
			r.BridgeArmLeaseID = "lease_none"
		}
		return f.sv.NoteArm(f.ctx, actor, r)
	}
	var stale []armCase
	for _, c := range staleArmCases() {
		setup := c.setup
		stale = append(stale, armCase{c.name, func(f *fixture) ArmRequest {
			pending(f, f.tok("T").arm("q"))
			return setup(f)
		}, c.want})
	}
	runArmCases(t, stale, call)
	runArmCases(t, gateCases(pending), call)
	runArmCases(t, []armCase{
		{"not arm_pending yet", func(f *fixture) ArmRequest { return f.tok("T").arm("q") }, delivery.OutcomeStaleOrSuperseded},
		{"wrong lease", func(f *fixture) ArmRequest {
			r := pending(f, f.tok("T").arm("q"))
			r.BridgeArmLeaseID = "lease_forged"
			return r
		}, delivery.OutcomeLeaseHeld},
		{"other request with the lease", func(f *fixture) ArmRequest {
			r := pending(f, f.tok("T").arm("q"))
			r.BridgeRequestID = "q-other"
			return r
		}, delivery.OutcomeLeaseHeld},
	}, call)
}

func TestNoteQuiesced(t *testing.T) {
	f := world(t)
	f.cfg().Desktop.PauseNotBeforeDelay = 90 * time.Second
	k := f.armed("T", "q")
	req := QuiesceRequest{SourceThreadID: "T", Generation: k.gen, BridgeRequestID: "q"}
	for _, c := range []struct {
		name string
		r    QuiesceRequest
		want delivery.Outcome
	}{
		{"before pause_not_before", req, delivery.OutcomeTransientNotReady},
		{"older generation", QuiesceRequest{SourceThreadID: "T", Generation: k.gen - 1 + 0*k.gen, BridgeRequestID: "q"}, delivery.OutcomeStaleOrSuperseded},
		{"newer generation", QuiesceRequest{SourceThreadID: "T", Generation: k.gen + 1, BridgeRequestID: "q"}, delivery.OutcomeStaleOrSuperseded},
		{"no binding", QuiesceRequest{SourceThreadID: "U", Generation: k.gen, BridgeRequestID: "q"}, delivery.OutcomeStaleOrSuperseded},
	} {
		if c.r.Generation < 1 {
			continue
		}
		var res *QuiesceResult
		var err error
		f.unchanged(c.name, func() { res, err = f.sv.NoteQuiesced(f.ctx, actor, c.r) })
		if err != nil || res.Outcome != c.want || res.Changed {
			t.Errorf("%s: %+v %v, want %s", c.name, res, err, c.want)
		}
	}
	f.now = f.now.Add(91 * time.Second)
	res, err := f.sv.NoteQuiesced(f.ctx, actor, req)
	if err != nil || res.Outcome != delivery.OutcomeOK || !res.Changed || res.Binding.ArmedGenerationQuiescedAt == nil ||
		res.Binding.PauseDeadline != nil {
		t.Fatalf("quiesce: %+v %v", res, err)
	}
	f.unchanged("repeat", func() { res, err = f.sv.NoteQuiesced(f.ctx, actor, req) })
	if err != nil || res.Outcome != delivery.OutcomeOK || res.Changed {
		t.Fatalf("repeat quiesce: %+v %v", res, err)
	}
}

// A handed-off generation may be quiesced before pause_not_before: the
// wake demonstrably happened.
func TestNoteQuiescedAfterHandoff(t *testing.T) {
	f := world(t)
	f.cfg().Desktop.PauseNotBeforeDelay = time.Hour
	k := f.armed("T", "q")
	if r, err := f.sv.NoteBoundaryCrossed(f.ctx, actor, k.boundary()); err != nil || r.Outcome != delivery.OutcomeOK {
		t.Fatalf("boundary: %+v %v", r, err)
	}
	res, err := f.sv.NoteQuiesced(f.ctx, actor, QuiesceRequest{SourceThreadID: "T", Generation: k.gen, BridgeRequestID: "q"})
	if err != nil || res.Outcome != delivery.OutcomeOK || !res.Changed {
		t.Fatalf("quiesce after handoff: %+v %v", res, err)
	}
}
