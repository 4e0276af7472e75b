package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/cortexfs/core/abi"
)

// serve connects a session to an in-process SDK server holding tools.
func serve(t *testing.T, pageSize int, tools map[*mcp.Tool]mcp.ToolHandler) *Session {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "1"}, &mcp.ServerOptions{PageSize: pageSize})
	for tool, h := range tools {
		srv.AddTool(tool, h)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go srv.Run(ctx, st)
	s, err := Connect(ctx, ct, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// tools/list follows every page; a tool's schemas come back as raw JSON
// and its name is kept byte for byte.
func TestListToolsPages(t *testing.T) {
	tools := map[*mcp.Tool]mcp.ToolHandler{}
	for i := range 7 {
		tools[&mcp.Tool{Name: fmt.Sprintf("t_%d", i), Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"}}}`)}] =
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("x"), nil }
	}
	s := serve(t, 2, tools) // four pages
	got, err := s.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Fatalf("listed %d tools over pages of 2, want 7", len(got))
	}
	for _, tl := range got {
		var schema map[string]any
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil || schema["type"] != "object" || schema["properties"] == nil {
			t.Errorf("tool %s input schema %s", tl.Name, tl.InputSchema)
		}
	}
}

// A call's text and structured content come back as sent; a tool's error
// result is a Result with IsError, not an error; a server-side protocol
// error is an error with a stable code.
func TestCallToolResults(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	s := serve(t, 0, map[*mcp.Tool]mcp.ToolHandler{
		{Name: "ok", InputSchema: obj}: func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := text("hello")
			r.StructuredContent = map[string]any{"n": 3}
			return r, nil
		},
		{Name: "bad", InputSchema: obj}: func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := text("it broke")
			r.IsError = true
			return r, nil
		},
		{Name: "rpc", InputSchema: obj}: func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such argument"}
		},
	})
	ctx := context.Background()
	r, err := s.CallTool(ctx, "ok", json.RawMessage(`{}`))
	if err != nil || r.IsError || string(r.StructuredContent) != `{"n":3}` || !json.Valid(r.Content) ||
		!strings.Contains(string(r.Content), `"hello"`) {
		t.Fatalf("ok: %+v %v (content %s)", r, err, r.Content)
	}
	r, err = s.CallTool(ctx, "bad", json.RawMessage(`{}`))
	if err != nil || !r.IsError || !strings.Contains(string(r.Content), "it broke") {
		t.Fatalf("tool error result: %+v %v", r, err)
	}
	_, err = s.CallTool(ctx, "rpc", json.RawMessage(`{}`))
	if abi.CodeOf(err) != abi.EINVAL {
		t.Fatalf("invalid params from the server: %v (%s), want EINVAL", err, abi.CodeOf(err))
	}
	_, err = s.CallTool(ctx, "nosuch", json.RawMessage(`{}`))
	if err == nil {
		t.Fatal("a call of an unknown tool succeeded")
	}
}

// Errors map to stable codes, never by message.
func TestCode(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-expired.Done()
	for _, tt := range []struct {
		ctx  context.Context
		err  error
		want abi.Code
	}{
		{live, mcp.ErrConnectionClosed, abi.EHOSTDOWN},
		{live, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams}, abi.EINVAL},
		{live, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound}, abi.ENOTSUP},
		{live, &jsonrpc.Error{Code: jsonrpc.CodeParseError}, abi.EPROTO},
		{live, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest}, abi.EPROTO},
		{live, &jsonrpc.Error{Code: jsonrpc.CodeInternalError}, abi.EIO},
		{live, abi.Errorf(abi.EACCES, "kept"), abi.EACCES},
		{expired, fmt.Errorf("anything"), abi.ETIMEDOUT},
		{live, fmt.Errorf("broken pipe"), abi.EHOSTDOWN},
	} {
		if got := abi.CodeOf(Code(tt.ctx, "x", tt.err)); got != tt.want {
			t.Errorf("Code(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
	if Code(live, "x", nil) != nil {
		t.Error("Code(nil) is not nil")
	}
}

// FuzzConvertTool: whatever a server lists as a tool (decoded as the SDK
// decodes it), the projection's view of it never panics, keeps the name,
// and its input schema is always a JSON value (an object schema when the
// server sent none).
func FuzzConvertTool(f *testing.F) {
	for _, seed := range []string{
		`{"name":"echo","description":"Echoes","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}`,
		`{"name":"add","inputSchema":{"type":"object"},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`,
		`{"name":"x"}`,
		`{"name":"y","inputSchema":null,"title":"T"}`,
		`{"name":"\u00e9\u0000","inputSchema":{"$ref":"#/x","type":["object","null"]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var tl mcp.Tool
		if json.Unmarshal(b, &tl) != nil {
			return
		}
		out, err := convertTool(&tl)
		if err != nil {
			if abi.CodeOf(err) != abi.EPROTO {
				t.Fatalf("convertTool error without EPROTO: %v", err)
			}
			return
		}
		if out.Name != tl.Name || !json.Valid(out.InputSchema) {
			t.Fatalf("convertTool(%s) = %+v", b, out)
		}
		if out.OutputSchema != nil && !json.Valid(out.OutputSchema) {
			t.Fatalf("output schema %q", out.OutputSchema)
		}
	})
}
