package cbth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/desktop"
	"github.com/cortexfs/cortexfs/core/cbth/home"
)

func init() {
	desktop.SetBuildVersion(applets.Version)
	table.Add(&cli.Cmd{Name: "desktop", Summary: "Desktop path: installation state, bindings, bridge helpers, writeback CAS, relay",
		Doc: `Non-success outcomes of CAS helpers are printed like results (with --json:
"ok":false and the outcome) and exit 1; nothing was changed.`,
		Subs: []*cli.Cmd{
			{Name: "installation-state", Summary: "show the Desktop installation state and whether it is validated", Run: desktopInstallation,
				Subs: []*cli.Cmd{{Name: "repair", Summary: "record the operator-validated installation state", Run: desktopInstallationRepair}}},
			{Name: "binding", Summary: "thread bindings to caller heartbeat automations", Subs: []*cli.Cmd{
				{Name: "repair", Summary: "bind or re-bind a thread to its caller automation", Run: desktopBindingRepair},
				{Name: "unbind", Summary: "stop automatic delivery to a thread", Run: desktopBindingUnbind},
				{Name: "list", Summary: "show bindings and whether each continues automatically", Run: desktopBindingList},
			}},
			{Name: "bridge-preflight", Summary: "a bridge wake's first step: sweep, reconcile, publish a snapshot", Run: desktopPreflight},
			{Name: "list-arm-pending", Summary: "helper twin of arm-pending-bindings.json", Run: desktopListArmPending},
			{Name: "list-pause-due", Summary: "helper twin of pause-due-bindings.json", Run: desktopListPauseDue},
			{Name: "claim-next-ready", Summary: "peek at the first thread of the fair-ready order", Run: desktopClaimNextReady},
			{Name: "note-arm-pending", Summary: "durable barrier before automation_update (returns a lease)", Run: desktopNoteArmPending},
			{Name: "note-arm", Summary: "record an accepted automation_update under the lease", Run: desktopNoteArm},
			{Name: "note-quiesced", Summary: "record that an armed caller heartbeat is verified quiet", Run: desktopNoteQuiesced},
			{Name: "reconcile-arm", Summary: "reconcile after a lost note-arm answer", Run: desktopReconcileArm},
			{Name: "note-boundary-crossed", Summary: "the caller's gated continuation (once)", Run: desktopNoteBoundaryCrossed},
			{Name: "read-artifact", Summary: "operator recovery read of an artifact chunk under a lease", Run: desktopReadArtifact},
			{Name: "revoke-artifact-lease", Summary: "end an artifact recovery lease now", Run: desktopRevokeLease},
			{Name: "relay", Summary: "transcript relay for bridges that may not run mutating helpers", Subs: []*cli.Cmd{
				{Name: "marker", Summary: "relay markers", Subs: []*cli.Cmd{
					{Name: "issue", Summary: "issue a marker for the bridge to write into its transcript", Run: desktopMarkerIssue},
				}},
				{Name: "consume-transcript", Summary: "find a marker in a rollout and perform its CAS", Run: desktopConsumeTranscript},
			}},
		}})
}

// succeeded reports whether an outcome is a success (fresh or idempotent):
// anything else is printed like a success but exits 1.
func succeeded(o delivery.Outcome) bool {
	return o == delivery.OutcomeOK || o == delivery.OutcomeAlreadyPending || o == delivery.OutcomeAlreadyArmed
}

// outcomeResult prints res and exits 1 for a non-success outcome.
func outcomeResult(c *common, out delivery.Outcome, res any, human func(w io.Writer)) error {
	if err := c.out().ResultOK(succeeded(out), res, human); err != nil {
		return err
	}
	if !succeeded(out) {
		return exitStatus(1)
	}
	return nil
}

// capFlag is a --*-capability flag whose absence means "not given".
type capFlag struct{ v *desktop.Capability }

func (f *capFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return string(*f.v)
}

func (f *capFlag) Set(s string) error {
	c := desktop.Capability(s)
	if c != desktop.CapUnknown && c != desktop.CapValidated && c != desktop.CapUnavailable {
		return fmt.Errorf("want unknown, validated or unavailable, got %q", s)
	}
	f.v = &c
	return nil
}

