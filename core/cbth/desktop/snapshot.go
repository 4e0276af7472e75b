package desktop

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/cbth/sweep"
	"github.com/cortexfs/cortexfs/core/ids"
)

// The revision-specific files of one snapshot, relative to the inbox.
const (
	ManifestName       = "current-snapshot.json"
	ReadyThreadsName   = "ready-threads.json"
	ArmPendingName     = "arm-pending-bindings.json"
	PauseDueName       = "pause-due-bindings.json"
	BindingsName       = "bindings.json"
	snapshotsDirectory = "snapshots"
)

// ReadyEntry is one ready thread as the bridge sees it, from the file or
// from claim-next-ready alike: the caller prompt token (source_thread_id,
// batch_id, attempt_id, generation, snapshot_revision), the bridge-side
// internal locator snapshot_path and the gating metadata
// requires_artifact_read. Never a payload.
type ReadyEntry struct {
	delivery.ReadyEntry
	SnapshotPath string `json:"snapshot_path"`
}

// ArmPendingEntry is an attempt the bridge must reconcile before anything
// else on its thread: arm_pending since, until, and by which request.
type ArmPendingEntry struct {
	delivery.Token
	SnapshotRevision   string  `json:"snapshot_revision"`
	BindingID          *string `json:"binding_id"`
	CallerAutomationID *string `json:"caller_automation_id"`
	BridgeRequestID    string  `json:"bridge_request_id"`
	ArmPendingSince    string  `json:"arm_pending_since"`
	ArmPendingDeadline string  `json:"arm_pending_deadline"`
	Overdue            bool    `json:"overdue"`
}

// PauseDueEntry is a binding whose armed caller heartbeat may (and, by
// pause_deadline, must) be paused and its quiesce recorded; the most
// urgent deadline comes first.
type PauseDueEntry struct {
	BindingID          string       `json:"binding_id"`
	SourceThreadID     string       `json:"source_thread_id"`
	BindingState       BindingState `json:"binding_state"`
	CallerAutomationID *string      `json:"caller_automation_id"`
	ArmedGeneration    int64        `json:"armed_generation"`
	PauseNotBefore     string       `json:"pause_not_before"`
	PauseDeadline      *string      `json:"pause_deadline"`
	Overdue            bool         `json:"overdue"`
}

// SnapshotFile is the shape of every revision-specific file: each embeds
// the manifest's snapshot_revision, which the bridge must compare.
type SnapshotFile[T any] struct {
	SnapshotRevision string `json:"snapshot_revision"`
	GeneratedAt      string `json:"generated_at"`
	BridgeThreadID   string `json:"bridge_thread_id"`
	Entries          []T    `json:"entries"`
}

// Manifest is current-snapshot.json: the revision, the installation state
// it was computed under and the locators of its files.
type Manifest struct {
	SnapshotRevision string            `json:"snapshot_revision"`
	PublishedAt      string            `json:"published_at"`
	BridgeThreadID   string            `json:"bridge_thread_id"`
	Installation     InstallationView  `json:"installation"`
	Files            map[string]string `json:"files"`
}

type snapshotData struct {
	ready    []ReadyEntry
	pending  []ArmPendingEntry
	pauseDue []PauseDueEntry
	bindings []Binding
}

func snapshotPath(rev string) string { return snapshotsDirectory + "/" + rev + "/" + ReadyThreadsName }

