package desktop

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

func TestNoteBoundaryCrossedFreshSuccess(t *testing.T) {
	f := newFixture(t)
	f.install()
	job := f.job("T", "build A", 100)
	next := f.job("T", "build B", 0) // queued behind: the FIFO must move on
	f.bind("T", "auto-1")
	k := f.armed("T", "q")
	res, err := f.sv.NoteBoundaryCrossed(f.ctx, actor, k.boundary())
	if err != nil || res.Outcome != delivery.OutcomeOK || res.Continuation == nil {
		t.Fatalf("boundary: %+v %v", res, err)
	}
	if res.SourceThreadID != "T" || res.BatchID != k.batch || res.AttemptID != k.attempt || res.Generation != k.gen ||
		res.SnapshotRevision != k.rev {
		t.Errorf("token echo %+v, want %+v", res, k)
	}
	c := res.Continuation
	if len(c.Jobs) != 1 || c.Jobs[0].JobID != job || c.Jobs[0].Artifact == nil || c.Jobs[0].Artifact.Text == nil ||
		*c.Jobs[0].Artifact.Text != strings.Repeat("r", 100) || !strings.Contains(c.Summary, "build A") {
		t.Fatalf("continuation %+v", c)
	}
	b := f.batch(k.batch)
	if b.State != delivery.BatchClosed || *b.CloseReason != "handoff_recorded" || b.ReplayPolicy != delivery.ReplayManualResolutionOnly ||
		b.ContinuationBoundaryState != "crossed_unacknowledged" || b.BoundaryAttemptID == nil || *b.BoundaryAttemptID != k.attempt ||
		*b.BoundaryGeneration != k.gen || *b.BoundarySnapshotRevision != k.rev || b.BoundaryRecoveryEnvelopeRef == nil ||
		b.BoundaryRecoveryRetentionUntil == nil || b.HeadAttempt.State != delivery.AttemptClosed {
		t.Fatalf("batch after boundary: %+v", b)
	}
	// The envelope holds the payload inline and its retention covers
	// closed_at + post_close_ttl and the artifact's retention.
	var env envelope
	var body string
	if err := f.sv.Store.DB.QueryRow(`SELECT envelope_json FROM boundary_recovery_envelopes WHERE batch_id = ?`, k.batch).Scan(&body); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(body), &env)
	closed, _ := time.Parse(time.RFC3339Nano, *b.ClosedAt)
	until, _ := time.Parse(time.RFC3339Nano, env.RetentionUntil)
	if env.CloseReason != "handoff_recorded" || env.InlinePayload == nil || len(env.ArtifactIDs) != 1 ||
		len(env.ArtifactManifestRefs) != 1 || until.Sub(closed) < f.cfg().PostCloseTTL || env.RetentionUntil != *b.BoundaryRecoveryRetentionUntil {
		t.Fatalf("envelope %+v", env)
	}
	if h := f.head("T"); h == nil || h.JobIDs[0] != next || h.State != delivery.BatchMaterialized {
		t.Fatalf("FIFO did not move on: %+v", h)
	}
	// A repeat is already_crossed_or_handoff_recorded and changes nothing.
	var again *BoundaryResult
	f.unchanged("repeat", func() { again, err = f.sv.NoteBoundaryCrossed(f.ctx, actor, k.boundary()) })
	if err != nil || again.Outcome != delivery.OutcomeAlreadyCrossed || again.Continuation != nil {
		t.Fatalf("repeat: %+v %v", again, err)
	}
}

