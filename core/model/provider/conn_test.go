package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/t/fake"
)

func TestStatusCodes(t *testing.T) {
	c := &Conn{Driver: "d", ModelID: "p/m"}
	for status, want := range map[int]abi.Code{400: abi.EINVAL, 401: abi.EACCES, 403: abi.EACCES, 404: abi.ENOTSUP, 405: abi.ENOTSUP,
		408: abi.ETIMEDOUT, 413: abi.EMSGSIZE, 429: abi.EBUSY, 500: abi.EHOSTDOWN, 502: abi.EHOSTDOWN, 503: abi.EHOSTDOWN,
		504: abi.ETIMEDOUT, 529: abi.EBUSY, 418: abi.EPROTO} {
		if got := abi.CodeOf(c.StatusError(status, nil, nil)); got != want {
			t.Errorf("HTTP %d → %s, want %s", status, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	key := "sk-proj-abcdefghijklmnop1234"
	for _, msg := range []string{"bad key " + key + ".", "Incorrect API key provided: sk-proj-********mnop1234.", "key=" + key[:12] + "…"} {
		got := Redact(msg, key)
		if strings.Contains(got, key[8:16]) || strings.Contains(got, key[len(key)-8:]) {
			t.Errorf("Redact(%q) = %q", msg, got)
		}
	}
}

// An unconfigured provider is ENOKEY and the endpoint sees nothing; the
// route does not fall back to another driver of the same provider.
func TestUnconfiguredSendsNothing(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	t.Setenv("FAKE_API_KEY", "")
	m := &model.Model{Object: tree.Object{Class: abi.ClassModel, Name: "fake/x"}, ID: "fake/x",
		Routes: abi.Routes{abi.RouteDefault: {"openai-responses", "openai-chat"}}, Defaults: map[string]string{KeyBaseURL: srv.BaseURL(fake.OpenAIChat)}}
	tried, err := m.Stream(context.Background(), abi.RouteExec, m.Request(hello()), func(abi.Event) error { return nil })
	if abi.CodeOf(err) != abi.ENOKEY || len(tried) != 1 || len(srv.Requests()) != 0 {
		t.Fatalf("err %v tried %v requests %d", err, tried, len(srv.Requests()))
	}
}

// 404 on the Responses path is ENOTSUP before anything is emitted, so the
// route falls back to openai-chat; model.Attempts shows it for .d/log.
func TestResponsesFallsBackToChat(t *testing.T) {
	srv := fake.New()
	srv.NoResponses = true
	defer srv.Close()
	got, err, tried := runFake(t, srv, []string{"openai-responses", "openai-chat"}, "text", hello(), nil)
	if err != nil || model.Attempts(tried) != "driver=openai-responses(ENOTSUP),openai-chat" || !strings.Contains(got, `"text":"hello"`) {
		t.Fatalf("err %v attempts %s frames %s", err, model.Attempts(tried), got)
	}
}

// Each driver's request carries its format's shape of history, tools and
// parameters.
func TestRequestShapes(t *testing.T) {
	in, err := model.ParseInput([]byte(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},
		{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"fs.read","arguments":{"path":"a"}}]},
		{"role":"tool","tool_call_id":"c1","name":"fs.read","content":"data"}],"tools":[{"name":"fs.read"}],"params":{"max_tokens":9}}`))
	if err != nil {
		t.Fatal(err)
	}
	req := (&model.Model{ID: "p/m", NativeID: "m"}).Request(in)
	names := newToolNames(req)
	an, _ := anthropicBody(req, names)
	gm, _ := geminiBody(req, names)
	ol, _ := ollamaBody(req, names)
	rs, _ := responsesBody(req, names)
	for name, c := range map[string]struct{ got, want string }{
		"anthropic": {mustJSON(an), `{"model":"m","max_tokens":9,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"fs_read","input":{"path":"a"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"data"}]}],"tools":[{"name":"fs_read","input_schema":{"type":"object","properties":{}}}],"stream":true}`},
		"gemini":    {mustJSON(gm), `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"id":"c1","name":"fs_read","args":{"path":"a"}}}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"fs_read","response":{"content":"data"}}}]}],"systemInstruction":{"parts":[{"text":"be brief"}]},"tools":[{"functionDeclarations":[{"name":"fs_read","parametersJsonSchema":{"type":"object","properties":{}}}]}],"generationConfig":{"maxOutputTokens":9}}`},
		"ollama":    {mustJSON(ol), `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"fs_read","arguments":{"path":"a"}}}]},{"role":"tool","content":"data","tool_name":"fs_read"}],"tools":[{"type":"function","function":{"name":"fs_read","parameters":{"type":"object","properties":{}}}}],"stream":true,"options":{"num_predict":9}}`},
		"responses": {mustJSON(rs), `{"model":"m","input":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"fs_read","arguments":"{\"path\":\"a\"}"},{"type":"function_call_output","call_id":"c1","output":"data"}],"tools":[{"type":"function","name":"fs_read","parameters":{"type":"object","properties":{}}}],"stream":true,"store":false,"max_output_tokens":9}`},
	} {
		if c.got != c.want {
			t.Errorf("%s request\n got: %s\nwant: %s", name, c.got, c.want)
		}
	}
}

// WireToolName is the encoding toolNames gives a name that collides with
// nothing, so a caller can decode a tool call by a name never offered.
func TestWireToolName(t *testing.T) {
	for in, want := range map[string]string{
		"shell.exec": "shell_exec", "fs.read": "fs_read", "mcp.github+x": "mcp_github_x", "a-b_c": "a-b_c",
		"": "tool", strings.Repeat("x", 70): strings.Repeat("x", 60),
	} {
		if got := WireToolName(in); got != want {
			t.Errorf("WireToolName(%q) = %q, want %q", in, got, want)
		}
		if in == "" {
			continue
		}
		names := newToolNames(model.Request{Tools: []model.ToolSpec{{Name: in}}})
		if enc := names.encode(in); enc != WireToolName(in) {
			t.Errorf("toolNames encodes %q as %q, WireToolName says %q", in, enc, WireToolName(in))
		}
	}
	// A collision gets a suffix in the request's own mapping; the base
	// encoding stays the same.
	names := newToolNames(model.Request{Tools: []model.ToolSpec{{Name: "a.b"}, {Name: "a+b"}}})
	if names.encode("a.b") != "a_b" || names.encode("a+b") != "a_b_2" || names.decode("a_b_2") != "a+b" {
		t.Errorf("collision mapping: %q %q", names.encode("a.b"), names.encode("a+b"))
	}
}
