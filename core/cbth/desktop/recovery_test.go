package desktop

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

func decodeB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recoveryWorld hands off a batch whose job has a 300-byte artifact and
// returns the batch id, the artifact id and a recovery lease.
func recoveryWorld(t *testing.T) (f *fixture, batch, art, lease string) {
	f = newFixture(t)
	f.install()
	f.job("T", "build A", 300)
	f.bind("T", "auto-1")
	k := f.armed("T", "q")
	if r, err := f.sv.NoteBoundaryCrossed(f.ctx, actor, k.boundary()); err != nil || r.Outcome != delivery.OutcomeOK {
		t.Fatalf("boundary: %+v %v", r, err)
	}
	b := f.batch(k.batch)
	if err := f.sv.inspectRecovery(f.ctx, actor, b); err != nil || b.ArtifactRecoveryLeaseID == nil {
		t.Fatalf("inspect: %+v %v", b, err)
	}
	return f, k.batch, b.ArtifactIDs[0], *b.ArtifactRecoveryLeaseID
}

func TestReadArtifact(t *testing.T) {
	f, batch, art, lease := recoveryWorld(t)
	r, err := f.sv.ReadArtifact(f.ctx, ReadRequest{ArtifactID: art, ArtifactReadLeaseID: lease, Offset: 290, MaxBytes: 100})
	if err != nil || r.Outcome != delivery.OutcomeOK || r.Bytes != 10 || !r.EOF || r.SizeBytes != 300 || r.SHA256 == "" ||
		string(decodeB64(t, r.DataBase64)) != strings.Repeat("r", 10) {
		t.Fatalf("tail chunk: %+v %v", r, err)
	}
	// Another thread's artifact is outside the lease's batch.
	f.job("U", "other", 20)
	other := f.head("U").ArtifactIDs[0]
	cases := []struct {
		name string
		prep func() ReadRequest
	}{
		{"unknown lease", func() ReadRequest { return ReadRequest{ArtifactID: art, ArtifactReadLeaseID: "arl_x", MaxBytes: 1} }},
		{"artifact outside the lease", func() ReadRequest {
			return ReadRequest{ArtifactID: other, ArtifactReadLeaseID: lease, MaxBytes: 1}
		}},
		{"expired lease", func() ReadRequest {
			f.now = f.now.Add(f.cfg().Desktop.ArtifactRecoveryLeaseTTL + time.Second)
			return ReadRequest{ArtifactID: art, ArtifactReadLeaseID: lease, MaxBytes: 1}
		}},
	}
	for _, c := range cases {
		req := c.prep()
		var res *ReadResult
		f.unchanged(c.name, func() { res, err = f.sv.ReadArtifact(f.ctx, req) })
		if err != nil || res.Outcome != delivery.OutcomeStaleOrSuperseded || res.DataBase64 != "" {
			t.Errorf("%s: %+v %v", c.name, res, err)
		}
	}
	// A new inspect rotates in a fresh lease; the old one stays dead.
	b := f.batch(batch)
	f.sv.inspectRecovery(f.ctx, actor, b)
	if *b.ArtifactRecoveryLeaseID == lease {
		t.Fatal("expired lease returned again")
	}
	if r, _ := f.sv.ReadArtifact(f.ctx, ReadRequest{ArtifactID: art, ArtifactReadLeaseID: *b.ArtifactRecoveryLeaseID, MaxBytes: 5}); r.Outcome != delivery.OutcomeOK {
		t.Fatalf("fresh lease: %+v", r)
	}
	// Revoke: the lease stops working at once; a second revoke is stale.
	if out, err := f.sv.RevokeLease(f.ctx, actor, RevokeRequest{ArtifactReadLeaseID: *b.ArtifactRecoveryLeaseID}); err != nil ||
		out["outcome"] != delivery.OutcomeOK {
		t.Fatalf("revoke: %v %v", out, err)
	}
	var out map[string]any
	f.unchanged("second revoke", func() {
		out, _ = f.sv.RevokeLease(f.ctx, actor, RevokeRequest{ArtifactReadLeaseID: *b.ArtifactRecoveryLeaseID})
	})
	if out["outcome"] != delivery.OutcomeStaleOrSuperseded {
		t.Errorf("second revoke: %v", out)
	}
	if r, _ := f.sv.ReadArtifact(f.ctx, ReadRequest{ArtifactID: art, ArtifactReadLeaseID: *b.ArtifactRecoveryLeaseID, MaxBytes: 5}); r.Outcome != delivery.OutcomeStaleOrSuperseded {
		t.Fatalf("revoked lease read: %+v", r)
	}
	for _, bad := range []ReadRequest{{ArtifactID: art, ArtifactReadLeaseID: lease, Offset: -1, MaxBytes: 1},
		{ArtifactID: art, ArtifactReadLeaseID: lease, MaxBytes: 0}, {ArtifactID: art, ArtifactReadLeaseID: lease, MaxBytes: MaxReadChunk + 1}} {
		if _, err := f.sv.ReadArtifact(f.ctx, bad); err == nil {
			t.Errorf("bad read %+v accepted", bad)
		}
	}
}