func printInstallation(w io.Writer, v desktop.InstallationView) {
	tr := "-"
	if v.ReadTransport != nil {
		tr = string(*v.ReadTransport)
	}
	printKV(w, "read_transport", tr, "read_transport_generation", v.ReadTransportGeneration,
		"read_transport_capability", v.ReadTransportCapability, "artifact_read_capability", v.ArtifactReadCapability,
		"writeback_capability", v.WritebackCapability, "validation_fingerprint", v.ValidationFingerprint,
		"observed_fingerprint", v.ObservedValidationFingerprint, "validated_at", v.ValidatedAt, "validated", v.Validated)
	for _, why := range v.NotValidatedBecause {
		printKV(w, "not validated", why)
	}
}

func desktopInstallation(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop installation-state", "cbth desktop installation-state [repair …] [--json]",
		`Show the Desktop installation state (the one authority for installation-wide
transport and capability conclusions), the fingerprint observed now, and
whether automatic continuation is validated. Also published at
$CBTH_HOME/inbox/desktop-installation-state.json.`)
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var v desktop.InstallationView
	if err := daemon.Call(ctx, h, desktop.OpInstallation, nil, &v); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(v, func(w io.Writer) { printInstallation(w, v) })
}

func desktopInstallationRepair(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop installation-state repair",
		"cbth desktop installation-state repair --read-transport direct_file_read|helper_cli_read "+
			"[--read-transport-capability S] [--artifact-read-capability S] [--writeback-capability S] [--json]",
		`Record the operator-validated installation state. A capability not given is
written as unknown. Repeating the same arguments with an unchanged observed
fingerprint is a no-op (changed=false); any real change bumps
read_transport_generation, records the observed validation_fingerprint, sets
validated_at (cleared when nothing is validated) and degrades every bound
binding whose mirror no longer matches (repair them with cbth desktop binding
repair).`)
	var r desktop.RepairRequest
	var rc, ac, wc capFlag
	c.fs.Func("read-transport", "direct_file_read or helper_cli_read", func(s string) error {
		r.ReadTransport = desktop.ReadTransport(s)
		return nil
	})
	c.fs.Var(&rc, "read-transport-capability", "unknown|validated|unavailable (default unknown)")
	c.fs.Var(&ac, "artifact-read-capability", "unknown|validated|unavailable (default unknown)")
	c.fs.Var(&wc, "writeback-capability", "unknown|validated|unavailable (default unknown)")
	cli.MarkRequired(c.fs, "read-transport")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	r.ReadTransportCapability, r.ArtifactReadCapability, r.WritebackCapability = rc.v, ac.v, wc.v
	var res desktop.RepairResult
	if err := daemon.Call(ctx, h, desktop.OpInstallationRepair, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "changed", res.Changed)
		printInstallation(w, res.Installation)
		if len(res.DegradedBindings) > 0 {
			printKV(w, "degraded bindings", strings.Join(res.DegradedBindings, " "))
		}
	})
}

func printBinding(w io.Writer, b *desktop.Binding) {
	if b == nil {
		fmt.Fprintln(w, "no binding")
		return
	}
	armed := "-"
	if b.ArmedGeneration != nil {
		armed = fmt.Sprint(*b.ArmedGeneration)
	}
	printKV(w, "binding_id", b.BindingID, "source_thread_id", b.SourceThreadID, "binding_state", b.BindingState,
		"caller_automation_id", b.CallerAutomationID, "armed_generation", armed,
		"armed_generation_quiesced_at", b.ArmedGenerationQuiescedAt, "pause_not_before", b.PauseNotBefore,
		"pause_deadline", b.PauseDeadline, "read_transport_capability", b.ReadTransportCapability,
		"artifact_read_capability", b.ArtifactReadCapability, "writeback_capability", b.WritebackCapability,
		"degraded_reason", b.DegradedReason)
}

