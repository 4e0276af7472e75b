package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/wire/codex"
)

func boolPtr(p *bool) (bool, bool) {
	if p == nil {
		return false, false
	}
	return *p, true
}

// refreshProfile reads the current permission snapshot from thread/resume,
// pins the startup upper bound the first time, and stores effective =
// startup AND current per dimension. Drift (a change against the previous
// snapshot, or a first snapshot other than an explicit bootstrap pin) is
// audited and warned about. An unparsable snapshot fails closed: the
// current session_allows_* become unknown (NULL).
func (rt *runtime) refreshProfile(s *Session, r *codex.ThreadResumeResponse) (Profile, Snapshot, error) {
	snap, err := ParseSnapshot(r.ApprovalPolicy, r.Sandbox)
	if err != nil {
		raw := fmt.Sprintf(`{"approvalPolicy":%s,"sandbox":%s}`, orNull(r.ApprovalPolicy), orNull(r.Sandbox))
		return Profile{}, snap, rt.tx(func(o *delivery.Op) error {
			return setSession(o, rt.id, "cli.permission.unparsable", err.Error(), map[string]any{
				"session_allows_approval": nil, "session_allows_network": nil, "session_allows_write_access": nil,
				"last_permission_snapshot_json": raw})
		})
	}
	startup, pinned := startupOf(s)
	current := snap.Allows
	if !pinned {
		// The first trusted snapshot is the startup upper bound; an explicit
		// true/false flag is the caller's bootstrap value for its dimension.
		startup = Profile{
			Approval: Requested(s.RequestedAllowsApproval).bootstrap(current.Approval),
			Network:  Requested(s.RequestedAllowsNetwork).bootstrap(current.Network),
			Write:    Requested(s.RequestedAllowsWriteAccess).bootstrap(current.Write),
		}
	}
	eff := startup.And(current)
	raw := string(mustJSON(snap))
	cols := map[string]any{"session_allows_approval": eff.Approval, "session_allows_network": eff.Network,
		"session_allows_write_access": eff.Write}
	var prev *Snapshot
	if s.LastPermissionSnapshotJSON != nil {
		var p Snapshot
		if json.Unmarshal([]byte(*s.LastPermissionSnapshotJSON), &p) == nil {
			prev = &p
		}
	}
	changed := prev == nil || raw != *s.LastPermissionSnapshotJSON
	if changed {
		cols["last_permission_snapshot_json"] = raw
		cols["permission_snapshot_revision"] = s.PermissionSnapshotRevision + 1
	}
	if !pinned {
		cols["startup_session_allows_approval"] = startup.Approval
		cols["startup_session_allows_network"] = startup.Network
		cols["startup_session_allows_write_access"] = startup.Write
		cols["startup_permission_snapshot_json"] = raw
	}
	err = rt.tx(func(o *delivery.Op) error {
		if err := setSession(o, rt.id, "", "", cols); err != nil {
			return err
		}
		// Drift is a change of the current snapshot, or a first trusted
		// snapshot that differs from an explicit bootstrap startup pin.
		before := startup
		if prev != nil {
			before = prev.Allows
		}
		if before == snap.Allows {
			return nil
		}
		return rt.drift(o, s, startup, before, snap.Allows, eff)
	})
	return eff, snap, err
}

func startupOf(s *Session) (Profile, bool) {
	a, ok1 := boolPtr(s.StartupSessionAllowsApproval)
	n, ok2 := boolPtr(s.StartupSessionAllowsNetwork)
	w, ok3 := boolPtr(s.StartupSessionAllowsWrite)
	return Profile{Approval: a, Network: n, Write: w}, ok1 && ok2 && ok3
}

func (rt *runtime) drift(o *delivery.Op, s *Session, startup, before, now, eff Profile) error {
	dir := "mixed"
	switch {
	case now.And(before) == now:
		dir = "tightened"
	case now.And(before) == before:
		dir = "loosened"
	}
	changed := before.Changed(now)
	rt.warn(fmt.Sprintf("session permission drift (%s: %s): startup=%+v current=%+v effective=%+v",
		dir, strings.Join(changed, ","), startup, now, eff))
	th := ""
	if s.BoundThreadID != nil {
		th = *s.BoundThreadID
	}
	return o.Audit(audit.Entry{Action: "cli.permission.drift", EntityKind: "managed_session", EntityID: rt.id,
		SourceThreadID: th, Reason: dir, Outcome: "ok", Detail: map[string]any{"startup": startup, "previous": before,
			"current": now, "effective": eff, "direction": dir, "changed_dimensions": changed}})
}

func orNull(b []byte) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}
