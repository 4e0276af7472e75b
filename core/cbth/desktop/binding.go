package desktop

import (
	"context"
	"fmt"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

var checkPrivateDir = home.CheckPrivateDir

// Binding is one desktop thread binding (seed 9 "关键字段") plus why it is
// degraded, when it is.
type Binding struct {
	BindingID                 string         `json:"binding_id"`
	SourceThreadID            string         `json:"source_thread_id"`
	BindingState              BindingState   `json:"binding_state"`
	CallerAutomationID        *string        `json:"caller_automation_id"`
	ArmedGeneration           *int64         `json:"armed_generation"`
	ArmedGenerationQuiescedAt *string        `json:"armed_generation_quiesced_at"`
	PauseNotBefore            *string        `json:"pause_not_before"`
	PauseDeadline             *string        `json:"pause_deadline"`
	BridgeThreadID            *string        `json:"bridge_thread_id"`
	ReadTransport             *ReadTransport `json:"read_transport"`
	ReadTransportGeneration   *int64         `json:"read_transport_generation"`
	ReadTransportCapability   Capability     `json:"read_transport_capability"`
	ArtifactReadCapability    Capability     `json:"artifact_read_capability"`
	WritebackCapability       Capability     `json:"writeback_capability"`
	ValidationFingerprint     *string        `json:"validation_fingerprint"`
	CreatedAt                 string         `json:"created_at"`
	UpdatedAt                 string         `json:"updated_at"`
	LastVerifiedAt            *string        `json:"last_verified_at"`
	DegradedReason            *string        `json:"degraded_reason"`
	DegradedAt                *string        `json:"degraded_at"`
}

const bindingColumns = `binding_id, source_thread_id, binding_state, caller_automation_id, armed_generation,
	armed_generation_quiesced_at, pause_not_before, pause_deadline, bridge_thread_id, read_transport,
	read_transport_generation, read_transport_capability, artifact_read_capability, writeback_capability,
	validation_fingerprint, created_at, updated_at, last_verified_at, degraded_reason, degraded_at`

func scanBinding(row interface{ Scan(...any) error }) (*Binding, error) {
	b := &Binding{}
	err := row.Scan(&b.BindingID, &b.SourceThreadID, &b.BindingState, &b.CallerAutomationID, &b.ArmedGeneration,
		&b.ArmedGenerationQuiescedAt, &b.PauseNotBefore, &b.PauseDeadline, &b.BridgeThreadID, &b.ReadTransport,
		&b.ReadTransportGeneration, &b.ReadTransportCapability, &b.ArtifactReadCapability, &b.WritebackCapability,
		&b.ValidationFingerprint, &b.CreatedAt, &b.UpdatedAt, &b.LastVerifiedAt, &b.DegradedReason, &b.DegradedAt)
	return b, err
}

// GetBinding loads the thread's binding; nil when it has none.
func GetBinding(ctx context.Context, q Querier, thread string) (*Binding, error) {
	b, err := scanBinding(q.QueryRowContext(ctx, `SELECT `+bindingColumns+` FROM desktop_bindings
		WHERE source_thread_id = ?`, thread))
	if store.IsNoRows(err) {
		return nil, nil
	}
	return b, err
}

// ListBindings loads every binding in thread order.
func ListBindings(ctx context.Context, q Querier) ([]Binding, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+bindingColumns+` FROM desktop_bindings ORDER BY source_thread_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Binding{}
	for rows.Next() {
		b, err := scanBinding(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *b)
	}
	return out, rows.Err()
}

// mirrorMismatch says how the binding's mirror differs from the
// installation state ("" when it matches).
func (b *Binding) mirrorMismatch(st InstallationState) string {
	var diff []string
	if st.ReadTransport == nil || b.ReadTransport == nil || *b.ReadTransport != *st.ReadTransport {
		diff = append(diff, "read_transport")
	}
	if b.ReadTransportGeneration == nil || *b.ReadTransportGeneration != st.ReadTransportGeneration {
		diff = append(diff, "read_transport_generation")
	}
	if st.ValidationFingerprint == nil || b.ValidationFingerprint == nil || *b.ValidationFingerprint != *st.ValidationFingerprint {
		diff = append(diff, "validation_fingerprint")
	}
	return strings.Join(diff, ", ")
}

// quiesced reports whether the binding has no armed generation that is
// still unproven quiet (the fresh-arm gate).
func (b *Binding) quiesced() bool {
	return b.ArmedGeneration == nil || b.ArmedGenerationQuiescedAt != nil
}

// casBinding moves a binding from one state to another with extra column
// assignments and its audit row; a binding no longer in from changes
// nothing (ok=false).
func casBinding(o *delivery.Op, b *Binding, from, to BindingState, reason string, sets map[string]any) (bool, error) {
	q := `UPDATE desktop_bindings SET binding_state = ?, updated_at = ?`
	args := []any{to, o.At()}
	for _, col := range sortedKeys(sets) {
		q += ", " + col + " = ?"
		args = append(args, sets[col])
	}
	q += ` WHERE binding_id = ? AND binding_state = ?`
	res, err := o.Tx.ExecContext(o.Ctx, q, append(args, b.BindingID, from)...)
	if err != nil {
		return false, fmt.Errorf("desktop: binding %s %s->%s: %w", b.BindingID, from, to, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return false, nil
	}
	detail := map[string]any{}
	for k, v := range sets {
		detail[k] = v
	}
	return true, o.Audit(audit.Entry{Action: "binding.transition", EntityKind: "binding", EntityID: b.BindingID,
		SourceThreadID: b.SourceThreadID, From: string(from), To: string(to), Reason: reason,
		Outcome: string(delivery.OutcomeOK), Detail: detail})
}

// degrade moves a bound binding to degraded with its reason and ends the
// thread's live attempt: abandoned, automatic replay kept, except an
// arm_pending attempt whose arm cannot be proven either way (manual). The
// pause window is cleared (nothing can verify it any more); an unquiesced
// armed generation stays fenced until a repair. A head batch that has not
// crossed the boundary stays open for the operator.
func degrade(o *delivery.Op, b *Binding, reason string) (bool, error) {
	ok, err := casBinding(o, b, Bound, Degraded, reason, map[string]any{"degraded_reason": reason,
		"degraded_at": o.At(), "pause_not_before": nil, "pause_deadline": nil})
	if err != nil || !ok {
		return ok, err
	}
	return true, abandonLive(o, b.SourceThreadID, "binding degraded: "+reason)
}

func abandonLive(o *delivery.Op, thread, reason string) error {
	head, err := delivery.InspectHead(o.Ctx, o.Tx, thread)
	if err != nil || head == nil || head.HeadAttempt == nil || head.HeadAttempt.State.Terminal() {
		return err
	}
	tok := delivery.Token{SourceThreadID: thread, BatchID: head.BatchID, AttemptID: head.HeadAttempt.AttemptID,
		Generation: head.HeadAttempt.Generation}
	_, err = delivery.Abandon(o, tok, head.HeadAttempt.State == delivery.AttemptArmPending, reason)
	return err
}

// degradeMismatched degrades every bound binding whose mirror differs from
// st (after an installation repair) and returns their ids.
func degradeMismatched(o *delivery.Op, st InstallationState) ([]string, error) {
	bs, err := ListBindings(o.Ctx, o.Tx)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for i := range bs {
		b := &bs[i]
		if b.BindingState != Bound {
			continue
		}
		if diff := b.mirrorMismatch(st); diff != "" {
			if ok, err := degrade(o, b, "mirror differs from the installation state: "+diff); err != nil {
				return nil, err
			} else if ok {
				out = append(out, b.BindingID)
			}
		}
	}
	return out, nil
}

// BindingRepairRequest is `cbth desktop binding repair` (also the bootstrap).
type BindingRepairRequest struct {
	SourceThreadID     string `json:"source_thread_id"`
	CallerAutomationID string `json:"caller_automation_id"`
	BridgeThreadID     string `json:"bridge_thread_id,omitempty"`
}

// BindingRepairResult echoes the mirrored capabilities (in Binding) and,
// when the automation was replaced, whether the old one was proven quiesced
// and whether delivery moved to a fresh attempt/generation.
type BindingRepairResult struct {
	Outcome                     delivery.Outcome `json:"outcome"`
	Changed                     bool             `json:"changed"`
	Binding                     *Binding         `json:"binding"`
	ReadTransportCapability     Capability       `json:"read_transport_capability"`
	ArtifactReadCapability      Capability       `json:"artifact_read_capability"`
	WritebackCapability         Capability       `json:"writeback_capability"`
	PreviousCallerAutomationID  *string          `json:"previous_caller_automation_id"`
	AutomationReplaced          bool             `json:"automation_replaced"`
	PreviousAutomationQuiesced  bool             `json:"previous_automation_quiesced"`
	FreshAttemptForced          bool             `json:"fresh_attempt_forced"`
	FreshAttempt                *delivery.Token  `json:"fresh_attempt,omitempty"`
	FreshAttemptOutcome         delivery.Outcome `json:"fresh_attempt_outcome,omitempty"`
	NotAutomaticBecause         []string         `json:"not_automatic_because,omitempty"`
	InstallationReadTransport   *ReadTransport   `json:"installation_read_transport"`
	InstallationTransportGen    int64            `json:"installation_read_transport_generation"`
	InstallationFingerprintSeen string           `json:"observed_validation_fingerprint"`
}

// RepairBinding binds (or re-binds) a thread to its caller automation,
// mirroring the installation state; it never writes a capability
// conclusion of its own. Repeating it on a bound, matching binding with the
// same automation is a no-op. When the automation is replaced, or the old
// armed generation is not proven quiesced, or the thread's attempt was
// abandoned, the head batch moves to a fresh attempt and generation so a
// late wake of the old automation can only meet a stale token.
func (sv *Service) RepairBinding(ctx context.Context, a audit.Actor, r BindingRepairRequest) (*BindingRepairResult, error) {
	if err := validID("--source-thread-id", r.SourceThreadID); err != nil {
		return nil, err
	}
	if err := validID("--caller-automation-id", r.CallerAutomationID); err != nil {
		return nil, err
	}
	if r.BridgeThreadID != "" {
		if err := validID("--bridge-thread-id", r.BridgeThreadID); err != nil {
			return nil, err
		}
	}
	fp := sv.Observe().Fingerprint()
	res := &BindingRepairResult{Outcome: delivery.OutcomeOK, InstallationFingerprintSeen: fp}
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		st, err := LoadInstallation(o.Ctx, o.Tx)
		if err != nil {
			return err
		}
		res.InstallationReadTransport, res.InstallationTransportGen = st.ReadTransport, st.ReadTransportGeneration
		res.ReadTransportCapability, res.ArtifactReadCapability, res.WritebackCapability =
			st.ReadTransportCapability, st.ArtifactReadCapability, st.WritebackCapability
		if st.ReadTransport == nil || st.ValidationFingerprint == nil {
			res.Outcome = delivery.OutcomeBindingInvalid
			res.NotAutomaticBecause = st.whyNot(fp)
			return nil
		}
		cur, err := GetBinding(o.Ctx, o.Tx, r.SourceThreadID)
		if err != nil {
			return err
		}
		if cur == nil {
			return sv.createBinding(o, st, r, res)
		}
		return sv.rebind(o, st, cur, r, res)
	})
	if err != nil {
		return nil, err
	}
	if res.Outcome == delivery.OutcomeOK {
		b, err := GetBinding(ctx, sv.Store.DB, r.SourceThreadID)
		if err != nil {
			return nil, err
		}
		res.Binding = b
		st, err := LoadInstallation(ctx, sv.Store.DB)
		if err != nil {
			return nil, err
		}
		res.NotAutomaticBecause = automaticGate(st, b, fp)
	}
	return res, nil
}

func (sv *Service) createBinding(o *delivery.Op, st InstallationState, r BindingRepairRequest, res *BindingRepairResult) error {
	id := ids.New(BindingPrefix)
	var bridge any
	if r.BridgeThreadID != "" {
		bridge = r.BridgeThreadID
	}
	if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO desktop_bindings(binding_id, source_thread_id, binding_state,
		caller_automation_id, bridge_thread_id, read_transport, read_transport_generation, read_transport_capability,
		artifact_read_capability, writeback_capability, validation_fingerprint, created_at, updated_at, last_verified_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, id, r.SourceThreadID, Bound, r.CallerAutomationID, bridge,
		*st.ReadTransport, st.ReadTransportGeneration, st.ReadTransportCapability, st.ArtifactReadCapability,
		st.WritebackCapability, *st.ValidationFingerprint, o.At(), o.At(), o.At()); err != nil {
		return err
	}
	res.Changed, res.PreviousAutomationQuiesced = true, true
	if err := o.Audit(audit.Entry{Action: "binding.bootstrap", EntityKind: "binding", EntityID: id,
		SourceThreadID: r.SourceThreadID, To: string(Bound), Outcome: string(delivery.OutcomeOK),
		Detail: map[string]any{"caller_automation_id": r.CallerAutomationID,
			"read_transport_generation": st.ReadTransportGeneration}}); err != nil {
		return err
	}
	// A thread whose batches waited unbound may have an abandoned or
	// never-armed attempt: give it a fresh generation bound to this binding.
	return sv.freshIfAbandoned(o, r.SourceThreadID, res)
}

func (sv *Service) rebind(o *delivery.Op, st InstallationState, cur *Binding, r BindingRepairRequest, res *BindingRepairResult) error {
	res.PreviousCallerAutomationID = cur.CallerAutomationID
	replaced := cur.CallerAutomationID == nil || *cur.CallerAutomationID != r.CallerAutomationID
	bridgeSame := r.BridgeThreadID == "" || (cur.BridgeThreadID != nil && *cur.BridgeThreadID == r.BridgeThreadID)
	if cur.BindingState == Bound && !replaced && bridgeSame && cur.mirrorMismatch(st) == "" &&
		cur.ReadTransportCapability == st.ReadTransportCapability && cur.ArtifactReadCapability == st.ArtifactReadCapability &&
		cur.WritebackCapability == st.WritebackCapability {
		res.PreviousAutomationQuiesced = cur.quiesced()
		return nil
	}
	res.Changed, res.AutomationReplaced = true, replaced && cur.CallerAutomationID != nil
	res.PreviousAutomationQuiesced = cur.quiesced()
	sets := map[string]any{"caller_automation_id": r.CallerAutomationID, "read_transport": *st.ReadTransport,
		"read_transport_generation": st.ReadTransportGeneration, "read_transport_capability": st.ReadTransportCapability,
		"artifact_read_capability": st.ArtifactReadCapability, "writeback_capability": st.WritebackCapability,
		"validation_fingerprint": *st.ValidationFingerprint, "last_verified_at": o.At(), "degraded_reason": nil,
		"degraded_at": nil}
	if r.BridgeThreadID != "" {
		sets["bridge_thread_id"] = r.BridgeThreadID
	}
	switch {
	case replaced:
		// The new automation was never armed by cbth: no generation of it
		// needs a pause. The old one, if it still fires, carries an old
		// generation and meets a stale token.
		sets["armed_generation"], sets["armed_generation_quiesced_at"] = nil, nil
		sets["pause_not_before"], sets["pause_deadline"] = nil, nil
	case !cur.quiesced():
		// Same automation, armed generation not proven quiet: the bridge may
		// pause it now and must verify that within a fresh window.
		sets["pause_not_before"] = o.At()
		sets["pause_deadline"] = store.TS(o.Now.Add(o.Cfg.Desktop.PauseDeadlineWindow))
	}
	reason := fmt.Sprintf("binding repair (automation %s)", r.CallerAutomationID)
	ok, err := casBinding(o, cur, cur.BindingState, Bound, reason, sets)
	if err != nil {
		return err
	}
	if !ok {
		return abi.Errorf(abi.EIO, "desktop: binding %s changed under its own transaction", cur.BindingID)
	}
	if replaced || !cur.quiesced() {
		out, tok, err := delivery.ForceFreshAttempt(o, r.SourceThreadID, reason+": fresh generation")
		if err != nil {
			return err
		}
		res.FreshAttemptOutcome = out
		if out == delivery.OutcomeOK && tok.AttemptID != "" {
			res.FreshAttemptForced, res.FreshAttempt = true, &tok
		}
		return nil
	}
	return sv.freshIfAbandoned(o, r.SourceThreadID, res)
}

// freshIfAbandoned gives the head batch a fresh attempt when its attempt
// ended while the thread could not be delivered (degraded or unbound).
func (sv *Service) freshIfAbandoned(o *delivery.Op, thread string, res *BindingRepairResult) error {
	head, err := delivery.InspectHead(o.Ctx, o.Tx, thread)
	if err != nil || head == nil || head.HeadAttempt == nil || head.HeadAttempt.State != delivery.AttemptAbandoned ||
		head.ReplayPolicy != delivery.ReplayAutomatic {
		return err
	}
	out, tok, err := delivery.ForceFreshAttempt(o, thread, "binding repaired: fresh generation")
	if err != nil {
		return err
	}
	res.FreshAttemptOutcome = out
	if out == delivery.OutcomeOK && tok.AttemptID != "" {
		res.FreshAttemptForced, res.FreshAttempt = true, &tok
	}
	return nil
}

// UnbindRequest is `cbth desktop binding unbind`.
type UnbindRequest struct {
	SourceThreadID   string `json:"source_thread_id"`
	DeleteAutomation *bool  `json:"delete_automation"`
}

// UnbindResult is its answer.
type UnbindResult struct {
	Outcome                    delivery.Outcome `json:"outcome"`
	Binding                    *Binding         `json:"binding"`
	PreviousCallerAutomationID *string          `json:"previous_caller_automation_id"`
	AutomationDeleted          bool             `json:"automation_deleted"`
}

// Unbind stops automatic delivery to the thread (jobs may still be
// submitted; batches wait for a new binding or the operator). With
// --delete-automation true the operator states the caller automation is
// deleted: its armed generation counts as quiesced and the id is dropped.
// With false the automation id is kept and its quiesce stays unproven.
func (sv *Service) Unbind(ctx context.Context, a audit.Actor, r UnbindRequest) (*UnbindResult, error) {
	if err := validID("--source-thread-id", r.SourceThreadID); err != nil {
		return nil, err
	}
	if r.DeleteAutomation == nil {
		return nil, errInvalid("--delete-automation true|false is required")
	}
	res := &UnbindResult{Outcome: delivery.OutcomeOK}
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		cur, err := GetBinding(o.Ctx, o.Tx, r.SourceThreadID)
		if err != nil {
			return err
		}
		if cur == nil {
			return abi.Errorf(abi.ENOENT, "thread %q has no desktop binding", r.SourceThreadID)
		}
		res.PreviousCallerAutomationID = cur.CallerAutomationID
		sets := map[string]any{"pause_not_before": nil, "pause_deadline": nil}
		if *r.DeleteAutomation {
			res.AutomationDeleted = true
			sets["caller_automation_id"] = nil
			if cur.ArmedGeneration != nil && cur.ArmedGenerationQuiescedAt == nil {
				sets["armed_generation_quiesced_at"] = o.At()
			}
		}
		if cur.BindingState == Unbound && !*r.DeleteAutomation {
			return nil
		}
		ok, err := casBinding(o, cur, cur.BindingState, Unbound,
			fmt.Sprintf("operator unbind (delete-automation=%v)", *r.DeleteAutomation), sets)
		if err != nil || !ok {
			return err
		}
		return abandonLive(o, r.SourceThreadID, "binding unbound")
	})
	if err != nil {
		return nil, err
	}
	res.Binding, err = GetBinding(ctx, sv.Store.DB, r.SourceThreadID)
	return res, err
}

// automaticGate lists why automatic continuation is not allowed for b (nil
// when it is): bound, mirror equal to the installation state, read and
// writeback validated, fingerprint unchanged.
func automaticGate(st InstallationState, b *Binding, observed string) []string {
	why := st.whyNot(observed)
	switch {
	case b == nil:
		return append(why, "no desktop binding")
	case b.BindingState != Bound:
		r := "binding is " + string(b.BindingState)
		if b.DegradedReason != nil {
			r += ": " + *b.DegradedReason
		}
		why = append(why, r)
	}
	if d := b.mirrorMismatch(st); d != "" {
		why = append(why, "binding mirror differs from the installation state: "+d)
	}
	return why
}