func desktopBindingRepair(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop binding repair",
		"cbth desktop binding repair --source-thread-id T --caller-automation-id A [--bridge-thread-id B] [--json]",
		`Bind (bootstrap) or re-bind a Desktop thread to its caller heartbeat
automation, mirroring the installation state (capabilities are echoed, never
written here). Replacing the automation, or an armed generation not proven
quiesced, moves the head batch to a fresh attempt and generation.`)
	var r desktop.BindingRepairRequest
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the caller thread")
	c.fs.StringVar(&r.CallerAutomationID, "caller-automation-id", "", "the caller heartbeat automation id")
	c.fs.StringVar(&r.BridgeThreadID, "bridge-thread-id", "", "the bridge thread that serves it (optional)")
	cli.MarkRequired(c.fs, "source-thread-id", "caller-automation-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.BindingRepairResult
	if err := daemon.Call(ctx, h, desktop.OpBindingRepair, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "changed", res.Changed, "automation_replaced", res.AutomationReplaced,
			"previous_automation_quiesced", res.PreviousAutomationQuiesced, "fresh_attempt_forced", res.FreshAttemptForced)
		printBinding(w, res.Binding)
		for _, why := range res.NotAutomaticBecause {
			printKV(w, "not automatic", why)
		}
	})
}

func desktopBindingUnbind(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop binding unbind",
		"cbth desktop binding unbind --source-thread-id T --delete-automation true|false [--json]",
		`Stop automatic delivery to the thread. --delete-automation true states that
the caller automation is deleted (its armed generation counts as quiesced);
false keeps its id and leaves its quiesce unproven.`)
	var r desktop.UnbindRequest
	var del optBool
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the caller thread")
	c.fs.Var(&del, "delete-automation", "true|false (required)")
	cli.MarkRequired(c.fs, "source-thread-id", "delete-automation")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	r.DeleteAutomation = del.v
	var res desktop.UnbindResult
	if err := daemon.Call(ctx, h, desktop.OpBindingUnbind, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "automation_deleted", res.AutomationDeleted)
		printBinding(w, res.Binding)
	})
}

func desktopBindingList(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop binding list", "cbth desktop binding list [--source-thread-id T] [--json]",
		"Show Desktop bindings and whether each allows automatic continuation now (and why not).")
	var r desktop.BindingListArgs
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "only this thread")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res []desktop.BindingView
	if err := daemon.Call(ctx, h, desktop.OpBindingList, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(res, func(w io.Writer) {
		for i := range res {
			printBinding(w, &res[i].Binding)
			printKV(w, "automatic_continuation", res[i].AutomaticContinuation)
			for _, why := range res[i].NotAutomaticBecause {
				printKV(w, "not automatic", why)
			}
			fmt.Fprintln(w)
		}
	})
}

func desktopPreflight(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop bridge-preflight", "cbth desktop bridge-preflight --bridge-thread-id B [--json]",
		`Every bridge wake's mandatory first step: starts the daemon if needed, runs the
overdue sweep (deadlines, auto-close, artifact GC) and the Desktop reconcile,
then publishes a fresh snapshot: inbox/snapshots/<rev>/{ready-threads,
arm-pending-bindings,pause-due-bindings,bindings}.json, then
inbox/current-snapshot.json. On failure (non-zero exit) the bridge must not
arm from older files.`)
	var r desktop.PreflightRequest
	c.fs.StringVar(&r.BridgeThreadID, "bridge-thread-id", "", "the bridge heartbeat thread")
	cli.MarkRequired(c.fs, "bridge-thread-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.PreflightResult
	if err := daemon.Call(ctx, h, desktop.OpPreflight, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "snapshot_revision", res.SnapshotRevision,
			"snapshot_manifest_path", res.SnapshotManifestPath, "read_transport_generation", res.ReadTransportGeneration,
			"validated", res.Validated, "ready", res.ReadyCount, "arm_pending", res.ArmPendingCount, "pause_due", res.PauseDueCount)
		for _, why := range res.NotValidatedBecause {
			printKV(w, "not validated", why)
		}
	})
}