// collectData reads one consistent view: the fair-ready order filtered to
// bindings that allow automatic continuation now, the arm_pending
// attempts, the pause-due bindings and every binding.
func collectData(o *delivery.Op, st InstallationState, observed, bridge, rev string) (*snapshotData, error) {
	d := &snapshotData{ready: []ReadyEntry{}, pending: []ArmPendingEntry{}, pauseDue: []PauseDueEntry{}}
	var err error
	if d.bindings, err = ListBindings(o.Ctx, o.Tx); err != nil {
		return nil, err
	}
	byThread := map[string]*Binding{}
	for i := range d.bindings {
		byThread[d.bindings[i].SourceThreadID] = &d.bindings[i]
	}
	forBridge := func(b *Binding) bool {
		return b != nil && (b.BridgeThreadID == nil || *b.BridgeThreadID == bridge)
	}
	order, err := delivery.ReadyOrderAt(o.Ctx, o.Tx, o.At(), delivery.TargetDesktop)
	if err != nil {
		return nil, err
	}
	for _, e := range order {
		b := byThread[e.SourceThreadID]
		if !forBridge(b) || e.RequiresArtifactRead || len(automaticGate(st, b, observed)) > 0 {
			continue
		}
		d.ready = append(d.ready, ReadyEntry{ReadyEntry: e, SnapshotPath: snapshotPath(rev)})
	}
	rows, err := o.Tx.QueryContext(o.Ctx, `SELECT a.source_thread_id, a.batch_id, a.attempt_id, a.generation,
		COALESCE(a.snapshot_revision,''), COALESCE(a.bridge_request_id,''), COALESCE(a.arm_pending_since,''),
		COALESCE(a.arm_pending_deadline,'') FROM attempts a JOIN batches b ON b.batch_id = a.batch_id
		WHERE a.state = 'arm_pending' AND b.target_kind = 'desktop' ORDER BY a.arm_pending_deadline, a.source_thread_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var e ArmPendingEntry
		if err := rows.Scan(&e.SourceThreadID, &e.BatchID, &e.AttemptID, &e.Generation, &e.SnapshotRevision,
			&e.BridgeRequestID, &e.ArmPendingSince, &e.ArmPendingDeadline); err != nil {
			return nil, err
		}
		b := byThread[e.SourceThreadID]
		if b != nil && !forBridge(b) {
			continue
		}
		if b != nil {
			e.BindingID, e.CallerAutomationID = &b.BindingID, b.CallerAutomationID
		}
		e.Overdue = e.ArmPendingDeadline <= o.At()
		d.pending = append(d.pending, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range d.bindings {
		b := &d.bindings[i]
		if !forBridge(b) || b.ArmedGeneration == nil || b.ArmedGenerationQuiescedAt != nil ||
			b.PauseNotBefore == nil || *b.PauseNotBefore > o.At() {
			continue
		}
		d.pauseDue = append(d.pauseDue, PauseDueEntry{BindingID: b.BindingID, SourceThreadID: b.SourceThreadID,
			BindingState: b.BindingState, CallerAutomationID: b.CallerAutomationID, ArmedGeneration: *b.ArmedGeneration,
			PauseNotBefore: *b.PauseNotBefore, PauseDeadline: b.PauseDeadline,
			Overdue: b.PauseDeadline != nil && *b.PauseDeadline <= o.At()})
	}
	sortPauseDue(d.pauseDue)
	return d, nil
}

func sortPauseDue(es []PauseDueEntry) {
	key := func(e PauseDueEntry) string {
		if e.PauseDeadline == nil {
			return "~" + e.SourceThreadID
		}
		return *e.PauseDeadline + e.SourceThreadID
	}
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && key(es[j]) < key(es[j-1]); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// PreflightRequest is bridge-preflight.
type PreflightRequest struct {
	BridgeThreadID string `json:"bridge_thread_id"`
}

// PreflightResult says what the bridge may now read.
type PreflightResult struct {
	Outcome                 delivery.Outcome `json:"outcome"`
	SnapshotManifestPath    string           `json:"snapshot_manifest_path"`
	SnapshotRevision        string           `json:"snapshot_revision"`
	ReadTransport           *ReadTransport   `json:"read_transport"`
	ReadTransportGeneration int64            `json:"read_transport_generation"`
	Validated               bool             `json:"validated"`
	NotValidatedBecause     []string         `json:"not_validated_because,omitempty"`
	ReadyCount              int              `json:"ready_count"`
	ArmPendingCount         int              `json:"arm_pending_count"`
	PauseDueCount           int              `json:"pause_due_count"`
	Sweep                   sweep.Report     `json:"sweep"`
	Reconcile               ReconcileReport  `json:"reconcile"`
}

// Preflight is every bridge wake's mandatory first step: the deterministic
// overdue sweep (deadlines, auto-close, artifact GC), the Desktop reconcile
// (bindings, envelopes, leases, old revisions), then a fresh snapshot:
// revision-specific files first (each temp + rename, each embedding the
// revision), the manifest last (temp + rename). If any step fails the
// manifest is not replaced and the bridge must not arm from old files.
func (sv *Service) Preflight(ctx context.Context, a audit.Actor, r PreflightRequest) (*PreflightResult, error) {
	if err := validID("--bridge-thread-id", r.BridgeThreadID); err != nil {
		return nil, err
	}
	sv.publish.Lock()
	defer sv.publish.Unlock()
	res := &PreflightResult{Outcome: delivery.OutcomeOK}
	var err error
	if sv.Sweep != nil {
		if res.Sweep, err = sv.Sweep(ctx); err != nil {
			return nil, err
		}
	}
	if res.Reconcile, err = sv.Reconcile(ctx, a); err != nil {
		return nil, err
	}
	if err := sv.ensureInbox(); err != nil {
		return nil, err
	}
	in := sv.Observe()
	observed := in.Fingerprint()
	rev := ids.New(SnapshotPrefix)
	var data *snapshotData
	var view InstallationView
	err = sv.run(ctx, a, func(o *delivery.Op) error {
		st, err := LoadInstallation(o.Ctx, o.Tx)
		if err != nil {
			return err
		}
		view = sv.view(st, in)
		if data, err = collectData(o, st, observed, r.BridgeThreadID, rev); err != nil {
			return err
		}
		for _, e := range data.ready {
			if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE attempts SET snapshot_path = ? WHERE attempt_id = ?`,
				e.SnapshotPath, e.AttemptID); err != nil {
				return err
			}
		}
		_, err = o.Tx.ExecContext(o.Ctx, `INSERT INTO desktop_snapshots(snapshot_revision, bridge_thread_id, state,
			ready_count, arm_pending_count, pause_due_count, created_at) VALUES (?,?,'writing',?,?,?,?)`,
			rev, r.BridgeThreadID, len(data.ready), len(data.pending), len(data.pauseDue), o.At())
		return err
	})
	if err != nil {
		return nil, err
	}
	werr := sv.writeSnapshot(rev, r.BridgeThreadID, view, data)
	err = sv.run(ctx, a, func(o *delivery.Op) error {
		if werr != nil {
			_, err := o.Tx.ExecContext(o.Ctx, `UPDATE desktop_snapshots SET state = 'failed' WHERE snapshot_revision = ?`, rev)
			return err
		}
		if _, err := o.Tx.ExecContext(o.Ctx, `UPDATE desktop_snapshots SET superseded_at = ? WHERE state = 'published'
			AND superseded_at IS NULL`, o.At()); err != nil {
			return err
		}
		_, err := o.Tx.ExecContext(o.Ctx, `UPDATE desktop_snapshots SET state = 'published', published_at = ?
			WHERE snapshot_revision = ?`, o.At(), rev)
		return err
	})
	if werr != nil {
		return nil, abi.Errorf(abi.EIO, "desktop: snapshot %s not published: %v", rev, werr)
	}
	if err != nil {
		return nil, err
	}
	if err := sv.publishInstallation(view); err != nil {
		return nil, err
	}
	res.SnapshotManifestPath, res.SnapshotRevision = filepath.Join(sv.Inbox(), ManifestName), rev
	res.ReadTransport, res.ReadTransportGeneration = view.ReadTransport, view.ReadTransportGeneration
	res.Validated, res.NotValidatedBecause = view.Validated, view.NotValidatedBecause
	res.ReadyCount, res.ArmPendingCount, res.PauseDueCount = len(data.ready), len(data.pending), len(data.pauseDue)
	return res, nil
}

