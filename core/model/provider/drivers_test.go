package provider

import (
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/t/fake"
)

// Every driver maps its provider's scenarios onto the same canonical
// frames; only native call ids (synthesized call_N where the provider has
// none), the mid-stream error's code and whether reasoning tokens are
// counted differ.
func TestDriversCanonicalStreams(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	for _, d := range []struct {
		driver       string
		idA, idB     string
		midStreamErr abi.Code
		reasoningTok string // Anthropic and Ollama report no reasoning count
	}{
		{"openai-responses", "call_a", "call_b", abi.EHOSTDOWN, `,"reasoning_tokens":3`},
		{"anthropic-messages", "toolu_a", "toolu_b", abi.EBUSY, ""},
		{"gemini", "call_1", "call_2", abi.EHOSTDOWN, `,"reasoning_tokens":3`},
		{"ollama", "call_1", "call_2", abi.EHOSTDOWN, ""},
	} {
		tool := strings.NewReplacer("ID_A", d.idA, "ID_B", d.idB).Replace(`
{"type":"delta","text":"Let me look."}
{"type":"tool_call","call_id":"ID_A","name":"fs.read","arguments":{"path":"README"}}
{"type":"tool_call","call_id":"ID_B","name":"fs.list","arguments":{}}
{"type":"message","role":"assistant","content":[{"type":"text","text":"Let me look."}]}
{"type":"usage","input_tokens":12,"output_tokens":9}
`)
		checkGolden(t, srv, []string{d.driver}, []golden{
			{scenario: "text", want: `
{"type":"delta","text":"hel"}
{"type":"delta","text":"lo"}
{"type":"message","role":"assistant","content":[{"type":"text","text":"hello"}]}
{"type":"usage","input_tokens":5,"output_tokens":2}
`},
			{scenario: "reasoning", want: `
{"type":"reasoning_delta","text":"think"}
{"type":"reasoning_delta","text":"ing"}
{"type":"reasoning_message","text":"thinking"}
{"type":"delta","text":"ok"}
{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}]}
{"type":"usage","input_tokens":5,"output_tokens":4` + d.reasoningTok + `}
`},
			{scenario: "tool", in: toolInput(), want: tool},
			{scenario: "error", code: d.midStreamErr, want: `
{"type":"delta","text":"partial"}
`},
			{scenario: "truncated", code: abi.EHOSTDOWN, want: `
{"type":"delta","text":"parti"}
`},
			{scenario: "cut", code: abi.EHOSTDOWN, want: `
{"type":"delta","text":"parti"}
`},
			{scenario: "e401", code: abi.EACCES},
			{scenario: "e429", code: abi.EBUSY},
			{scenario: "e500", code: abi.EHOSTDOWN},
			{scenario: "missing", code: abi.ENOENT},
		})
	}
}