func bridgeRead(ctx context.Context, env *applets.Env, args []string, name, op, description string, res any,
	outcome func() delivery.Outcome) error {
	c := newCommand(env, "desktop "+name, "cbth desktop "+name+" --bridge-thread-id B [--json]", description)
	var bridge string
	c.fs.StringVar(&bridge, "bridge-thread-id", "", "the bridge heartbeat thread")
	cli.MarkRequired(c.fs, "bridge-thread-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	if err := daemon.Call(ctx, h, op, desktop.BridgeArgs{BridgeThreadID: bridge}, res); err != nil {
		return c.out().Fail(err)
	}
	// The human form is the same document, indented: its schema is the point.
	return outcomeResult(c, outcome(), res, func(w io.Writer) {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(w, "%s\n", b)
	})
}

func desktopListArmPending(ctx context.Context, env *applets.Env, args []string) error {
	var res desktop.ListResult[desktop.ArmPendingEntry]
	return bridgeRead(ctx, env, args, "list-arm-pending", desktop.OpListArmPending,
		"helper_cli_read twin of arm-pending-bindings.json (same schema, read live under the current revision).",
		&res, func() delivery.Outcome { return res.Outcome })
}

func desktopListPauseDue(ctx context.Context, env *applets.Env, args []string) error {
	var res desktop.ListResult[desktop.PauseDueEntry]
	return bridgeRead(ctx, env, args, "list-pause-due", desktop.OpListPauseDue,
		"helper_cli_read twin of pause-due-bindings.json (same schema, most urgent pause_deadline first).",
		&res, func() delivery.Outcome { return res.Outcome })
}

func desktopClaimNextReady(ctx context.Context, env *applets.Env, args []string) error {
	var res desktop.ClaimResult
	return bridgeRead(ctx, env, args, "claim-next-ready", desktop.OpClaimNextReady,
		`A pure peek at the first thread of the fair-ready order (the ready-entry schema
of ready-threads.json): no reservation, no head move, no attempt count.`,
		&res, func() delivery.Outcome { return res.Outcome })
}

// armFlags adds the (source thread, attempt, generation, bridge request) key.
func armFlags(c *common, r *desktop.ArmRequest) {
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the caller thread")
	c.fs.StringVar(&r.AttemptID, "attempt-id", "", "the head attempt")
	c.fs.Int64Var(&r.Generation, "generation", 0, "the attempt's generation")
	c.fs.StringVar(&r.BridgeRequestID, "bridge-request-id", "", "this bridge wake's owner token")
}

func printArm(w io.Writer, res *desktop.ArmResult) {
	printKV(w, "outcome", res.Outcome, "attempt_state", res.AttemptState, "bridge_arm_lease_id", res.BridgeArmLeaseID,
		"bridge_arm_lease_deadline", res.BridgeArmLeaseDead, "caller_automation_id", res.CallerAutomationID,
		"pause_not_before", res.PauseNotBefore, "pause_deadline", res.PauseDeadline)
	for _, why := range res.NotAutomaticBecause {
		printKV(w, "why", why)
	}
}

func desktopNoteArmPending(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop note-arm-pending",
		"cbth desktop note-arm-pending --source-thread-id T --attempt-id A --generation G --bridge-request-id R [--json]",
		`Durable barrier before automation_update: prepared -> arm_pending, returning
bridge_arm_lease_id and bridge_arm_lease_deadline. The same request id gets
the same lease (already-pending); another gets lease-held without it.`)
	var r desktop.ArmRequest
	armFlags(c, &r)
	cli.MarkRequired(c.fs, "source-thread-id", "attempt-id", "generation", "bridge-request-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.ArmResult
	if err := daemon.Call(ctx, h, desktop.OpNoteArmPending, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) { printArm(w, &res) })
}

func desktopNoteArm(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop note-arm",
		"cbth desktop note-arm --source-thread-id T --attempt-id A --generation G --bridge-request-id R "+
			"--bridge-arm-lease-id L [--automation-id X] [--json]",
		`Record that Codex accepted the automation_update: arm_pending -> cooldown under
the lease; sets armed_generation and the pause window. A repeat is
already-armed and counts nothing twice.`)
	var r desktop.ArmRequest
	armFlags(c, &r)
	c.fs.StringVar(&r.BridgeArmLeaseID, "bridge-arm-lease-id", "", "the lease note-arm-pending returned")
	c.fs.StringVar(&r.AutomationID, "automation-id", "", "the id automation_update returned, if observed")
	cli.MarkRequired(c.fs, "source-thread-id", "attempt-id", "generation", "bridge-request-id", "bridge-arm-lease-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.ArmResult
	if err := daemon.Call(ctx, h, desktop.OpNoteArm, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) { printArm(w, &res) })
}