// The envelope outlives the batch by post_close_ttl and goes only when
// its retention has passed; its leases die with it.
func TestEnvelopeRetention(t *testing.T) {
	f, batch, _, lease := recoveryWorld(t)
	until := *f.batch(batch).BoundaryRecoveryRetentionUntil
	f.now = f.now.Add(f.cfg().PostCloseTTL - time.Minute)
	rep, err := f.sv.Reconcile(f.ctx, actor)
	if err != nil || rep.EnvelopesCollected != 0 {
		t.Fatalf("early reconcile: %+v %v", rep, err)
	}
	f.now, _ = time.Parse(time.RFC3339Nano, until)
	f.now = f.now.Add(time.Second)
	if rep, err = f.sv.Reconcile(f.ctx, actor); err != nil || rep.EnvelopesCollected != 1 {
		t.Fatalf("late reconcile: %+v %v", rep, err)
	}
	var body *string
	var revoked *string
	f.sv.Store.DB.QueryRow(`SELECT envelope_json FROM boundary_recovery_envelopes WHERE batch_id = ?`, batch).Scan(&body)
	f.sv.Store.DB.QueryRow(`SELECT revoke_reason FROM artifact_read_leases WHERE lease_id = ?`, lease).Scan(&revoked)
	if body != nil {
		t.Error("envelope kept after its retention")
	}
	_ = revoked // the lease expired long before; deleting old rows is fine too
}

// An operator pin on one of the envelope's artifacts, set after the
// handoff, keeps the envelope as long.
func TestEnvelopeRetentionFollowsArtifactPin(t *testing.T) {
	f, batch, art, _ := recoveryWorld(t)
	pin := f.now.Add(30 * 24 * time.Hour)
	if err := f.sv.run(f.ctx, actor, func(o *delivery.Op) error {
		return artifacts.Pin(o.Ctx, o.Tx, art, pin, o.Cfg)
	}); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(10 * 24 * time.Hour)
	if rep, err := f.sv.Reconcile(f.ctx, actor); err != nil || rep.EnvelopesCollected != 0 {
		t.Fatalf("envelope collected under a pinned artifact: %+v %v", rep, err)
	}
	b := f.batch(batch)
	if got, _ := time.Parse(time.RFC3339Nano, *b.BoundaryRecoveryRetentionUntil); got.Before(pin) {
		t.Fatalf("retention %v, pin %v", got, pin)
	}
	f.now = pin.Add(time.Second)
	if rep, err := f.sv.Reconcile(f.ctx, actor); err != nil || rep.EnvelopesCollected != 1 {
		t.Fatalf("envelope kept past the pin: %+v %v", rep, err)
	}
}
