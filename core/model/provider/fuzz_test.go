package provider

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/t/fake"
)

var sseDrivers = []string{"openai-chat", "openai-responses", "anthropic-messages", "gemini"}

// checkDecode: whatever the body, decoding never panics, every frame is a
// body frame that marshals (tool_call arguments a JSON object), and a
// failure carries a known stable code.
func checkDecode(t *testing.T, driver string, body []byte) {
	err := Decode(driver, bytes.NewReader(body), func(e abi.Event) error {
		switch e.Type {
		case abi.EvDelta, abi.EvReasoningDelta, abi.EvReasoningMessage, abi.EvMessage, abi.EvToolCall, abi.EvUsage:
		default:
			t.Fatalf("%s emitted a %s frame", driver, e.Type)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("%s: frame does not marshal: %v", driver, err)
		}
		if e.Type == abi.EvToolCall {
			var v map[string]any
			if json.Unmarshal(e.Arguments, &v) != nil || v == nil {
				t.Fatalf("%s: tool_call arguments not an object: %s", driver, b)
			}
		}
		return nil
	})
	if err != nil && !abi.CodeOf(err).Known() {
		t.Fatalf("%s: error without a stable code: %v", driver, err)
	}
}

func seedScenarios(f *testing.F, kinds []fake.Kind, prefix byte) {
	for _, k := range kinds {
		for _, sc := range []string{"text", "reasoning", "tool", "error", "truncated", "cut"} {
			rep := fake.Scenario(k, sc, "")
			f.Add(append([]byte{prefix}, strings.Join(rep.Chunks, "")...))
		}
	}
}

// FuzzDecodeSSE drives the four SSE stream parsers; the first byte picks
// the driver.
func FuzzDecodeSSE(f *testing.F) {
	seedScenarios(f, []fake.Kind{fake.OpenAIChat, fake.OpenAIResponses, fake.Anthropic, fake.Gemini}, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		checkDecode(t, sseDrivers[int(b[0])%len(sseDrivers)], b[1:])
	})
}

// FuzzDecodeNDJSON drives the Ollama NDJSON stream parser.
func FuzzDecodeNDJSON(f *testing.F) {
	seedScenarios(f, []fake.Kind{fake.Ollama}, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		checkDecode(t, "ollama", b[1:])
	})
}