func desktopNoteQuiesced(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop note-quiesced",
		"cbth desktop note-quiesced --source-thread-id T --generation G --bridge-request-id R [--json]",
		`Record that the bridge verified the caller heartbeat armed for generation G is
PAUSED/deleted/quiet (sets armed_generation_quiesced_at). Only the binding's
current armed_generation counts: an older generation's cleanup is a no-op.`)
	var r desktop.QuiesceRequest
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the caller thread")
	c.fs.Int64Var(&r.Generation, "generation", 0, "the armed generation verified quiet")
	c.fs.StringVar(&r.BridgeRequestID, "bridge-request-id", "", "this bridge wake's owner token")
	cli.MarkRequired(c.fs, "source-thread-id", "generation", "bridge-request-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.QuiesceResult
	if err := daemon.Call(ctx, h, desktop.OpNoteQuiesced, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "changed", res.Changed, "why", res.Why)
		printBinding(w, res.Binding)
	})
}

func desktopReconcileArm(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop reconcile-arm",
		"cbth desktop reconcile-arm --source-thread-id T --attempt-id A --generation G --bridge-request-id R "+
			"--heartbeat-state paused|active|unknown [--json]",
		`Durable reconciliation after automation_update was accepted but note-arm's
answer was lost, in the seed's order: arm proven (cooldown) -> arm_succeeded;
handoff recorded -> boundary_crossed; heartbeat verified PAUSED ->
abandoned_replay_automatic; nothing provable -> manual_resolution_only with
the binding degraded.`)
	var r desktop.ReconcileRequest
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the caller thread")
	c.fs.StringVar(&r.AttemptID, "attempt-id", "", "the attempt")
	c.fs.Int64Var(&r.Generation, "generation", 0, "its generation")
	c.fs.StringVar(&r.BridgeRequestID, "bridge-request-id", "", "the bridge request that armed it")
	c.fs.Func("heartbeat-state", "paused, active or unknown: what the bridge verified", func(s string) error {
		r.Heartbeat = desktop.HeartbeatState(s)
		return nil
	})
	cli.MarkRequired(c.fs, "source-thread-id", "attempt-id", "generation", "bridge-request-id", "heartbeat-state")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.ReconcileResult
	if err := daemon.Call(ctx, h, desktop.OpReconcileArm, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "resolution", res.Resolution, "attempt_state", res.AttemptState)
	})
}

func desktopNoteBoundaryCrossed(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop note-boundary-crossed",
		"cbth desktop note-boundary-crossed --source-thread-id T --batch-id B --attempt-id A --generation G "+
			"--expected-snapshot-revision R [--json]",
		`The caller's gated continuation: on fresh success the handoff is durably
recorded (batch closed handoff_recorded, recovery envelope kept) and the
inline continuation is returned. Anything else is an outcome:
transient_not_ready, stale_or_superseded, already_crossed_or_handoff_recorded,
binding_or_capability_invalid, or unknown_after_helper_failure when the
answer was lost: the request carries not_after (the client deadline) and is
refused unchanged if the daemon reaches it later, so after not_after
cbth batch inspect --batch-id says for sure whether the boundary was crossed.`)
	var r desktop.BoundaryRequest
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "from the prompt token")
	c.fs.StringVar(&r.BatchID, "batch-id", "", "from the prompt token")
	c.fs.StringVar(&r.AttemptID, "attempt-id", "", "from the prompt token")
	c.fs.Int64Var(&r.Generation, "generation", 0, "from the prompt token")
	c.fs.StringVar(&r.ExpectedSnapshotRevision, "expected-snapshot-revision", "", "snapshot_revision from the prompt token")
	cli.MarkRequired(c.fs, "source-thread-id", "batch-id", "attempt-id", "generation", "expected-snapshot-revision")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	// The daemon refuses the request once this client has stopped waiting,
	// so a lost answer can be reconciled from the batch after not_after.
	timeout := daemon.Timeout(desktop.OpBoundaryCrossed)
	r.NotAfter = time.Now().Add(timeout).UTC().Format(time.RFC3339Nano)
	var res desktop.BoundaryResult
	if err := callOnce(ctx, h, timeout, desktop.OpBoundaryCrossed, r, &res); err != nil {
		if !afterSend(err) {
			return c.out().Fail(err)
		}
		// The request may have committed: the caller must not continue and
		// must reconcile durably (batch inspect) before anything else.
		res = desktop.BoundaryResult{Outcome: delivery.OutcomeUnknownAfterFailure, SourceThreadID: r.SourceThreadID,
			BatchID: r.BatchID, AttemptID: r.AttemptID, Generation: r.Generation,
			SnapshotRevision: r.ExpectedSnapshotRevision, NotAutomaticBecause: []string{err.Error()}, NotAfter: r.NotAfter}
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "batch_id", res.BatchID, "attempt_id", res.AttemptID,
			"generation", res.Generation, "snapshot_revision", res.SnapshotRevision)
		for _, why := range res.NotAutomaticBecause {
			printKV(w, "why", why)
		}
		if res.Continuation != nil {
			fmt.Fprintf(w, "\n%s\n", res.Continuation.Summary)
		}
	})
}

