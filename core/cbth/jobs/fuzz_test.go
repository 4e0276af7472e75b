package jobs

import (
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestParseMetadata(t *testing.T) {
	for _, in := range []string{`[]`, `null`, `"x"`, `{"delivery_policy":1}`, `{"delivery_policy":{"read_only":1}}`,
		`{"delivery_policy":{"readonly":true}}`, `{`} {
		if _, err := ParseMetadata([]byte(in)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("ParseMetadata(%s) = %v", in, err)
		}
	}
	m, err := ParseMetadata([]byte(`{"delivery_policy":{"read_only":true},"other":{"a":1}}`))
	if err != nil || m.DeliveryPolicy == nil || !*m.DeliveryPolicy.ReadOnly || m.DeliveryPolicy.RequiresNetwork != nil {
		t.Errorf("parsed %+v %v", m, err)
	}
}

func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(`{"delivery_policy":{"read_only":true,"requires_approval":false}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMetadata(data)
		if err != nil {
			if c := abi.CodeOf(err); c != abi.EINVAL && c != abi.EMSGSIZE {
				t.Fatalf("non-EINVAL %v", err)
			}
			return
		}
		p, src := Normalize(PolicyInput{}, m.DeliveryPolicy)
		if m.DeliveryPolicy == nil && (p != Policy{false, true, true, true} || src.ReadOnly != "default") {
			t.Fatalf("no policy but %+v %+v", p, src)
		}
		if _, err := ParseMetadata(m.Raw); err != nil {
			t.Fatalf("compacted metadata does not re-parse: %v", err)
		}
	})
}
