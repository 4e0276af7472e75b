package policy

import (
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// FuzzParsePolicy: Parse never panics, fails only with EINVAL, and what it
// accepts formats to a file that parses to the same rule set.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte("allow coder_t tool:fs.read execute\n"))
	f.Add([]byte("# c\nallow coder_t model:openai/gpt-4o use\r\nallow coder_t network:default connect"))
	f.Add([]byte("deny a_t tool:* execute"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if abi.CodeOf(err) != abi.EINVAL {
				t.Fatalf("error %v has code %s, want EINVAL", err, abi.CodeOf(err))
			}
			return
		}
		q, err := Parse(p.Format())
		if err != nil {
			t.Fatalf("formatted policy does not parse: %v\n%s", err, p.Format())
		}
		if len(q.Rules) != len(p.Rules) {
			t.Fatalf("round trip changed the rule count: %d → %d", len(p.Rules), len(q.Rules))
		}
		for _, r := range p.Rules {
			if !q.Allowed(r.Subject, r.Class, r.Object, r.Perm) {
				t.Fatalf("round trip lost %s", r)
			}
		}
	})
}

// FuzzParseMountFile: never panics, only EINVAL, round-trips, and every
// accepted mount satisfies the v0 rules.
func FuzzParseMountFile(f *testing.F) {
	f.Add([]byte("/ctx\t/ctx\tro\trbind,nosuid,nodev\n"))
	f.Add([]byte("/a\t/b\trw\t-\n# c\n"))
	f.Add([]byte("/a\t/b\tro\tbind,rbind"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseMountFile(data)
		if err != nil {
			if abi.CodeOf(err) != abi.EINVAL {
				t.Fatalf("error %v has code %s, want EINVAL", err, abi.CodeOf(err))
			}
			return
		}
		for _, m := range ms {
			if m.Mode != ModeRO && m.Mode != ModeRW || m.Has("bind") && m.Has("rbind") {
				t.Fatalf("accepted invalid mount %+v", m)
			}
		}
		again, err := ParseMountFile(FormatMountFile(ms))
		if err != nil || len(again) != len(ms) {
			t.Fatalf("round trip: %v", err)
		}
		if err := AttenuateMounts(ms, ms); err != nil {
			t.Fatalf("a mount set is not within itself: %v", err)
		}
	})
}
