package t

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeStep is one scripted model answer: tool calls, or final text.
type fakeStep struct {
	Text  string
	Calls []fakeCall
}

type fakeCall struct {
	Name string // canonical tool name; sent in the provider's encoding when the request offered it
	Args string
}

// fakeChat is a scripted OpenAI-compatible Chat Completions server
// (streaming SSE). Each POST /v1/chat/completions takes the next step;
// past the script it answers "done". It records every request body.
type fakeChat struct {
	srv   *httptest.Server
	mu    sync.Mutex
	steps []fakeStep
	reqs  []fakeReq
	gate  chan struct{} // when set before a request, the answer waits until it is closed
}

type fakeReq struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func newFakeChat(t testing.TB, steps ...fakeStep) *fakeChat {
	f := &fakeChat{steps: steps}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// script appends steps.
func (f *fakeChat) script(steps ...fakeStep) {
	f.mu.Lock()
	f.steps = append(f.steps, steps...)
	f.mu.Unlock()
}

func (f *fakeChat) requests() []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.reqs...)
}

func (f *fakeChat) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req fakeReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	step := fakeStep{Text: "done"}
	if len(f.steps) > 0 {
		step, f.steps = f.steps[0], f.steps[1:]
	}
	f.mu.Unlock()
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Function.Name] = true
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if len(step.Calls) > 0 {
		var calls []any
		for i, c := range step.Calls {
			name := c.Name
			if enc := encodeToolName(c.Name); offered[enc] {
				name = enc
			}
			calls = append(calls, map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", len(f.reqs), i), "type": "function",
				"function": map[string]any{"name": name, "arguments": c.Args}})
		}
		chunk(map[string]any{"role": "assistant", "tool_calls": calls}, nil)
		chunk(map[string]any{}, "tool_calls")
	} else {
		for _, part := range splitHalf(step.Text) {
			chunk(map[string]any{"role": "assistant", "content": part}, nil)
		}
		chunk(map[string]any{}, "stop")
	}
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func encodeToolName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

func splitHalf(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

// addFakeModel writes model/fake/chat into root, driven by openai-chat
// against f (no credentials: auth=none).
func addFakeModel(t testing.TB, root string, f *fakeChat) {
	t.Helper()
	obj := filepath.Join(root, "model", "fake", "chat")
	if err := os.MkdirAll(obj+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		obj:                "#!" + applet("cortexfs-object-runner") + "\ncortexfs.object=model\nid=fake-chat\n",
		obj + ".d/id":      "fake-chat\n",
		obj + ".d/driver":  "openai-chat\n",
		obj + ".d/default": "base_url=" + f.srv.URL + "/v1\nauth=none\n",
		obj + ".d/cap":     "chat\nstream\ntool_call_syntax\n",
		obj + ".d/session": "none\n",
		obj + ".d/status":  "ready\n",
		obj + ".d/log":     "",
	}
	for p, c := range files {
		mode := os.FileMode(0o644)
		if p == obj {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
}
