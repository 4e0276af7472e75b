package jobs

import (
	"bytes"
	"encoding/json"

	"github.com/cortexfs/cortexfs/core/abi"
)

// MaxMetadata bounds a --metadata-file.
const MaxMetadata = 64 << 10

// PolicyInput is a partially given delivery policy: nil means "not given".
type PolicyInput struct {
	ReadOnly            *bool `json:"read_only,omitempty"`
	RequiresApproval    *bool `json:"requires_approval,omitempty"`
	RequiresNetwork     *bool `json:"requires_network,omitempty"`
	RequiresWriteAccess *bool `json:"requires_write_access,omitempty"`
}

// Metadata is a parsed --metadata-file: a JSON object that may carry a
// delivery_policy object; other top-level keys are the submitter's own and
// are kept verbatim.
type Metadata struct {
	DeliveryPolicy *PolicyInput
	Raw            json.RawMessage
}

// ParseMetadata validates a metadata file. The top level must be an object;
// delivery_policy, when present, must be an object of booleans with only
// the four seed keys.
func ParseMetadata(data []byte) (Metadata, error) {
	if len(data) > MaxMetadata {
		return Metadata{}, abi.Errorf(abi.EMSGSIZE, "metadata file: %d bytes exceeds %d", len(data), MaxMetadata)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return Metadata{}, abi.Errorf(abi.EINVAL, "metadata file: want a JSON object")
	}
	m := Metadata{}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return Metadata{}, abi.Errorf(abi.EINVAL, "metadata file: %v", err)
	}
	m.Raw = compact.Bytes()
	raw, ok := top["delivery_policy"]
	if !ok || string(raw) == "null" {
		return m, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p PolicyInput
	if err := dec.Decode(&p); err != nil {
		return Metadata{}, abi.Errorf(abi.EINVAL, "metadata file: delivery_policy: %v", err)
	}
	m.DeliveryPolicy = &p
	return m, nil
}

// Policy is a normalized delivery policy.
type Policy struct {
	ReadOnly            bool `json:"delivery_read_only"`
	RequiresApproval    bool `json:"delivery_requires_approval"`
	RequiresNetwork     bool `json:"delivery_requires_network"`
	RequiresWriteAccess bool `json:"delivery_requires_write_access"`
}

// Source names where each normalized field came from.
type Source struct {
	ReadOnly            string `json:"delivery_read_only"`
	RequiresApproval    string `json:"delivery_requires_approval"`
	RequiresNetwork     string `json:"delivery_requires_network"`
	RequiresWriteAccess string `json:"delivery_requires_write_access"`
}

// Normalize applies the seed's rule: explicit CLI flags win over
// metadata-file.delivery_policy, and anything not given takes the
// fail-closed default read_only=false, requires_approval=true,
// requires_network=true, requires_write_access=true.
func Normalize(flags PolicyInput, meta *PolicyInput) (Policy, Source) {
	if meta == nil {
		meta = &PolicyInput{}
	}
	pick := func(flag, m *bool, def bool) (bool, string) {
		switch {
		case flag != nil:
			return *flag, "flag"
		case m != nil:
			return *m, "metadata"
		default:
			return def, "default"
		}
	}
	var p Policy
	var s Source
	p.ReadOnly, s.ReadOnly = pick(flags.ReadOnly, meta.ReadOnly, false)
	p.RequiresApproval, s.RequiresApproval = pick(flags.RequiresApproval, meta.RequiresApproval, true)
	p.RequiresNetwork, s.RequiresNetwork = pick(flags.RequiresNetwork, meta.RequiresNetwork, true)
	p.RequiresWriteAccess, s.RequiresWriteAccess = pick(flags.RequiresWriteAccess, meta.RequiresWriteAccess, true)
	return p, s
}
