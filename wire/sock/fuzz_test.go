package sock

import (
	"encoding/json"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// FuzzRequest checks that any line either is refused with EINVAL or
// EMSGSIZE, or is a valid request of one of the four ops that survives a
// round trip through the Client's encoding unchanged.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"op":"send","id":"msg-1","session":"default","cwd":"/work","input":"hello"}`,
		`{"op":"send","id":"m","input":{"messages":[{"role":"user","content":"hi"}]},"temp":true}`,
		`{"op":"resume","session":"default","after":"17"}`,
		`{"op":"cancel","id":"r01ARZ3NDEKTSV4RRFFQ69G5FAV"}`,
		`{"op":"ping","unknown":[1,{"x":null}]}`,
		`{"op":"PING"}`,
		`{"Op":"ping"}`,
		`{"op":"send","id":"m","input":null}`,
		`{"op":"resume","session":"a.sock"}`,
		`null`,
		`{"op":"ping"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := ParseRequest(line)
		if err != nil {
			if c := abi.CodeOf(err); c != abi.EINVAL && c != abi.EMSGSIZE {
				t.Fatalf("ParseRequest(%q): code %s (%v), want EINVAL or EMSGSIZE", line, c, err)
			}
			return
		}
		switch req.Op {
		case OpSend:
			if req.ID == "" || len(req.Input) == 0 || !json.Valid(req.Input) || abi.ValidName(req.Session) != nil {
				t.Fatalf("accepted an invalid send: %+v", req)
			}
		case OpResume:
			if _, err := parseAfter(req.After); err != nil || abi.ValidName(req.Session) != nil {
				t.Fatalf("accepted an invalid resume: %+v", req)
			}
		case OpCancel:
			if req.ID == "" {
				t.Fatalf("accepted a cancel without id: %+v", req)
			}
		case OpPing:
		default:
			t.Fatalf("accepted op %q", req.Op)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		again, err := ParseRequest(b)
		if err != nil {
			t.Fatalf("accepted request %+v re-encoded as %s is refused: %v", req, b, err)
		}
		if again.Op != req.Op || again.ID != req.ID || again.Session != req.Session || again.Cwd != req.Cwd ||
			again.After != req.After || again.Temp != req.Temp {
			t.Fatalf("round trip changed %+v into %+v", req, again)
		}
	})
}
