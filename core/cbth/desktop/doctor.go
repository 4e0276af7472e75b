package desktop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// doctorChecks reports the installation state, the bindings (each
// degraded one with why) and the freshness of the published snapshot.
func doctorChecks(ctx context.Context, s *store.Store, h home.Home, cfg config.Config) []daemon.Check {
	st, err := LoadInstallation(ctx, s.DB)
	if err != nil {
		return []daemon.Check{{Name: "desktop installation", Detail: err.Error()}}
	}
	in := ObserveFingerprint(cfg, h)
	observed := in.Fingerprint()
	var out []daemon.Check
	inst := daemon.Check{Name: "desktop installation", OK: true, Detail: "not configured (Desktop path unused)"}
	if st.ReadTransport != nil {
		match := "matches"
		if st.ValidationFingerprint == nil || *st.ValidationFingerprint != observed {
			match = "DIFFERS from the observed " + observed + ": automatic continuation stopped; " +
				"re-validate, then cbth desktop installation-state repair"
			inst.OK = false
		}
		inst.Detail = fmt.Sprintf("%s generation %d read=%s artifact=%s writeback=%s fingerprint %s",
			*st.ReadTransport, st.ReadTransportGeneration, st.ReadTransportCapability, st.ArtifactReadCapability,
			st.WritebackCapability, match)
	}
	out = append(out, inst)
	bs, err := ListBindings(ctx, s.DB)
	if err != nil {
		return append(out, daemon.Check{Name: "desktop bindings", Detail: err.Error()})
	}
	counts := map[BindingState]int{}
	var degraded []string
	for i := range bs {
		b := &bs[i]
		counts[b.BindingState]++
		switch {
		case b.BindingState == Degraded:
			why := "no reason recorded"
			if b.DegradedReason != nil {
				why = *b.DegradedReason
			}
			degraded = append(degraded, b.SourceThreadID+": "+why)
		case b.BindingState == Bound && b.mirrorMismatch(st) != "":
			degraded = append(degraded, b.SourceThreadID+": mirror differs ("+b.mirrorMismatch(st)+"), degrades at the next reconcile")
		}
	}
	bc := daemon.Check{Name: "desktop bindings", OK: len(degraded) == 0,
		Detail: fmt.Sprintf("%d bound, %d degraded, %d unbound", counts[Bound], counts[Degraded], counts[Unbound])}
	if len(degraded) > 0 {
		bc.Detail += "; degraded: " + strings.Join(degraded, "; ") + " (cbth desktop binding repair)"
	}
	out = append(out, bc)
	return append(out, snapshotFreshness(ctx, s, cfg, counts[Bound] > 0))
}

func snapshotFreshness(ctx context.Context, s *store.Store, cfg config.Config, needed bool) daemon.Check {
	c := daemon.Check{Name: "desktop snapshot", OK: true}
	var rev, at string
	err := s.DB.QueryRowContext(ctx, `SELECT snapshot_revision, published_at FROM desktop_snapshots
		WHERE state = 'published' AND superseded_at IS NULL ORDER BY published_at DESC LIMIT 1`).Scan(&rev, &at)
	if store.IsNoRows(err) {
		c.Detail = "none published yet"
		if needed {
			c.OK, c.Detail = false, "none published yet although bindings are bound: is the bridge running bridge-preflight?"
		}
		return c
	}
	if err != nil {
		c.OK, c.Detail = false, err.Error()
		return c
	}
	t, _ := store.ParseTS(at)
	age := s.Now().Sub(t).Round(time.Second)
	c.Detail = fmt.Sprintf("%s published %s ago", rev, age)
	if needed && age > cfg.Desktop.SnapshotReaderGrace {
		c.OK = false
		c.Detail += fmt.Sprintf(": stale (older than %v) while bindings are bound; is the bridge waking?", cfg.Desktop.SnapshotReaderGrace)
	}
	return c
}
