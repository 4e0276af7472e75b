package desktop

import (
	"context"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// ListResult is list-arm-pending's and list-pause-due's answer: the same
// schema as the revision files, read live under the current manifest
// revision.
type ListResult[T any] struct {
	Outcome delivery.Outcome `json:"outcome"`
	SnapshotFile[T]
	Why string `json:"why,omitempty"`
}

// ClaimResult is claim-next-ready's answer: the first entry of the
// fair-ready order, or none.
type ClaimResult struct {
	Outcome          delivery.Outcome `json:"outcome"`
	SnapshotRevision string           `json:"snapshot_revision"`
	Ready            bool             `json:"ready"`
	Entry            *ReadyEntry      `json:"entry"`
	Why              string           `json:"why,omitempty"`
}

// peek computes the bridge's view without changing anything; before the
// first bridge-preflight there is no revision to read under
// (transient_not_ready: run bridge-preflight first).
func (sv *Service) peek(ctx context.Context, bridge string) (*snapshotData, string, string, error) {
	if err := validID("--bridge-thread-id", bridge); err != nil {
		return nil, "", "", err
	}
	rev, err := currentRevision(ctx, sv.Store.DB)
	if err != nil || rev == "" {
		return nil, "", "", err
	}
	in := sv.Observe()
	var d *snapshotData
	err = sv.run(ctx, audit.Actor{Name: "peek"}, func(o *delivery.Op) error {
		st, err := LoadInstallation(o.Ctx, o.Tx)
		if err != nil {
			return err
		}
		d, err = collectData(o, st, in.Fingerprint(), bridge, rev)
		return err
	})
	return d, rev, nowTS(sv.Store), err
}

const noSnapshot = "no snapshot published yet: run cbth desktop bridge-preflight first"

// ListArmPending is the helper_cli_read twin of arm-pending-bindings.json.
func (sv *Service) ListArmPending(ctx context.Context, bridge string) (*ListResult[ArmPendingEntry], error) {
	d, rev, at, err := sv.peek(ctx, bridge)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return &ListResult[ArmPendingEntry]{Outcome: delivery.OutcomeTransientNotReady, Why: noSnapshot,
			SnapshotFile: SnapshotFile[ArmPendingEntry]{BridgeThreadID: bridge, Entries: []ArmPendingEntry{}}}, nil
	}
	return &ListResult[ArmPendingEntry]{Outcome: delivery.OutcomeOK,
		SnapshotFile: SnapshotFile[ArmPendingEntry]{rev, at, bridge, d.pending}}, nil
}

// ListPauseDue is the helper_cli_read twin of pause-due-bindings.json.
func (sv *Service) ListPauseDue(ctx context.Context, bridge string) (*ListResult[PauseDueEntry], error) {
	d, rev, at, err := sv.peek(ctx, bridge)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return &ListResult[PauseDueEntry]{Outcome: delivery.OutcomeTransientNotReady, Why: noSnapshot,
			SnapshotFile: SnapshotFile[PauseDueEntry]{BridgeThreadID: bridge, Entries: []PauseDueEntry{}}}, nil
	}
	return &ListResult[PauseDueEntry]{Outcome: delivery.OutcomeOK,
		SnapshotFile: SnapshotFile[PauseDueEntry]{rev, at, bridge, d.pauseDue}}, nil
}

// ClaimNextReady is a pure peek despite its name (seed): no reservation,
// no head move, no attempt count, no cursor move, no durable change.
func (sv *Service) ClaimNextReady(ctx context.Context, bridge string) (*ClaimResult, error) {
	d, rev, _, err := sv.peek(ctx, bridge)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return &ClaimResult{Outcome: delivery.OutcomeTransientNotReady, Why: noSnapshot}, nil
	}
	res := &ClaimResult{Outcome: delivery.OutcomeOK, SnapshotRevision: rev}
	if len(d.ready) > 0 {
		res.Ready, res.Entry = true, &d.ready[0]
	}
	return res, nil
}
