package desktop

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/sweep"
)

// Name is the adapter's extension name.
const Name = "desktop"

// Operation names of the Desktop adapter.
const (
	OpInstallation       = "desktop.installation_state"
	OpInstallationRepair = "desktop.installation_state_repair"
	OpBindingRepair      = "desktop.binding_repair"
	OpBindingUnbind      = "desktop.binding_unbind"
	OpBindingList        = "desktop.binding_list"
	OpPreflight          = "desktop.bridge_preflight"
	OpListArmPending     = "desktop.list_arm_pending"
	OpListPauseDue       = "desktop.list_pause_due"
	OpClaimNextReady     = "desktop.claim_next_ready"
	OpNoteArmPending     = "desktop.note_arm_pending"
	OpNoteArm            = "desktop.note_arm"
	OpNoteQuiesced       = "desktop.note_quiesced"
	OpReconcileArm       = "desktop.reconcile_arm"
	OpBoundaryCrossed    = "desktop.note_boundary_crossed"
	OpReadArtifact       = "desktop.read_artifact"
	OpRevokeLease        = "desktop.revoke_artifact_lease"
	OpMarkerIssue        = "desktop.relay_marker_issue"
	OpConsumeTranscript  = "desktop.relay_consume_transcript"
)

// BridgeArgs names the bridge thread of a read helper.
type BridgeArgs struct {
	BridgeThreadID string `json:"bridge_thread_id"`
}

// BindingListArgs selects bindings (all, or one thread's).
type BindingListArgs struct {
	SourceThreadID string `json:"source_thread_id,omitempty"`
}

// BindingView is a binding with the installation gate applied to it.
type BindingView struct {
	Binding
	AutomaticContinuation bool     `json:"automatic_continuation"`
	NotAutomaticBecause   []string `json:"not_automatic_because,omitempty"`
}

func init() {
	daemon.RegisterExtension(func() daemon.Extension { return &adapter{} })
	sweep.SetArmPendingResolver(expireArmPending)
	daemon.RegisterInspectHook(func(ctx context.Context, d *daemon.Daemon, a audit.Actor, b *delivery.Batch) error {
		if sv := serviceOf(d); sv != nil && b != nil {
			return sv.inspectRecovery(ctx, a, b)
		}
		return nil
	})
	daemon.RegisterDoctorHook(doctorChecks)
	daemon.RegisterBlockedHook(func(ctx context.Context, d *daemon.Daemon, b *delivery.Batch) (string, error) {
		sv := serviceOf(d)
		if sv == nil || b == nil {
			return "", nil
		}
		return sv.BlockedReason(ctx, b)
	})
	registerOps()
}

// BlockedReason says why an open Desktop batch will not be continued
// automatically (no installation state, capabilities not validated, a
// fingerprint that moved, no binding or a degraded one), with the command
// that fixes it, or "" when nothing blocks it. Without it such a batch
// would wait silently until its redelivery window closes it.
func (sv *Service) BlockedReason(ctx context.Context, b *delivery.Batch) (string, error) {
	if b.State == delivery.BatchClosed || b.TargetKind != delivery.TargetDesktop ||
		b.ReplayPolicy == delivery.ReplayManualResolutionOnly { // said by the general hook, with close-head
		return "", nil
	}
	st, err := LoadInstallation(ctx, sv.Store.DB)
	if err != nil {
		return "", err
	}
	bd, err := GetBinding(ctx, sv.Store.DB, b.SourceThreadID)
	if err != nil {
		return "", err
	}
	why := automaticGate(st, bd, sv.Observe().Fingerprint())
	if len(why) == 0 {
		return "", nil
	}
	fix := "cbth desktop binding repair --source-thread-id " + b.SourceThreadID + " --caller-automation-id ID"
	if st.ReadTransport == nil || st.ReadTransportCapability != CapValidated || st.WritebackCapability != CapValidated {
		fix = "cbth desktop installation-state repair --read-transport direct_file_read|helper_cli_read " +
			"--read-transport-capability validated --writeback-capability validated, then " + fix
	}
	return "desktop continuation is not automatic: " + strings.Join(why, "; ") + " (" + fix + ")", nil
}

func op[T any](fn func(ctx context.Context, sv *Service, a audit.Actor, r T) (any, error)) daemon.OpFunc {
	return func(ctx context.Context, d *daemon.Daemon, a audit.Actor, args json.RawMessage) (any, error) {
		var r T
		if len(args) > 0 {
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				return nil, abi.Errorf(abi.EINVAL, "bad arguments: %v", err)
			}
		}
		sv := serviceOf(d)
		if sv == nil {
			return nil, abi.Errorf(abi.ENOTSUP, "desktop adapter not running")
		}
		return fn(ctx, sv, a, r)
	}
}

