package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Effects are the seed's declarative side-effect hints of a tool
// (native-plugin-sdk ToolEffect): what kind of thing it does, to what, how
// reversible that is, when to ask before doing it, and whether it can
// preview it. A projected tool keeps them in .d/effects as a JSON array;
// the agent runtime honours them (confirmation, dry run). The enum values
// are the seed's snake_case names exactly.

// Effect is one ToolEffect.
type Effect struct {
	Kind          string `json:"kind" toml:"kind"`
	Target        string `json:"target,omitempty" toml:"target"`
	Reversibility string `json:"reversibility" toml:"reversibility"`
	Confirmation  string `json:"confirmation" toml:"confirmation"`
	DryRun        string `json:"dry_run" toml:"dry_run"`
}

// ToolEffectKind values.
var effectKinds = map[string]bool{"read_file": true, "read_secret": true, "write_file": true, "delete_file": true,
	"run_process": true, "network_request": true, "send_message": true, "spend_money": true, "deploy": true,
	"modify_credential": true, "persist_memory": true, "publish_content": true, "schedule_task": true,
	"generate_media": true, "introspect_runtime": true, "delegate_work": true}

// EffectReversibility, EffectConfirmation and DryRunSupport values.
const (
	Reversible          = "reversible"
	PartiallyReversible = "partially_reversible"
	Irreversible        = "irreversible"

	ConfirmNever  = "never"
	ConfirmOnRisk = "on_risk"
	ConfirmAlways = "always"

	DryRunNotSupported          = "not_supported"
	DryRunSupported             = "supported"
	DryRunRequiredBeforeExecute = "required_before_execute"
)

var (
	reversibilities = map[string]bool{Reversible: true, PartiallyReversible: true, Irreversible: true}
	confirmations   = map[string]bool{ConfirmNever: true, ConfirmOnRisk: true, ConfirmAlways: true}
	dryRuns         = map[string]bool{DryRunNotSupported: true, DryRunSupported: true, DryRunRequiredBeforeExecute: true}
)

// MaxEffects bounds the effects of one tool.
const MaxEffects = 64

// Mutating is the seed's ToolEffectKind::is_mutating: everything but
// reading files, reading secrets, network requests and introspection.
func (e Effect) Mutating() bool {
	switch e.Kind {
	case "read_file", "read_secret", "network_request", "introspect_runtime":
		return false
	}
	return true
}

// Label is the seed's ToolEffect::label: kind, then ":target" when set.
func (e Effect) Label() string {
	if e.Target == "" {
		return e.Kind
	}
	return e.Kind + ":" + e.Target
}

// defaults fill what ToolEffect::new would for a kind: the seed's
// default_reversibility and default_confirmation, dry run not supported.
func (e *Effect) defaults() {
	if e.Reversibility == "" {
		switch e.Kind {
		case "read_file", "network_request", "introspect_runtime":
			e.Reversibility = Reversible
		case "write_file", "run_process", "persist_memory", "schedule_task", "generate_media", "delegate_work":
			e.Reversibility = PartiallyReversible
		default:
			e.Reversibility = Irreversible
		}
	}
	if e.Confirmation == "" {
		switch e.Kind {
		case "read_file", "network_request", "introspect_runtime":
			e.Confirmation = ConfirmOnRisk
		default:
			e.Confirmation = ConfirmAlways
		}
	}
	if e.DryRun == "" {
		e.DryRun = DryRunNotSupported
	}
}

// CheckEffects fills defaults and refuses unknown values (EINVAL): a typo
// in an effect must not silently drop a confirmation.
func CheckEffects(es []Effect) ([]Effect, error) {
	if len(es) > MaxEffects {
		return nil, abi.Errorf(abi.EINVAL, "effects: more than %d", MaxEffects)
	}
	out := make([]Effect, len(es))
	for i, e := range es {
		e.defaults()
		switch {
		case !effectKinds[e.Kind]:
			return nil, abi.Errorf(abi.EINVAL, "effects[%d]: unknown kind %q", i, truncate(e.Kind, 40))
		case !reversibilities[e.Reversibility]:
			return nil, abi.Errorf(abi.EINVAL, "effects[%d]: unknown reversibility %q", i, truncate(e.Reversibility, 40))
		case !confirmations[e.Confirmation]:
			return nil, abi.Errorf(abi.EINVAL, "effects[%d]: unknown confirmation %q", i, truncate(e.Confirmation, 40))
		case !dryRuns[e.DryRun]:
			return nil, abi.Errorf(abi.EINVAL, "effects[%d]: unknown dry_run %q", i, truncate(e.DryRun, 40))
		case len(e.Target) > 1024 || strings.ContainsAny(e.Target, "\x00\n"):
			return nil, abi.Errorf(abi.EINVAL, "effects[%d]: target too long or with NUL/newline", i)
		}
		out[i] = e
	}
	return out, nil
}

// ParseEffects reads a .d/effects file: a JSON array of effects (empty or
// whitespace means none). Duplicate keys and unknown values are EINVAL.
func ParseEffects(b []byte) ([]Effect, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if err := StrictJSON(b); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "effects: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var es []Effect
	if err := dec.Decode(&es); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "effects: want a JSON array of {kind, target, reversibility, confirmation, dry_run}: %v", err)
	}
	return CheckEffects(es)
}

// FormatEffects renders effects for .d/effects (nil for none).
func FormatEffects(es []Effect) []byte {
	if len(es) == 0 {
		return nil
	}
	b, _ := json.MarshalIndent(es, "", "  ")
	return append(b, '\n')
}

// Confirmation says whether running a tool with these effects needs an
// explicit approval first, and why: confirmation=always, or on_risk for an
// irreversible mutating effect (the seed's risk: it cannot be undone).
func Confirmation(es []Effect) (need bool, why string) {
	var reasons []string
	for _, e := range es {
		switch {
		case e.Confirmation == ConfirmAlways:
			reasons = append(reasons, fmt.Sprintf("%s (%s, confirmation=always)", e.Label(), e.Reversibility))
		case e.Confirmation == ConfirmOnRisk && e.Reversibility == Irreversible && e.Mutating():
			reasons = append(reasons, fmt.Sprintf("%s (irreversible, confirmation=on_risk)", e.Label()))
		}
	}
	return len(reasons) > 0, strings.Join(reasons, ", ")
}

// DryRunRequired reports whether one effect demands a dry run before the
// real execution.
func DryRunRequired(es []Effect) bool {
	for _, e := range es {
		if e.DryRun == DryRunRequiredBeforeExecute {
			return true
		}
	}
	return false
}

// CanDryRun reports whether the tool can preview its effects.
func CanDryRun(es []Effect) bool {
	for _, e := range es {
		if e.DryRun == DryRunSupported || e.DryRun == DryRunRequiredBeforeExecute {
			return true
		}
	}
	return false
}
