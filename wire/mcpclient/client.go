// Package mcpclient is the MCP client side of a tool source: one session
// with one server over stdio or Streamable HTTP, built on the official Go
// SDK, with every failure mapped to a stable code. It speaks the protocol
// and nothing else: which server to start, as whom, and what a tool may do
// are decided by core/toolsrc.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/cortexfs/core/abi"
)

// ProtocolVersion is the version sent in `initialize`. It is pinned to the
// newest version that uses the initialize handshake (the SDK would probe a
// newer server/discover RPC first, a round trip every current server
// answers with an error).
const ProtocolVersion = "2025-11-25"

// Tool is one tool as the server lists it, schemas kept as raw JSON.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Result is a tool call's result as the server sent it: content blocks,
// optional structured content, and whether the tool reported an error.
type Result struct {
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// Options configure a session.
type Options struct {
	// OnToolsChanged is called (on its own goroutine) when the server sends
	// notifications/tools/list_changed.
	OnToolsChanged func()
	// HTTPClient is used for Streamable HTTP; nil means a client with no
	// proxy from the environment and sane timeouts.
	HTTPClient *http.Client
	// Headers are added to every HTTP request (e.g. Authorization).
	Headers map[string]string
}

// Session is one initialized MCP session.
type Session struct {
	cs     *mcp.ClientSession
	done   chan struct{}
	waitMu sync.Mutex
	err    error
}

// DialStdio starts cmd (its stdin and stdout must be unset; stderr is the
// caller's) and runs `initialize` over its stdio.
func DialStdio(ctx context.Context, cmd *exec.Cmd, o Options) (*Session, error) {
	t := &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	return connect(ctx, t, o)
}

// DialHTTP connects to a Streamable HTTP endpoint and runs `initialize`.
func DialHTTP(ctx context.Context, url string, o Options) (*Session, error) {
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{IdleConnTimeout: 90 * time.Second}}
	}
	if len(o.Headers) > 0 {
		hc = &http.Client{Transport: headerTransport{base: transportOf(hc), headers: o.Headers}, Timeout: hc.Timeout}
	}
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: 2}
	return connect(ctx, t, o)
}

// Connect runs `initialize` over any SDK transport (tests use in-memory
// transports).
func Connect(ctx context.Context, t mcp.Transport, o Options) (*Session, error) {
	return connect(ctx, t, o)
}

func connect(ctx context.Context, t mcp.Transport, o Options) (*Session, error) {
	opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	if o.OnToolsChanged != nil {
		f := o.OnToolsChanged
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { go f() }
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "cortexfs", Version: "1"}, opts)
	cs, err := c.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		return nil, Code(ctx, "initialize", err)
	}
	s := &Session{cs: cs, done: make(chan struct{})}
	go func() {
		err := cs.Wait()
		s.waitMu.Lock()
		s.err = err
		s.waitMu.Unlock()
		close(s.done)
	}()
	return s, nil
}

// Done is closed when the session ends (the server exited, the connection
// broke, or Close was called).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended, once Done is closed.
func (s *Session) Err() error {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return s.err
}

// Close ends the session (for stdio: closes the server's stdin, then
// signals it).
func (s *Session) Close() error { return s.cs.Close() }

// ServerName is the name the server gave in its initialize result.
func (s *Session) ServerName() string {
	if r := s.cs.InitializeResult(); r != nil && r.ServerInfo != nil {
		return r.ServerInfo.Name
	}
	return ""
}

// MaxTools bounds one listing: a server that pages forever is refused.
const MaxTools = 4096

// ListTools lists every tool, following nextCursor page by page.
func (s *Session) ListTools(ctx context.Context) ([]Tool, error) {
	var out []Tool
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, Code(ctx, "tools/list", err)
		}
		if len(out) >= MaxTools {
			return nil, abi.Errorf(abi.EMSGSIZE, "tools/list: more than %d tools", MaxTools)
		}
		tool, err := convertTool(t)
		if err != nil {
			return nil, err
		}
		out = append(out, tool)
	}
	return out, nil
}

func convertTool(t *mcp.Tool) (Tool, error) {
	out := Tool{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	if out.InputSchema, err = rawJSON(t.InputSchema); err != nil {
		return Tool{}, abi.Errorf(abi.EPROTO, "tools/list: tool %q: input schema: %v", trunc(t.Name), err)
	}
	if len(out.InputSchema) == 0 || string(out.InputSchema) == "null" {
		out.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	if t.OutputSchema != nil {
		if out.OutputSchema, err = rawJSON(t.OutputSchema); err != nil {
			return Tool{}, abi.Errorf(abi.EPROTO, "tools/list: tool %q: output schema: %v", trunc(t.Name), err)
		}
	}
	if t.Annotations != nil {
		out.Annotations, _ = json.Marshal(t.Annotations)
	}
	return out, nil
}

func rawJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if r, ok := v.(json.RawMessage); ok {
		return r, nil
	}
	return json.Marshal(v)
}

// CallTool calls name with args (a JSON object). A result with isError is
// returned as a Result, not an error: the tool ran and reported a failure.
// An error is a protocol or transport failure, with a stable code.
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return Result{}, Code(ctx, "tools/call", err)
	}
	var out Result
	if out.Content, err = json.Marshal(res.Content); err != nil {
		return Result{}, abi.Errorf(abi.EPROTO, "tools/call: bad content: %v", err)
	}
	if string(out.Content) == "null" {
		out.Content = json.RawMessage("[]")
	}
	if res.StructuredContent != nil {
		if out.StructuredContent, err = rawJSON(res.StructuredContent); err != nil {
			return Result{}, abi.Errorf(abi.EPROTO, "tools/call: bad structuredContent: %v", err)
		}
	}
	out.IsError = res.IsError
	return out, nil
}

// Code maps an SDK error to a stable code: a closed connection is
// EHOSTDOWN (the server went away), the caller's deadline ETIMEDOUT, a
// cancel ECANCELED, and a JSON-RPC error by its code (invalid params
// EINVAL, unknown method ENOTSUP, malformed messages EPROTO, anything the
// server calls internal EIO).
func Code(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		return err
	}
	switch {
	case ctx.Err() != nil:
		return abi.Errorf(abi.CodeOf(ctx.Err()), "%s: %v", what, ctx.Err())
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing):
		return abi.Errorf(abi.EHOSTDOWN, "%s: the MCP server went away: %v", what, err)
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		code := abi.EIO
		switch we.Code {
		case jsonrpc.CodeInvalidParams:
			code = abi.EINVAL
		case jsonrpc.CodeMethodNotFound:
			code = abi.ENOTSUP
		case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest:
			code = abi.EPROTO
		}
		return abi.Errorf(code, "%s: server error %d: %s", what, we.Code, trunc(we.Message))
	}
	return abi.Errorf(abi.EHOSTDOWN, "%s: %v", what, err)
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
