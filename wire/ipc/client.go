package ipc

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// Client is one connection to the daemon. Calls are serialized.
type Client struct {
	mu   sync.Mutex
	conn *net.UnixConn
	r    *jsonl.Reader
	w    *jsonl.Writer
	next uint64
}

// Dial connects to the socket at path. Unix sockets only: there is no
// network fallback of any kind.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	uc := c.(*net.UnixConn)
	return &Client{conn: uc, r: jsonl.NewReader(uc), w: jsonl.NewWriter(uc)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call sends op with args and decodes the result into out (may be nil). A
// daemon error comes back as an *abi.Error with the daemon's stable code.
func (c *Client) Call(ctx context.Context, op string, args, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	raw, err := json.Marshal(args)
	if err != nil {
		return abi.Errorf(abi.EINVAL, "ipc: cannot encode args: %v", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	} else {
		c.conn.SetDeadline(time.Time{})
	}
	sendErr := c.w.Encode(Request{V: Version, ID: c.next, Op: op, Args: raw})
	// Even when the send failed the daemon may have answered first (a
	// refused peer gets its EACCES before the daemon hangs up).
	var resp Response
	if err := c.r.Decode(&resp); err != nil {
		if sendErr != nil {
			return abi.Errorf(abi.ECONNREFUSED, "ipc: send to daemon: %v", sendErr)
		}
		return abi.Errorf(abi.ECONNREFUSED, "ipc: daemon closed the connection: %v", err)
	}
	if resp.V != Version {
		return abi.Errorf(abi.EPROTO, "ipc: daemon answered with protocol v%d, this client speaks v%d", resp.V, Version)
	}
	if !resp.OK {
		if resp.Error == nil {
			return abi.Errorf(abi.EPROTO, "ipc: error response without an error")
		}
		return &abi.Error{Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if resp.ID != c.next || sendErr != nil {
		return abi.Errorf(abi.EPROTO, "ipc: response id %d for request %d", resp.ID, c.next)
	}
	if out != nil && len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, out); err != nil {
			return abi.Errorf(abi.EPROTO, "ipc: bad result for %s: %v", op, err)
		}
	}
	return nil
}