func (sv *Service) writeSnapshot(rev, bridge string, view InstallationView, d *snapshotData) error {
	dir := filepath.Join(sv.Inbox(), snapshotsDirectory, rev)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	at := nowTS(sv.Store)
	files := map[string]any{
		ReadyThreadsName: SnapshotFile[ReadyEntry]{rev, at, bridge, d.ready},
		ArmPendingName:   SnapshotFile[ArmPendingEntry]{rev, at, bridge, d.pending},
		PauseDueName:     SnapshotFile[PauseDueEntry]{rev, at, bridge, d.pauseDue},
		BindingsName:     SnapshotFile[Binding]{rev, at, bridge, d.bindings},
	}
	m := Manifest{SnapshotRevision: rev, PublishedAt: at, BridgeThreadID: bridge, Installation: view,
		Files: map[string]string{}}
	for _, name := range []string{ReadyThreadsName, ArmPendingName, PauseDueName, BindingsName} {
		b, _ := json.MarshalIndent(files[name], "", "  ")
		if err := atomicfile.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o600); err != nil {
			return err
		}
		m.Files[strings.TrimSuffix(strings.ReplaceAll(name, "-", "_"), ".json")] = snapshotsDirectory + "/" + rev + "/" + name
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return atomicfile.WriteFile(filepath.Join(sv.Inbox(), ManifestName), append(b, '\n'), 0o600)
}

