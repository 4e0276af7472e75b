package model

import (
	"encoding/json"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestSessionInputReplaysHistory(t *testing.T) {
	hist := []PastTurn{
		{Input: json.RawMessage(`"first"`), Events: []abi.Event{abi.DeltaEvent("r1", "fir"), abi.TextMessage("r1", "assistant", "first")}},
		{Input: json.RawMessage(`{"bad":`)}, // refused turn: skipped
		{Input: json.RawMessage(`{"messages":[{"role":"user","content":"second"}]}`), Events: []abi.Event{
			{Type: abi.EvToolCall, Run: "r2", CallID: "c1", Name: "fs.read", Arguments: json.RawMessage(`{"path":"x"}`)}}},
	}
	in, err := SessionInput(hist, json.RawMessage(`"third"`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:first", "assistant:first", "user:second", "assistant:", "user:third"}
	if len(in.Messages) != len(want) {
		t.Fatalf("got %d messages %+v", len(in.Messages), in.Messages)
	}
	for i, m := range in.Messages {
		if m.Role+":"+m.Content != want[i] {
			t.Errorf("message %d = %s:%s, want %s", i, m.Role, m.Content, want[i])
		}
	}
	if len(in.Messages[3].ToolCalls) != 1 || in.Messages[3].ToolCalls[0].Name != "fs.read" {
		t.Errorf("tool call not replayed: %+v", in.Messages[3])
	}
	for _, bad := range []string{``, `42`, `[1]`, `{"messages":[]}`, `{"messages":[{"role":"wizard","content":"x"}]}`} {
		if _, err := SessionInput(nil, json.RawMessage(bad)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("input %q: want EINVAL, got %v", bad, err)
		}
	}
}

func TestParseInputContentShapes(t *testing.T) {
	in, err := ParseInput([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`))
	if err != nil || in.Messages[0].Content != "ab" {
		t.Fatalf("parts content: %+v %v", in, err)
	}
	for _, bad := range []string{`{"messages":[{"role":"user","content":[{"type":"image"}]}]}`, `{"messages":[{"role":"user","content":5}]}`, `{"messages":[]} {}`} {
		if _, err := ParseInput([]byte(bad)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("%s: want EINVAL, got %v", bad, err)
		}
	}
}