// callOnce connects (starting the daemon if needed), then sends one
// request; an error from connecting means nothing was sent.
func callOnce(ctx context.Context, h home.Home, timeout time.Duration, op string, args, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := daemon.Connect(ctx, h)
	if err != nil {
		return &notSent{err}
	}
	defer c.Close()
	return c.Call(ctx, op, args, out)
}

type notSent struct{ error }

func (e *notSent) Unwrap() error { return e.error }

// afterSend reports whether err may have happened after the daemon got the
// request (the connection broke, or the daemon failed internally): the
// outcome is then unknown, not a definite refusal.
func afterSend(err error) bool {
	if _, ok := err.(*notSent); ok {
		return false
	}
	switch abi.CodeOf(err) {
	case abi.ECONNREFUSED, abi.ETIMEDOUT, abi.EPROTO, abi.EIO:
		return true
	}
	return false
}

func desktopReadArtifact(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop read-artifact",
		"cbth desktop read-artifact --artifact-id A --artifact-read-lease-id L --offset O --max-bytes N [--json]",
		`Operator/manual recovery read of one chunk of an artifact under a live
artifact_recovery_lease_id (from cbth batch inspect --batch-id). Bytes come
back base64 with the artifact's size and sha256; never a path.`)
	var r desktop.ReadRequest
	c.fs.StringVar(&r.ArtifactID, "artifact-id", "", "the artifact")
	c.fs.StringVar(&r.ArtifactReadLeaseID, "artifact-read-lease-id", "", "the artifact_recovery_lease_id")
	c.fs.Int64Var(&r.Offset, "offset", 0, "byte offset")
	c.fs.Int64Var(&r.MaxBytes, "max-bytes", 64<<10, fmt.Sprintf("chunk size (at most %d)", desktop.MaxReadChunk))
	cli.MarkRequired(c.fs, "artifact-id", "artifact-read-lease-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.ReadResult
	if err := daemon.Call(ctx, h, desktop.OpReadArtifact, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "artifact_id", res.ArtifactID, "offset", res.Offset, "bytes", res.Bytes,
			"eof", res.EOF, "size_bytes", res.SizeBytes, "sha256", res.SHA256, "why", res.Why)
	})
}

func desktopRevokeLease(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop revoke-artifact-lease", "cbth desktop revoke-artifact-lease --artifact-read-lease-id L [--json]",
		"End an artifact recovery lease now (operator).")
	var r desktop.RevokeRequest
	c.fs.StringVar(&r.ArtifactReadLeaseID, "artifact-read-lease-id", "", "the lease")
	cli.MarkRequired(c.fs, "artifact-read-lease-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res map[string]any
	if err := daemon.Call(ctx, h, desktop.OpRevokeLease, r, &res); err != nil {
		return c.out().Fail(err)
	}
	out := delivery.Outcome(fmt.Sprint(res["outcome"]))
	return outcomeResult(c, out, res, func(w io.Writer) { printKV(w, "outcome", out) })
}
