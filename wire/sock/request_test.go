package sock

import (
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Request  // when code is ""
		code abi.Code // expected error code
	}{
		{"send", `{"op":"send","id":"msg-1","session":"s1","cwd":"/work","input":"hello"}`,
			Request{Op: OpSend, ID: "msg-1", Session: "s1", Cwd: "/work", Input: []byte(`"hello"`)}, ""},
		{"send object input, default session, temp", `{"op":"send","id":"m","input":{"messages":[]},"temp":true}`,
			Request{Op: OpSend, ID: "m", Session: DefaultSession, Input: []byte(`{"messages":[]}`), Temp: true}, ""},
		{"unknown fields ignored", `{"op":"ping","x":1,"nested":{"y":[1,2]}}`, Request{Op: OpPing}, ""},
		{"resume", `{"op":"resume","session":"default","after":"42"}`, Request{Op: OpResume, Session: "default", After: "42"}, ""},
		{"resume from start", `{"op":"resume","session":"default"}`, Request{Op: OpResume, Session: "default"}, ""},
		{"cancel", `{"op":"cancel","id":"r1"}`, Request{Op: OpCancel, ID: "r1"}, ""},
		{"ping", `{"op":"ping"}`, Request{Op: OpPing}, ""},

		{"unknown op", `{"op":"reboot"}`, Request{}, abi.EINVAL},
		{"no op", `{"id":"x"}`, Request{}, abi.EINVAL},
		{"invalid JSON", `{"op":"ping"`, Request{}, abi.EINVAL},
		{"not an object", `["ping"]`, Request{}, abi.EINVAL},
		{"null", `null`, Request{}, abi.EINVAL},
		{"wrong field type", `{"op":"send","id":7,"input":"x"}`, Request{}, abi.EINVAL},
		{"wrong temp type", `{"op":"send","id":"m","input":"x","temp":"yes"}`, Request{}, abi.EINVAL},
		{"send without id", `{"op":"send","input":"x"}`, Request{}, abi.EINVAL},
		{"send without input", `{"op":"send","id":"m"}`, Request{}, abi.EINVAL},
		{"send with null input", `{"op":"send","id":"m","input":null}`, Request{}, abi.EINVAL},
		{"send id too long", `{"op":"send","id":"` + strings.Repeat("x", maxClientID+1) + `","input":"x"}`, Request{}, abi.EINVAL},
		{"send bad session", `{"op":"send","id":"m","session":"../etc","input":"x"}`, Request{}, abi.EINVAL},
		{"send .sock session", `{"op":"send","id":"m","session":"a.sock","input":"x"}`, Request{}, abi.EINVAL},
		{"resume without session", `{"op":"resume","after":"1"}`, Request{}, abi.EINVAL},
		{"resume bad session", `{"op":"resume","session":"a/b"}`, Request{}, abi.EINVAL},
		{"resume bad after", `{"op":"resume","session":"s","after":"-1"}`, Request{}, abi.EINVAL},
		{"cancel without id", `{"op":"cancel"}`, Request{}, abi.EINVAL},
		{"too big", `{"op":"ping","pad":"` + strings.Repeat("x", jsonl.MaxFrame) + `"}`, Request{}, abi.EMSGSIZE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequest([]byte(tt.line))
			if tt.code != "" {
				if abi.CodeOf(err) != tt.code {
					t.Fatalf("ParseRequest = %+v, %v; want code %s", got, err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			if got.Op != tt.want.Op || got.ID != tt.want.ID || got.Session != tt.want.Session || got.Cwd != tt.want.Cwd ||
				got.After != tt.want.After || string(got.Input) != string(tt.want.Input) || got.Temp != tt.want.Temp {
				t.Fatalf("ParseRequest = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseAfter(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"", 0, true}, {"0", 0, true}, {"7", 7, true}, {"18446744073709551615", 1<<64 - 1, true},
		{"x", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"18446744073709551616", 0, false},
	}
	for _, tt := range tests {
		got, err := parseAfter(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseAfter(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