func registerOps() {
	daemon.RegisterOp(OpInstallation, op(func(ctx context.Context, sv *Service, a audit.Actor, r struct{}) (any, error) {
		return sv.Installation(ctx)
	}))
	daemon.RegisterOp(OpInstallationRepair, op(func(ctx context.Context, sv *Service, a audit.Actor, r RepairRequest) (any, error) {
		return sv.RepairInstallation(ctx, a, r)
	}))
	daemon.RegisterOp(OpBindingRepair, op(func(ctx context.Context, sv *Service, a audit.Actor, r BindingRepairRequest) (any, error) {
		return sv.RepairBinding(ctx, a, r)
	}))
	daemon.RegisterOp(OpBindingUnbind, op(func(ctx context.Context, sv *Service, a audit.Actor, r UnbindRequest) (any, error) {
		return sv.Unbind(ctx, a, r)
	}))
	daemon.RegisterOp(OpBindingList, op(func(ctx context.Context, sv *Service, a audit.Actor, r BindingListArgs) (any, error) {
		return sv.Bindings(ctx, r.SourceThreadID)
	}))
	daemon.RegisterOp(OpPreflight, op(func(ctx context.Context, sv *Service, a audit.Actor, r PreflightRequest) (any, error) {
		return sv.Preflight(ctx, a, r)
	}))
	daemon.RegisterOp(OpListArmPending, op(func(ctx context.Context, sv *Service, a audit.Actor, r BridgeArgs) (any, error) {
		return sv.ListArmPending(ctx, r.BridgeThreadID)
	}))
	daemon.RegisterOp(OpListPauseDue, op(func(ctx context.Context, sv *Service, a audit.Actor, r BridgeArgs) (any, error) {
		return sv.ListPauseDue(ctx, r.BridgeThreadID)
	}))
	daemon.RegisterOp(OpClaimNextReady, op(func(ctx context.Context, sv *Service, a audit.Actor, r BridgeArgs) (any, error) {
		return sv.ClaimNextReady(ctx, r.BridgeThreadID)
	}))
	daemon.RegisterOp(OpNoteArmPending, op(func(ctx context.Context, sv *Service, a audit.Actor, r ArmRequest) (any, error) {
		return sv.NoteArmPending(ctx, a, r)
	}))
	daemon.RegisterOp(OpNoteArm, op(func(ctx context.Context, sv *Service, a audit.Actor, r ArmRequest) (any, error) {
		return sv.NoteArm(ctx, a, r)
	}))
	daemon.RegisterOp(OpNoteQuiesced, op(func(ctx context.Context, sv *Service, a audit.Actor, r QuiesceRequest) (any, error) {
		return sv.NoteQuiesced(ctx, a, r)
	}))
	daemon.RegisterOp(OpReconcileArm, op(func(ctx context.Context, sv *Service, a audit.Actor, r ReconcileRequest) (any, error) {
		return sv.ReconcileArm(ctx, a, r)
	}))
	daemon.RegisterOp(OpBoundaryCrossed, op(func(ctx context.Context, sv *Service, a audit.Actor, r BoundaryRequest) (any, error) {
		return sv.NoteBoundaryCrossed(ctx, a, r)
	}))
	daemon.RegisterOp(OpReadArtifact, op(func(ctx context.Context, sv *Service, a audit.Actor, r ReadRequest) (any, error) {
		return sv.ReadArtifact(ctx, r)
	}))
	daemon.RegisterOp(OpRevokeLease, op(func(ctx context.Context, sv *Service, a audit.Actor, r RevokeRequest) (any, error) {
		return sv.RevokeLease(ctx, a, r)
	}))
	daemon.RegisterOp(OpMarkerIssue, op(func(ctx context.Context, sv *Service, a audit.Actor, r MarkerRequest) (any, error) {
		return sv.IssueMarker(ctx, a, r)
	}))
	daemon.RegisterOp(OpConsumeTranscript, op(func(ctx context.Context, sv *Service, a audit.Actor, r ConsumeRequest) (any, error) {
		return sv.ConsumeTranscript(ctx, a, r)
	}))
}

// Bindings lists bindings with their gate.
func (sv *Service) Bindings(ctx context.Context, thread string) ([]BindingView, error) {
	st, err := LoadInstallation(ctx, sv.Store.DB)
	if err != nil {
		return nil, err
	}
	bs, err := ListBindings(ctx, sv.Store.DB)
	if err != nil {
		return nil, err
	}
	observed := sv.Observe().Fingerprint()
	out := []BindingView{}
	for i := range bs {
		if thread != "" && bs[i].SourceThreadID != thread {
			continue
		}
		why := automaticGate(st, &bs[i], observed)
		out = append(out, BindingView{Binding: bs[i], AutomaticContinuation: len(why) == 0, NotAutomaticBecause: why})
	}
	if thread != "" && len(out) == 0 {
		return nil, abi.Errorf(abi.ENOENT, "thread %q has no desktop binding", thread)
	}
	return out, nil
}

// adapter hosts the Desktop service in the daemon: it reconciles bindings
// (pause deadlines, fingerprint, mirrors) and collects what retention
// allows on the daemon's sweep rhythm, so a pause_deadline that keeps the
// daemon awake is also acted on.
type adapter struct {
	sv   *Service
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func (x *adapter) Name() string { return Name }

func (x *adapter) Start(ctx context.Context, d *daemon.Daemon) error {
	SetBuildVersion(d.Version)
	x.sv = NewService(d.Store, d.Cfg, d.Home, d.Log)
	x.sv.Sweep = func(ctx context.Context) (sweep.Report, error) { return d.Sweeper.Run(ctx, false) }
	if _, err := x.sv.Reconcile(ctx, daemon.Actor("desktop")); err != nil {
		return err
	}
	ctx, x.stop = context.WithCancel(ctx)
	x.wg.Add(1)
	go x.loop(ctx, d.Cfg.SweepInterval)
	return nil
}

func (x *adapter) loop(ctx context.Context, every time.Duration) {
	defer x.wg.Done()
	t := time.NewTicker(max(every, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := x.sv.Reconcile(ctx, daemon.Actor("desktop")); err != nil && ctx.Err() == nil {
				x.sv.Log.Printf("desktop: reconcile: %v", err)
			}
		}
	}
}

func (x *adapter) Kick() {}

func (x *adapter) Busy(ctx context.Context) (string, bool) { return "", false }

func (x *adapter) Stop() {
	if x.stop != nil {
		x.stop()
	}
	x.wg.Wait()
}

func serviceOf(d *daemon.Daemon) *Service {
	if x, ok := d.Extension(Name).(*adapter); ok && x != nil {
		return x.sv
	}
	return nil
}