func TestNoteBoundaryCrossedRefusals(t *testing.T) {
	type bcase struct {
		name  string
		setup func(f *fixture) BoundaryRequest
		want  delivery.Outcome
	}
	armedReq := func(f *fixture) BoundaryRequest { return f.armed("T", "q").boundary() }
	cases := []bcase{
		{"prepared attempt", func(f *fixture) BoundaryRequest { return f.tok("T").boundary() }, delivery.OutcomeTransientNotReady},
		{"arm_pending attempt", func(f *fixture) BoundaryRequest {
			k := f.tok("T")
			f.sv.NoteArmPending(f.ctx, actor, k.arm("q"))
			return k.boundary()
		}, delivery.OutcomeTransientNotReady},
		{"abandoned attempt", func(f *fixture) BoundaryRequest {
			k := f.tok("T")
			f.exec(`UPDATE attempts SET state = 'abandoned'`)
			return k.boundary()
		}, delivery.OutcomeStaleOrSuperseded},
		{"prepared attempt, binding degraded", func(f *fixture) BoundaryRequest {
			k := f.tok("T")
			f.exec(`UPDATE desktop_bindings SET binding_state = 'degraded'`)
			return k.boundary()
		}, delivery.OutcomeBindingInvalid},
		{"wrong snapshot revision", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			r.ExpectedSnapshotRevision = "rev_other"
			return r
		}, delivery.OutcomeStaleOrSuperseded},
		{"wrong generation", func(f *fixture) BoundaryRequest { r := armedReq(f); r.Generation++; return r }, delivery.OutcomeStaleOrSuperseded},
		{"wrong attempt", func(f *fixture) BoundaryRequest { r := armedReq(f); r.AttemptID = "att_x"; return r }, delivery.OutcomeStaleOrSuperseded},
		{"wrong batch", func(f *fixture) BoundaryRequest { r := armedReq(f); r.BatchID = "bat_x"; return r }, delivery.OutcomeStaleOrSuperseded},
		{"other thread", func(f *fixture) BoundaryRequest { r := armedReq(f); r.SourceThreadID = "U"; return r }, delivery.OutcomeStaleOrSuperseded},
		{"superseded by a fresh generation", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.bind("T", "auto-2")
			return r
		}, delivery.OutcomeStaleOrSuperseded},
		{"operator closed the batch", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.closeHead("T")
			return r
		}, delivery.OutcomeStaleOrSuperseded},
		{"manual batch", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE batches SET replay_policy = 'manual_resolution_only'`)
			return r
		}, delivery.OutcomeStaleOrSuperseded},
		{"armed_generation moved", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE desktop_bindings SET armed_generation = armed_generation + 1`)
			return r
		}, delivery.OutcomeBindingInvalid},
		{"fingerprint changed", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.in.PermissionShape = "uid=2"
			return r
		}, delivery.OutcomeBindingInvalid},
		{"binding degraded", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE desktop_bindings SET binding_state = 'degraded'`)
			return r
		}, delivery.OutcomeBindingInvalid},
		{"mirror generation stale", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE desktop_installation_state SET read_transport_generation = read_transport_generation + 1`)
			return r
		}, delivery.OutcomeBindingInvalid},
		{"writeback unavailable", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE desktop_installation_state SET writeback_capability = 'unavailable'`)
			return r
		}, delivery.OutcomeBindingInvalid},
		{"read transport unknown", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE desktop_installation_state SET read_transport_capability = 'unknown'`)
			return r
		}, delivery.OutcomeBindingInvalid},
		{"requires artifact read", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE batches SET requires_artifact_read = 1`)
			return r
		}, delivery.OutcomeBindingInvalid},
		{"arrived after not_after", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			r.NotAfter = f.now.Add(-time.Millisecond).Format(time.RFC3339Nano)
			return r
		}, delivery.OutcomeTransientNotReady},
		{"crossed but not closed", func(f *fixture) BoundaryRequest {
			r := armedReq(f)
			f.exec(`UPDATE batches SET continuation_boundary_state = 'crossed_unacknowledged'`)
			return r
		}, delivery.OutcomeAlreadyCrossed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := world(t)
			r := c.setup(f)
			var res *BoundaryResult
			var err error
			f.unchanged(c.name, func() { res, err = f.sv.NoteBoundaryCrossed(f.ctx, actor, r) })
			if err != nil || res.Outcome != c.want || res.Continuation != nil {
				t.Fatalf("outcome %+v %v, want %s", res, err, c.want)
			}
		})
	}
}

// A payload larger than max_boundary_recovery_inline_bytes becomes a
// recovery artifact; the envelope keeps only its reference, batch inspect
// issues a recovery lease and read-artifact serves it in chunks.
func TestLargeHandoffRecoveryArtifact(t *testing.T) {
	f := world(t)
	f.cfg().Desktop.MaxBoundaryRecoveryInlineBytes = 64
	k := f.armed("T", "q")
	res, err := f.sv.NoteBoundaryCrossed(f.ctx, actor, k.boundary())
	if err != nil || res.Outcome != delivery.OutcomeOK {
		t.Fatalf("boundary: %+v %v", res, err)
	}
	b := f.batch(k.batch)
	if err := f.sv.inspectRecovery(f.ctx, actor, b); err != nil {
		t.Fatal(err)
	}
	var env envelope
	if err := json.Unmarshal(b.BoundaryRecoveryEnvelope, &env); err != nil || env.InlinePayload != nil || env.InlinePayloadRef == nil {
		t.Fatalf("envelope %s: %v", b.BoundaryRecoveryEnvelope, err)
	}
	if b.ArtifactRecoveryLeaseID == nil || b.ArtifactRecoveryLeaseDeadline == nil {
		t.Fatalf("no recovery lease: %+v", b)
	}
	art := strings.TrimPrefix(*env.InlinePayloadRef, "artifact:")
	var got []byte
	for off := int64(0); ; {
		r, err := f.sv.ReadArtifact(f.ctx, ReadRequest{ArtifactID: art, ArtifactReadLeaseID: *b.ArtifactRecoveryLeaseID,
			Offset: off, MaxBytes: 50})
		if err != nil || r.Outcome != delivery.OutcomeOK {
			t.Fatalf("read at %d: %+v %v", off, r, err)
		}
		got = append(got, decodeB64(t, r.DataBase64)...)
		off += int64(r.Bytes)
		if r.EOF {
			break
		}
	}
	var cont Continuation
	if err := json.Unmarshal(got, &cont); err != nil || cont.BatchID != k.batch || len(cont.Jobs) != 1 {
		t.Fatalf("recovered payload %q: %v", got, err)
	}
	// A second inspect returns the same live lease.
	b2 := f.batch(k.batch)
	f.sv.inspectRecovery(f.ctx, actor, b2)
	if *b2.ArtifactRecoveryLeaseID != *b.ArtifactRecoveryLeaseID {
		t.Errorf("lease rotated while young: %s -> %s", *b.ArtifactRecoveryLeaseID, *b2.ArtifactRecoveryLeaseID)
	}
}
