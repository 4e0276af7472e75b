package sock

import (
	"context"
	"encoding/json"
	"net"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// Client is one connection to an object socket. Send may be called from
// one goroutine (say, a SIGINT handler sending cancel) while another reads
// with Next; Close may be called from any goroutine and makes a blocked
// Next or Send return.
type Client struct {
	conn *net.UnixConn
	r    *jsonl.Reader
	w    *jsonl.Writer
}

// Dial connects to the socket at path. A missing socket file is ENOENT
// (the object has no socket entry, or its service never started); a socket
// file nobody listens on is ECONNREFUSED. Both are *abi.Error.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to connect to %s: %w", path, err)
	}
	return newClient(c.(*net.UnixConn)), nil
}

func newClient(c *net.UnixConn) *Client {
	return &Client{conn: c, r: jsonl.NewReader(c), w: jsonl.NewWriter(c)}
}

// Send writes one request frame. It blocks while the server is not reading.
func (c *Client) Send(req Request) error {
	if err := c.w.Encode(req); err != nil {
		return abi.Errorf(abi.CodeOf(err), "failed to send %s request: %w", truncate(req.Op), err)
	}
	return nil
}

// Next reads the next frame. It returns io.EOF, unwrapped, once the server
// closed the connection. A frame over the 1 MiB limit is EMSGSIZE and an
// undecodable one EPROTO; the Client stays usable after either.
func (c *Client) Next() (abi.Event, error) {
	frame, err := c.r.ReadFrame()
	if err != nil {
		return abi.Event{}, err
	}
	var e abi.Event
	if err := json.Unmarshal(frame, &e); err != nil {
		return abi.Event{}, abi.Errorf(abi.EPROTO, "server sent an invalid frame: %w", err)
	}
	return e, nil
}

// Close closes the connection. Runs it started keep going on the server,
// except temp ones, which are cancelled.
func (c *Client) Close() error {
	return c.conn.Close()
}
