package model

import (
	"encoding/json"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// FuzzParseTurnInput: any input is either EINVAL or a request with at least
// one message of a known role that survives a JSON round trip.
func FuzzParseTurnInput(f *testing.F) {
	for _, s := range []string{`"hi"`, `{"messages":[{"role":"user","content":"x"}]}`, `{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"params":{"repeat":2}}`, `{`, `[]`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseTurnInput(b)
		if err != nil {
			if c := abi.CodeOf(err); c != abi.EINVAL {
				t.Fatalf("error code %s, want EINVAL: %v", c, err)
			}
			return
		}
		if len(in.Messages) == 0 {
			t.Fatal("accepted input without messages")
		}
		for _, m := range in.Messages {
			if !roles[m.Role] {
				t.Fatalf("accepted role %q", m.Role)
			}
		}
		out, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseInput(out); err != nil {
			t.Fatalf("round trip of %s failed: %v", out, err)
		}
	})
}