// collectSnapshots removes revision directories no reader can still need:
// a revision is needed from its publication until snapshot_reader_grace
// after a newer one replaced it in the manifest (a bridge that read the old
// manifest just before may still be reading its files). Failed or
// abandoned writes and unknown directories go after the same grace.
func (sv *Service) collectSnapshots(ctx context.Context, rep *ReconcileReport) error {
	cutoff := store.TS(sv.Store.Now().Add(-sv.Cfg.Desktop.SnapshotReaderGrace))
	rows, err := sv.Store.DB.QueryContext(ctx, `SELECT snapshot_revision FROM desktop_snapshots
		WHERE (state = 'published' AND superseded_at IS NOT NULL AND superseded_at <= ?)
		OR (state IN ('failed','writing') AND created_at <= ?) ORDER BY snapshot_revision`, cutoff, cutoff)
	if err != nil {
		return err
	}
	var revs []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			rows.Close()
			return err
		}
		revs = append(revs, r)
	}
	rows.Close()
	root := filepath.Join(sv.Inbox(), snapshotsDirectory)
	for _, r := range revs {
		if err := removeRevision(root, r); err != nil {
			return err
		}
		if _, err := sv.Store.DB.ExecContext(ctx, `UPDATE desktop_snapshots SET state = 'collected', collected_at = ?
			WHERE snapshot_revision = ?`, nowTS(sv.Store), r); err != nil {
			return err
		}
		rep.SnapshotsCollected++
	}
	return sv.collectOrphanRevisions(ctx, root, cutoff)
}

func removeRevision(root, rev string) error {
	if !strings.HasPrefix(rev, SnapshotPrefix) || strings.ContainsAny(rev, "/.") {
		return abi.Errorf(abi.EIO, "desktop: refusing to remove snapshot %q", rev)
	}
	p := filepath.Join(root, rev)
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil || !fi.IsDir() {
		return abi.Errorf(abi.EIO, "desktop: snapshot %s is not a directory", p)
	}
	return os.RemoveAll(p)
}

// collectOrphanRevisions removes snapshot directories the store has no
// live row for (a daemon killed between mkdir and its first commit), once
// they are older than the grace.
func (sv *Service) collectOrphanRevisions(ctx context.Context, root, cutoff string) error {
	ents, err := os.ReadDir(root)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, SnapshotPrefix) {
			continue
		}
		var state string
		err := sv.Store.DB.QueryRowContext(ctx, `SELECT state FROM desktop_snapshots WHERE snapshot_revision = ?`, name).Scan(&state)
		if err == nil && state != "collected" {
			continue
		}
		if err != nil && !store.IsNoRows(err) {
			return err
		}
		fi, err := e.Info()
		if err != nil || store.TS(fi.ModTime()) > cutoff {
			continue
		}
		if err := removeRevision(root, name); err != nil {
			return err
		}
	}
	return nil
}

// currentRevision is the revision the manifest names now ("" if none yet).
func currentRevision(ctx context.Context, q Querier) (string, error) {
	var rev string
	err := q.QueryRowContext(ctx, `SELECT snapshot_revision FROM desktop_snapshots WHERE state = 'published'
		AND superseded_at IS NULL ORDER BY published_at DESC LIMIT 1`).Scan(&rev)
	if store.IsNoRows(err) {
		return "", nil
	}
	return rev, err
}
