// Package codex is the Codex app-server JSON-RPC client over a websocket
// (github.com/coder/websocket): requests with ids, notifications, and the
// message shapes cbth reads. Bytes on the wire only; no policy.
package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// MaxMessage bounds one inbound message (thread/read with turns is large).
const MaxMessage = 64 << 20

// RPCError is a JSON-RPC error answer: the server saw the request and
// refused it, so it had no side effect.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("app-server error %d: %s", e.Code, e.Message) }

// ErrClosed is returned for calls on a closed connection. A call that fails
// with it may or may not have reached the server.
var ErrClosed = errors.New("codex: connection closed")

// Notification is one server notification.
type Notification struct {
	Method string
	Params json.RawMessage
}

type message struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

type reply struct {
	result json.RawMessage
	err    error
}

// Client is one websocket connection to an app-server.
type Client struct {
	conn    *websocket.Conn
	next    atomic.Int64
	mu      sync.Mutex
	pending map[int64]chan reply
	onNote  func(Notification)
	done    chan struct{}
	doneErr error
}

// Dial connects to url (ws://127.0.0.1:PORT). No Origin header is sent:
// the app-server refuses browser-originated requests. onNote receives every
// notification in order, on the reader goroutine; it must not block long.
func Dial(ctx context.Context, url string, onNote func(Notification)) (*Client, error) {
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{}})
	if err != nil {
		return nil, fmt.Errorf("failed to dial %s: %w", url, err)
	}
	conn.SetReadLimit(MaxMessage)
	c := &Client{conn: conn, pending: map[int64]chan reply{}, onNote: onNote, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// Done is closed when the connection ends; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is the reason the connection ended (nil while open).
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.doneErr
	default:
		return nil
	}
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close(websocket.StatusNormalClosure, "")
}

func (c *Client) read() {
	ctx := context.Background()
	var err error
	for {
		var data []byte
		_, data, err = c.conn.Read(ctx)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			c.refuseServerRequest(ctx, m.ID)
		case m.Method != "":
			if c.onNote != nil {
				c.onNote(Notification{Method: m.Method, Params: m.Params})
			}
		default:
			c.deliver(m)
		}
	}
	c.mu.Lock()
	c.doneErr = fmt.Errorf("%w: %v", ErrClosed, err)
	for id, ch := range c.pending {
		ch <- reply{err: c.doneErr}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *Client) deliver(m message) {
	var id int64
	if json.Unmarshal(m.ID, &id) != nil {
		return
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch == nil {
		return
	}
	if m.Error != nil {
		ch <- reply{err: m.Error}
		return
	}
	ch <- reply{result: m.Result}
}

// refuseServerRequest answers a server-to-client request (approvals,
// elicitations) that this headless client cannot serve.
func (c *Client) refuseServerRequest(ctx context.Context, id json.RawMessage) {
	b, _ := json.Marshal(message{JSONRPC: "2.0", ID: id, Error: &RPCError{Code: -32601, Message: "not handled by cbth"}})
	_ = c.conn.Write(ctx, websocket.MessageText, b)
}

// Call sends one request and decodes its result into out (may be nil). An
// *RPCError means the server answered with an error; ErrClosed or a
// context error means the outcome is unknown.
func (c *Client) Call(ctx context.Context, method string, params, out any) error {
	id := c.next.Add(1)
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("failed to encode %s params: %w", method, err)
	}
	b, _ := json.Marshal(message{JSONRPC: "2.0", ID: json.RawMessage(fmt.Sprint(id)), Method: method, Params: raw})
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.doneErr != nil {
		c.mu.Unlock()
		return c.doneErr
	}
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("%w: failed to send %s: %v", ErrClosed, method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if out != nil && len(r.result) > 0 {
			if err := json.Unmarshal(r.result, out); err != nil {
				return fmt.Errorf("failed to decode %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Notify sends a notification (no answer).
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	m := message{JSONRPC: "2.0", Method: method}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return err
		}
		m.Params = raw
	}
	b, _ := json.Marshal(m)
	return c.conn.Write(ctx, websocket.MessageText, b)
}

// Experimental is what cbth declares as initialize's experimentalApi:
// thread/settings/update (restoring the user's settings after a delivered
// turn), thread/turns/list and thread/resume excludeTurns (on 0.136) and
// the permission profile fields are experimental. The capability probe
// reads the protocol with the same setting.
const Experimental = true

// Initialize performs the handshake: initialize (experimentalApi as
// Experimental) then initialized.
func (c *Client) Initialize(ctx context.Context, name, version string) (*InitializeResult, error) {
	var r InitializeResult
	p := InitializeParams{ClientInfo: ClientInfo{Name: name, Version: version},
		Capabilities: &InitializeCapabilities{ExperimentalAPI: Experimental}}
	if err := c.Call(ctx, "initialize", p, &r); err != nil {
		return nil, err
	}
	return &r, c.Notify(ctx, "initialized", nil)
}
