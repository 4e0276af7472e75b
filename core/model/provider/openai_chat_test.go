package provider

import (
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/t/fake"
)

func TestOpenAIChatStreams(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	checkGolden(t, srv, []string{"openai-chat"}, []golden{
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
{"type":"usage","input_tokens":5,"output_tokens":4,"reasoning_tokens":3}
`},
		{scenario: "tool", in: toolInput(), want: `
{"type":"delta","text":"Let me look."}
{"type":"tool_call","call_id":"call_a","name":"fs.read","arguments":{"path":"README"}}
{"type":"tool_call","call_id":"call_b","name":"fs.list","arguments":{}}
{"type":"message","role":"assistant","content":[{"type":"text","text":"Let me look."}]}
{"type":"usage","input_tokens":12,"output_tokens":9}
`},
		{scenario: "error", code: abi.EHOSTDOWN, want: `
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

// The request is in the Chat Completions format: model, stream with usage,
// messages, tools with encoded names, parameters from .d/default
// overridden per call, adapter keys never sent, the key as a bearer token.
func TestOpenAIChatRequest(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	in := toolInput()
	in.Params = map[string]any{"temperature": 0.5, "base_url": "http://evil.example"}
	_, err, _ := runFake(t, srv, []string{"openai-chat"}, "text", in, map[string]string{
		KeyBaseURL: srv.BaseURL(fake.OpenAIChat), "temperature": "0.9", "max_tokens": "64", "repeat": "3"})
	if err != nil {
		t.Fatal(err)
	}
	body := lastBody(t, srv)
	checks := map[string]string{
		"model":          `"text"`,
		"stream":         `true`,
		"stream_options": `{"include_usage":true}`,
		"temperature":    `0.5`,
		"max_tokens":     `64`,
		"messages":       `[{"content":"read the readme","role":"user"}]`,
		"tools":          `[{"function":{"description":"read a file","name":"fs_read","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}},"type":"function"},{"function":{"description":"list a directory","name":"fs_list","parameters":{"properties":{},"type":"object"}},"type":"function"}]`,
	}
	for k, want := range checks {
		if got := mustJSON(body[k]); got != want {
			t.Errorf("request %s = %s, want %s", k, got, want)
		}
	}
	for _, k := range []string{"base_url", "repeat"} {
		if _, ok := body[k]; ok {
			t.Errorf("request carries %s", k)
		}
	}
	req := srv.Requests()[0]
	if req.Header.Get("Authorization") != "Bearer "+testKey || !strings.HasSuffix(req.Path, "/chat/completions") {
		t.Errorf("request %s auth %q", req.Path, req.Header.Get("Authorization"))
	}
}
