package conformance

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// seed lists, per enum, the names cbth-shared-core.zh-CN.md writes, in its
// order. This table is the contract: a name the code emits that is not
// here fails the test. Extend it only from the seed (quote the section).
var seed = map[string][]string{
	// "Job 状态"
	"job.status":      {"running", "ready", "failed", "cancelled"},
	"job.target_kind": {"cli", "desktop"},
	// "Delivery batch 状态"
	"batch.state": {"queued", "materialized", "cooldown", "closed"},
	// "Canonical close_reason"
	"batch.close_reason": {"delivered", "superseded", "operator_confirmed_delivery", "operator_closed_unconfirmed",
		"cancelled", "redelivery_window_exhausted", "manual_resolution_expired", "max_attempts_exhausted",
		"handoff_recorded"},
	// "Delivery batch 关键字段": replay_policy, continuation_boundary_state, delivery_mode
	"batch.replay_policy":               {"automatic", "manual_resolution_only"},
	"batch.continuation_boundary_state": {"not_crossed", "crossed_unacknowledged", "acknowledged"},
	"batch.delivery_mode":               {"desktop_heartbeat", "cli_turn_start", "cli_turn_steer"},
	// "Attempt 状态"
	"attempt.state": {"prepared", "accept_pending", "arm_pending", "cooldown", "closed", "superseded", "abandoned"},
	// "Attempt 关键字段"
	"attempt.delivery_rpc_kind":          {"turn_start", "turn_steer"},
	"attempt.delivery_rpc_state":         {"pending_acceptance", "accepted", "rejected_before_accept", "acceptance_unknown"},
	"attempt.delivery_observation_state": {"tracking", "lost", "expired"},
	"attempt.automation_binding_state":   {"unknown", "observed", "reconciled"},
	// "CLI delivery_turn_id 观察连续性": the v1 fixed canonical enum
	"attempt.last_observed_turn_event": {"turn_started", "turn_completed", "turn_failed", "turn_interrupted", "turn_replaced"},
	// "desktop thread bindings"
	"binding.binding_state":  {"unbound", "bound", "degraded"},
	"binding.read_transport": {"direct_file_read", "helper_cli_read"},
	"capability":             {"unknown", "validated", "unavailable"},
	// "Operator recovery": relay marker issue --kind arm-pending|arm-accepted
	"relay.kind": {"arm-pending", "arm-accepted"},
	// "Managed session 关键字段 (CLI)"
	"session.session_state": {"live", "detached", "parked", "stale", "retired"},
	// "CLI managed session profile": the refusals of attach
	"session.refusal": {"session_profile_mismatch", "session_pending_manual_resolution"},
	// Outcomes: note-boundary-crossed's success and its non-success list;
	// note-arm-pending's already-pending and lease-held; note-arm's
	// already-armed; and manual_resolution_only, the replay_policy name,
	// refusing an automatic step on a manual batch.
	"outcome": {"success", "transient_not_ready", "stale_or_superseded", "already_crossed_or_handoff_recorded",
		"binding_or_capability_invalid", "unknown_after_helper_failure", "already-pending", "lease-held",
		"already-armed", "manual_resolution_only"},
}

// typeEnums maps the code's string enum types to the seed's enums. A type
// mapped to "" is the code's own (not seed vocabulary) and is exempt; a new
// string enum type must be added here, one way or the other.
var typeEnums = map[string]string{
	"jobs.Status":            "job.status",
	"delivery.TargetKind":    "job.target_kind",
	"delivery.BatchState":    "batch.state",
	"delivery.CloseReason":   "batch.close_reason",
	"delivery.ReplayPolicy":  "batch.replay_policy",
	"delivery.DeliveryMode":  "batch.delivery_mode",
	"delivery.AttemptState":  "attempt.state",
	"delivery.TurnEvent":     "attempt.last_observed_turn_event",
	"delivery.Outcome":       "outcome",
	"desktop.BindingState":   "binding.binding_state",
	"desktop.ReadTransport":  "binding.read_transport",
	"desktop.Capability":     "capability",
	"desktop.MarkerKind":     "relay.kind",
	"cli.SessionState":       "session.session_state",
	"desktop.Resolution":     "", // how reconcile-arm settled: the adapter's own report
	"desktop.HeartbeatState": "", // what the bridge verified: an adapter input
	"tasks.State":            "", // cbth task run's own states (not in the seed)
	"cli.Requested":          "", // --session-allows-* values auto|true|false: flag values
}

// namedConsts lists refusal reasons declared as untyped string constants.
var namedConsts = map[string]string{
	"cli.ReasonProfileMismatch":         "session.refusal",
	"cli.ReasonPendingManualResolution": "session.refusal",
}

