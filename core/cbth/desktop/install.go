package desktop

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// InstallationState is the singleton desktop_installation_state: the only
// authority for installation-wide transport and capability conclusions.
type InstallationState struct {
	ReadTransport              *ReadTransport  `json:"read_transport"`
	ReadTransportGeneration    int64           `json:"read_transport_generation"`
	ReadTransportCapability    Capability      `json:"read_transport_capability"`
	ArtifactReadCapability     Capability      `json:"artifact_read_capability"`
	WritebackCapability        Capability      `json:"writeback_capability"`
	ValidationFingerprint      *string         `json:"validation_fingerprint"`
	ValidatedAt                *string         `json:"validated_at"`
	UpdatedByBootstrapOrRepair *string         `json:"updated_by_bootstrap_or_repair"`
	UpdatedAt                  *string         `json:"updated_at"`
	FingerprintInputs          json.RawMessage `json:"validation_fingerprint_inputs,omitempty"`
}

// Querier is a *sql.DB or *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// LoadInstallation reads the singleton; an installation never repaired is
// all unknown with no transport and generation 0.
func LoadInstallation(ctx context.Context, q Querier) (InstallationState, error) {
	st := InstallationState{ReadTransportCapability: CapUnknown, ArtifactReadCapability: CapUnknown,
		WritebackCapability: CapUnknown}
	var inputs sql.NullString
	err := q.QueryRowContext(ctx, `SELECT read_transport, read_transport_generation, read_transport_capability,
		artifact_read_capability, writeback_capability, validation_fingerprint, validated_at,
		updated_by_bootstrap_or_repair, updated_at, fingerprint_inputs_json FROM desktop_installation_state
		WHERE singleton = 1`).Scan(&st.ReadTransport, &st.ReadTransportGeneration, &st.ReadTransportCapability,
		&st.ArtifactReadCapability, &st.WritebackCapability, &st.ValidationFingerprint, &st.ValidatedAt,
		&st.UpdatedByBootstrapOrRepair, &st.UpdatedAt, &inputs)
	if store.IsNoRows(err) {
		return st, nil
	}
	if inputs.Valid {
		st.FingerprintInputs = json.RawMessage(inputs.String)
	}
	return st, err
}

// InstallationView is the state with what the daemon observes now.
type InstallationView struct {
	InstallationState
	ObservedValidationFingerprint string            `json:"observed_validation_fingerprint"`
	ObservedFingerprintInputs     FingerprintInputs `json:"observed_validation_fingerprint_inputs"`
	FingerprintMatches            bool              `json:"fingerprint_matches"`
	// Validated is the effective conclusion: read transport and writeback
	// validated on this generation and the fingerprint unchanged.
	Validated           bool     `json:"validated"`
	NotValidatedBecause []string `json:"not_validated_because,omitempty"`
	PublishedPath       string   `json:"published_path"`
}

func (sv *Service) view(st InstallationState, in FingerprintInputs) InstallationView {
	v := InstallationView{InstallationState: st, ObservedFingerprintInputs: in,
		ObservedValidationFingerprint: in.Fingerprint(), PublishedPath: sv.installationFile()}
	v.FingerprintMatches = st.ValidationFingerprint != nil && *st.ValidationFingerprint == v.ObservedValidationFingerprint
	v.NotValidatedBecause = st.whyNot(v.ObservedValidationFingerprint)
	v.Validated = len(v.NotValidatedBecause) == 0
	return v
}

// whyNot lists why automatic continuation is not validated installation-wide.
func (st InstallationState) whyNot(observed string) []string {
	var why []string
	if st.ReadTransport == nil {
		why = append(why, "no read_transport: run cbth desktop installation-state repair")
	}
	if st.ReadTransportCapability != CapValidated {
		why = append(why, "read_transport_capability is "+string(st.ReadTransportCapability))
	}
	if st.WritebackCapability != CapValidated {
		why = append(why, "writeback_capability is "+string(st.WritebackCapability))
	}
	if st.ValidationFingerprint == nil || *st.ValidationFingerprint != observed {
		durable := "none"
		if st.ValidationFingerprint != nil {
			durable = *st.ValidationFingerprint
		}
		why = append(why, fmt.Sprintf("validation_fingerprint %s differs from the observed %s", durable, observed))
	}
	return why
}

// Installation returns the current view.
func (sv *Service) Installation(ctx context.Context) (InstallationView, error) {
	st, err := LoadInstallation(ctx, sv.Store.DB)
	return sv.view(st, sv.Observe()), err
}

// RepairRequest is `cbth desktop installation-state repair`. A capability
// flag not given is written as unknown.
type RepairRequest struct {
	ReadTransport           ReadTransport `json:"read_transport"`
	ReadTransportCapability *Capability   `json:"read_transport_capability,omitempty"`
	ArtifactReadCapability  *Capability   `json:"artifact_read_capability,omitempty"`
	WritebackCapability     *Capability   `json:"writeback_capability,omitempty"`
}

// RepairResult is its answer.
type RepairResult struct {
	Outcome          delivery.Outcome `json:"outcome"`
	Changed          bool             `json:"changed"`
	Installation     InstallationView `json:"installation"`
	DegradedBindings []string         `json:"degraded_bindings"`
}

func capOr(c *Capability) Capability {
	if c == nil {
		return CapUnknown
	}
	return *c
}

