package toolsrc

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/mcpclient"
)

// testServer is an in-memory MCP server of the official SDK: it pages its
// tools two at a time, and tests add tools while a client is connected.
type testServer struct {
	srv *mcp.Server
	mu  sync.Mutex
	ss  *mcp.ServerSession
}

func newTestServer() *testServer {
	s := &testServer{srv: mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ServerOptions{PageSize: 2})}
	obj := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`)
	text := func(t string, isErr bool) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}, IsError: isErr}
	}
	s.srv.AddTool(&mcp.Tool{Name: "echo", Description: "echo", InputSchema: obj}, func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Message string }
		_ = json.Unmarshal(r.Params.Arguments, &a)
		return text("Echo: "+a.Message, false), nil
	})
	s.srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("it failed", true), nil
	})
	s.srv.AddTool(&mcp.Tool{Name: "weather", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text(`{"t":21}`, false)
		r.StructuredContent = map[string]any{"t": 21}
		return r, nil
	})
	for _, n := range []string{"a/b", "a:b", "five"} {
		s.srv.AddTool(&mcp.Tool{Name: n, InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("ok", false), nil
		})
	}
	return s
}

// dial connects a client session to a fresh server session.
func (s *testServer) dial(ctx context.Context, o mcpclient.Options) (*mcpclient.Session, error) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.ss = ss
	s.mu.Unlock()
	return mcpclient.Connect(ctx, ct, o)
}

func (s *testServer) dropSession() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ss.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func toolNames(s source) []string {
	specs, _ := s.tools()
	var out []string
	for _, sp := range specs {
		out = append(out, sp.Original)
	}
	return out
}

// A warm MCP source lists every page, follows list_changed, returns text,
// structured and error results as results, and comes back after its
// session ends.
func TestMCPSourceWarm(t *testing.T) {
	oldMin := BackoffMin
	BackoffMin = 10 * time.Millisecond
	defer func() { BackoffMin = oldMin }()
	srv := newTestServer()
	var mu sync.Mutex
	changes := 0
	s := newMCPSource(ServerConfig{Name: "t", Transport: TransportStdio, Command: "unused"}, Owner{}, func() { mu.Lock(); changes++; mu.Unlock() }, t.Logf)
	var dials atomic.Int32
	s.startFn = func(ctx context.Context) (*mcpclient.Session, *exec.Cmd, error) {
		dials.Add(1)
		sess, err := srv.dial(ctx, mcpclient.Options{OnToolsChanged: s.toolsChanged})
		return sess, nil, err
	}
	s.start(true)
	defer s.stop()
	<-s.firstDone()
	if st := s.status(); st.State != StateReady {
		t.Fatalf("state %+v", st)
	}
	if got := strings.Join(toolNames(s), ","); got != "a/b,a:b,echo,fail,five,weather" {
		t.Fatalf("tools over 3 pages: %s", got)
	}

	srv.srv.AddTool(&mcp.Tool{Name: "added", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil
	})
	waitFor(t, "list_changed to add a tool", func() bool { return strings.Contains(strings.Join(toolNames(s), ","), "added") })

	ctx := context.Background()
	res, err := s.call(ctx, ToolSpec{Original: "echo"}, CallRequest{Input: json.RawMessage(`{"message":"hi"}`)})
	if err != nil || res.IsError || !strings.Contains(string(res.Output), "Echo: hi") {
		t.Fatalf("echo: %s %v", res.Output, err)
	}
	res, err = s.call(ctx, ToolSpec{Original: "fail"}, CallRequest{Input: json.RawMessage(`{}`)})
	if err != nil || !res.IsError || !strings.Contains(string(res.Output), `"isError":true`) {
		t.Fatalf("a tool error is a result, not a failure: %s %v", res.Output, err)
	}
	res, err = s.call(ctx, ToolSpec{Original: "weather"}, CallRequest{Input: json.RawMessage(`{}`)})
	if err != nil || !strings.Contains(string(res.Output), `"structuredContent":{"t":21}`) {
		t.Fatalf("structured content: %s %v", res.Output, err)
	}
	_, err = s.call(ctx, ToolSpec{Original: "nope"}, CallRequest{Input: json.RawMessage(`{}`)})
	if abi.CodeOf(err) != abi.EINVAL {
		t.Fatalf("unknown tool: %v, want EINVAL (invalid params)", err)
	}

	srv.dropSession()
	waitFor(t, "restart after the session ended", func() bool { return dials.Load() >= 2 && s.status().State == StateReady })
	if s.status().Restarts < 1 {
		t.Errorf("restarts not counted: %+v", s.status())
	}
	if _, err := s.call(ctx, ToolSpec{Original: "echo"}, CallRequest{Input: json.RawMessage(`{"message":"again"}`)}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// fakeSource offers fixed tools, for projection tests.
type fakeSource struct {
	life
	k, n, pfx string
	specs     []ToolSpec
	listed    bool
}

func (f *fakeSource) key() string         { return f.k }
func (f *fakeSource) name() string        { return f.n }
func (f *fakeSource) prefix() string      { return f.pfx }
func (f *fakeSource) kind() string        { return KindMCP }
func (f *fakeSource) fingerprint() string { return "" }
func (f *fakeSource) start(bool)          {}
func (f *fakeSource) stop()               {}
func (f *fakeSource) tools() ([]ToolSpec, bool) {
	return f.specs, f.listed
}
func (f *fakeSource) status() SourceStatus { return SourceStatus{State: StateReady} }
func (f *fakeSource) call(context.Context, ToolSpec, CallRequest) (Result, error) {
	return Result{}, nil
}

func specs(names ...string) []ToolSpec {
	var out []ToolSpec
	for _, n := range names {
		out = append(out, ToolSpec{Original: n, Input: json.RawMessage(`{"type":"object"}`)})
	}
	return out
}

// Clashes are reported and never silently shadowed: a name two tools map
// to, a name taken by a tool that is not the source's, a home tool the
// system tier already has.
func TestMakePlanClashes(t *testing.T) {
	a := &fakeSource{k: "mcp:a", n: "a", pfx: PrefixMCP, specs: specs("x/y", "x:y", "ok", "mine", "sys"), listed: true}
	b := &fakeSource{k: "mcp:b", n: "b", pfx: PrefixMCP, listed: false}
	disk := map[string]diskEntry{
		"mcp.a.mine":  {ours: false}, // a hand-made tool of that name
		"mcp.b.keep":  {ours: true, sourceKey: "mcp:b", original: "keep"},
		"mcp.a.stale": {ours: true, sourceKey: "mcp:a", original: "stale"},
	}
	p := makePlan([]source{a, b}, disk, map[string]bool{"mcp.a.sys": true})
	if _, ok := p.want["mcp.a.ok"]; !ok || len(p.want) != 1 {
		t.Fatalf("want only mcp.a.ok, got %v", p.want)
	}
	if p.keep["mcp.b.keep"] != "mcp:b" {
		t.Errorf("a source that has not listed yet keeps its projection: %v", p.keep)
	}
	clashes := map[string]string{}
	for _, r := range p.reports["mcp:a"] {
		if r.Status == "clash" {
			clashes[r.Original] = r.Clash
		}
	}
	for orig, want := range map[string]string{"x/y": "two tools", "x:y": "two tools", "mine": "already exists", "sys": "system tier"} {
		if !strings.Contains(clashes[orig], want) {
			t.Errorf("clash of %s = %q, want %q", orig, clashes[orig], want)
		}
	}
	if _, ok := p.want["mcp.a.stale"]; ok {
		t.Errorf("a tool the source no longer lists is still wanted")
	}
}