// columnEnums maps the store's CHECK ... IN (...) constraints to the seed.
var columnEnums = map[string]string{
	"jobs.target_kind":                                     "job.target_kind",
	"jobs.status":                                          "job.status",
	"batches.target_kind":                                  "job.target_kind",
	"batches.state":                                        "batch.state",
	"batches.continuation_boundary_state":                  "batch.continuation_boundary_state",
	"batches.replay_policy":                                "batch.replay_policy",
	"batches.close_reason":                                 "batch.close_reason",
	"batches.delivery_mode":                                "batch.delivery_mode",
	"attempts.state":                                       "attempt.state",
	"attempts.delivery_rpc_kind":                           "attempt.delivery_rpc_kind",
	"attempts.delivery_rpc_state":                          "attempt.delivery_rpc_state",
	"attempts.delivery_observation_state":                  "attempt.delivery_observation_state",
	"attempts.last_observed_turn_event":                    "attempt.last_observed_turn_event",
	"attempts.automation_binding_state":                    "attempt.automation_binding_state",
	"desktop_installation_state.read_transport":            "binding.read_transport",
	"desktop_installation_state.read_transport_capability": "capability",
	"desktop_installation_state.artifact_read_capability":  "capability",
	"desktop_installation_state.writeback_capability":      "capability",
	"desktop_bindings.binding_state":                       "binding.binding_state",
	"desktop_bindings.read_transport":                      "binding.read_transport",
	"desktop_bindings.read_transport_capability":           "capability",
	"desktop_bindings.artifact_read_capability":            "capability",
	"desktop_bindings.writeback_capability":                "capability",
	"managed_sessions.session_state":                       "session.session_state",
	"relay_markers.kind":                                   "relay.kind",
	// The code's own columns (not seed vocabulary).
	"managed_sessions.auto_delivery_policy": "",
	"managed_sessions.capability_state":     "",
	"tasks.state":                           "",
	"tasks.output_format":                   "",
	"desktop_snapshots.state":               "",
	"artifact_read_leases.kind":             "",
}

// TestEmittedConstantsAreSeedNames parses every package under core/cbth and
// checks each constant of an enum type is a name of that enum in the seed.
func TestEmittedConstantsAreSeedNames(t *testing.T) {
	consts := collectConsts(t)
	seen := map[string]bool{}
	for _, c := range consts {
		key, known := typeEnums[c.typ]
		if c.typ == "" {
			key, known = namedConsts[c.pkg+"."+c.name]
			if !known {
				continue
			}
		}
		if !known {
			t.Errorf("%s: constant %s of type %s: classify the type in typeEnums (seed enum, or \"\" for the code's own)",
				c.pos, c.name, c.typ)
			continue
		}
		if key == "" {
			continue
		}
		seen[key] = true
		if !slices.Contains(seed[key], c.value) {
			t.Errorf("%s: %s = %q is not a seed name of %s %v", c.pos, c.name, c.value, key, seed[key])
		}
	}
	for _, key := range []string{"outcome", "attempt.state", "batch.close_reason", "session.refusal"} {
		if !seen[key] {
			t.Errorf("no constants found for %s: the parser missed them", key)
		}
	}
}

// TestStoreConstraintsAreSeedLists checks every CHECK ... IN list of the
// migrated schema against the seed: the store cannot hold another name.
func TestStoreConstraintsAreSeedLists(t *testing.T) {
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cbth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.DB.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	in := regexp.MustCompile(`(\w+)(?:\s+IS\s+NULL\s+OR\s+\w+)?\s+IN\s*\(([^)]*)\)`)
	checked := 0
	for rows.Next() {
		var table, sql string
		if err := rows.Scan(&table, &sql); err != nil {
			t.Fatal(err)
		}
		for _, m := range in.FindAllStringSubmatch(sql, -1) {
			col := table + "." + m[1]
			key, known := columnEnums[col]
			if !known {
				t.Errorf("store column %s has CHECK IN (%s): classify it in columnEnums", col, m[2])
				continue
			}
			if key == "" {
				continue
			}
			var vals []string
			for _, v := range strings.Split(m[2], ",") {
				vals = append(vals, strings.Trim(strings.TrimSpace(v), "'"))
			}
			want := slices.Clone(seed[key])
			sort.Strings(vals)
			sort.Strings(want)
			if !slices.Equal(vals, want) {
				t.Errorf("store column %s allows %v, the seed's %s is %v", col, vals, key, want)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("only %d constrained columns found: the parser missed some", checked)
	}
}

type constant struct {
	pkg, name, typ, value string
	pos                   token.Position
}

// collectConsts reads the string constants of every non-test file under
// core/cbth, with their declared type qualified by package name.
func collectConsts(t *testing.T) []constant {
	t.Helper()
	root := ".."
	var out []constant
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			var typ string // implicit repetition keeps the type of the group
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil {
					typ = ""
					if id, ok := vs.Type.(*ast.Ident); ok {
						typ = pkg + "." + id.Name
					}
				} else if len(vs.Values) > 0 {
					typ = ""
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					out = append(out, constant{pkg: pkg, name: name.Name, typ: typ, value: v, pos: fset.Position(name.Pos())})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