func (r RepairRequest) validate() error {
	if r.ReadTransport != DirectFileRead && r.ReadTransport != HelperCLIRead {
		return errInvalid("--read-transport must be direct_file_read or helper_cli_read, not %q", r.ReadTransport)
	}
	for name, c := range map[string]*Capability{"--read-transport-capability": r.ReadTransportCapability,
		"--artifact-read-capability": r.ArtifactReadCapability, "--writeback-capability": r.WritebackCapability} {
		if c != nil && !validCapability(*c) {
			return errInvalid("%s must be unknown, validated or unavailable, not %q", name, *c)
		}
	}
	return nil
}

// RepairInstallation is the only writer of installation-wide conclusions.
// The same transport, capabilities and observed fingerprint as now is a
// no-op (no generation bump, validated_at kept). Any real change bumps
// read_transport_generation, so conclusions of the old generation are void,
// records the observed fingerprint, sets validated_at when a capability is
// validated (clears it otherwise), and degrades every bound binding whose
// mirror no longer matches. The published file follows the commit.
func (sv *Service) RepairInstallation(ctx context.Context, a audit.Actor, r RepairRequest) (*RepairResult, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	in := sv.Observe()
	fp := in.Fingerprint()
	inputs, _ := json.Marshal(in)
	res := &RepairResult{Outcome: delivery.OutcomeOK, DegradedBindings: []string{}}
	rc, ac, wc := capOr(r.ReadTransportCapability), capOr(r.ArtifactReadCapability), capOr(r.WritebackCapability)
	err := sv.run(ctx, a, func(o *delivery.Op) error {
		cur, err := LoadInstallation(o.Ctx, o.Tx)
		if err != nil {
			return err
		}
		same := cur.ReadTransport != nil && *cur.ReadTransport == r.ReadTransport && cur.ReadTransportCapability == rc &&
			cur.ArtifactReadCapability == ac && cur.WritebackCapability == wc &&
			cur.ValidationFingerprint != nil && *cur.ValidationFingerprint == fp
		if same {
			return nil
		}
		res.Changed = true
		var validatedAt any
		if rc == CapValidated || ac == CapValidated || wc == CapValidated {
			validatedAt = o.At()
		}
		by := fmt.Sprintf("repair by %s uid=%d pid=%d", a.Name, a.UID, a.PID)
		gen := cur.ReadTransportGeneration + 1
		if _, err := o.Tx.ExecContext(o.Ctx, `INSERT INTO desktop_installation_state(singleton, read_transport,
			read_transport_generation, read_transport_capability, artifact_read_capability, writeback_capability,
			validation_fingerprint, validated_at, updated_by_bootstrap_or_repair, updated_at, fingerprint_inputs_json)
			VALUES (1,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(singleton) DO UPDATE SET
			read_transport = excluded.read_transport, read_transport_generation = excluded.read_transport_generation,
			read_transport_capability = excluded.read_transport_capability,
			artifact_read_capability = excluded.artifact_read_capability,
			writeback_capability = excluded.writeback_capability, validation_fingerprint = excluded.validation_fingerprint,
			validated_at = excluded.validated_at, updated_by_bootstrap_or_repair = excluded.updated_by_bootstrap_or_repair,
			updated_at = excluded.updated_at, fingerprint_inputs_json = excluded.fingerprint_inputs_json`,
			r.ReadTransport, gen, rc, ac, wc, fp, validatedAt, by, o.At(), string(inputs)); err != nil {
			return err
		}
		from := "none"
		if cur.ReadTransport != nil {
			from = fmt.Sprintf("%s/gen %d", *cur.ReadTransport, cur.ReadTransportGeneration)
		}
		if err := o.Audit(audit.Entry{Action: "desktop.installation.repair", EntityKind: "installation",
			EntityID: "desktop_installation_state", From: from, To: fmt.Sprintf("%s/gen %d", r.ReadTransport, gen),
			Outcome: string(delivery.OutcomeOK), Detail: map[string]any{"read_transport_capability": rc,
				"artifact_read_capability": ac, "writeback_capability": wc, "validation_fingerprint": fp}}); err != nil {
			return err
		}
		res.DegradedBindings, err = degradeMismatched(o, InstallationState{ReadTransport: &r.ReadTransport,
			ReadTransportGeneration: gen, ValidationFingerprint: &fp})
		return err
	})
	if err != nil {
		return nil, err
	}
	if res.Installation, err = sv.Installation(ctx); err != nil {
		return nil, err
	}
	return res, sv.publishInstallation(res.Installation)
}

func (sv *Service) installationFile() string {
	return filepath.Join(sv.Inbox(), "desktop-installation-state.json")
}

// ensureInbox creates inbox/ and inbox/snapshots/ 0700 and refuses them if
// they are not ours and private.
func (sv *Service) ensureInbox() error {
	for _, d := range []string{sv.Inbox(), filepath.Join(sv.Inbox(), "snapshots")} {
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return fmt.Errorf("desktop: %w", err)
		}
		if err := checkPrivateDir(d); err != nil {
			return err
		}
	}
	return nil
}

// publishInstallation writes ~/.cbth/inbox/desktop-installation-state.json
// (temp + rename, 0600): the preferred read surface of the installation
// state; the store stays the source of truth.
func (sv *Service) publishInstallation(v InstallationView) error {
	if err := sv.ensureInbox(); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return atomicfile.WriteFile(sv.installationFile(), append(b, '\n'), 0o600)
}
