package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// DefaultTimeout bounds a call whose context has no deadline: a stopped or
// wedged daemon never holds a client forever.
const DefaultTimeout = 60 * time.Second

// Client is one connection to the daemon. Calls are serialized.
type Client struct {
	mu   sync.Mutex
	conn *net.UnixConn
	r    *jsonl.Reader
	w    *writer
	next uint64
	// Timeout replaces DefaultTimeout for calls without a deadline.
	Timeout time.Duration
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
	return &Client{conn: uc, r: jsonl.NewReader(uc), w: &writer{c: uc}}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call sends op with args and decodes the result into out (may be nil). A
// daemon error comes back as an *abi.Error with the daemon's stable code.
func (c *Client) Call(ctx context.Context, op string, args, out any) error {
	return c.CallFiles(ctx, op, args, out, nil)
}

// CallFiles is Call with open files handed to the daemon (SCM_RIGHTS): the
// daemon reads what this process could open, never the path itself.
func (c *Client) CallFiles(ctx context.Context, op string, args, out any, files []*os.File) error {
	if len(files) > MaxFds {
		return abi.Errorf(abi.EINVAL, "ipc: at most %d files per request", MaxFds)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	raw, err := json.Marshal(args)
	if err != nil {
		return abi.Errorf(abi.EINVAL, "ipc: cannot encode args: %v", err)
	}
	msg, err := json.Marshal(Request{V: Version, ID: c.next, Op: op, Args: raw, Fds: len(files)})
	if err != nil {
		return abi.Errorf(abi.EINVAL, "ipc: cannot encode request: %v", err)
	}
	if len(msg) > MaxRequest {
		return abi.Errorf(abi.EMSGSIZE, "request of %d bytes exceeds the %d-byte limit of the daemon protocol; "+
			"pass large inputs as files (e.g. --result-file)", len(msg), MaxRequest)
	}
	dl, ok := ctx.Deadline()
	if !ok {
		t := c.Timeout
		if t <= 0 {
			t = DefaultTimeout
		}
		dl = time.Now().Add(t)
	}
	c.conn.SetDeadline(dl)
	sendErr := c.w.write(c.next, msg, files)
	// Even when the send failed the daemon may have answered first (a
	// refused peer gets its EACCES before the daemon hangs up).
	reply, err := readMessage(c.r, MaxReply)
	if err != nil {
		return readError(err, sendErr)
	}
	var resp Response
	if err := json.Unmarshal(reply, &resp); err != nil {
		return abi.Errorf(abi.EPROTO, "ipc: bad response: %v", err)
	}
	if resp.V != Version {
		return abi.Errorf(abi.EPROTO, "ipc: daemon answered with protocol v%d, this client speaks v%d; "+
			"run `cbth daemon stop` and retry with one cbth binary", resp.V, Version)
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

// ErrNotDelivered marks a call the daemon provably never read: the
// connection was reset (a Unix socket resets only when the peer closed
// with our bytes still unread) or the send itself failed. Such a call had
// no effect and may be retried.
var ErrNotDelivered = errors.New("request not delivered")

// readError names why no answer came: the deadline (ETIMEDOUT), a reply
// too large (EMSGSIZE), or a daemon that hung up (ECONNREFUSED).
func readError(err, sendErr error) error {
	notRead := errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(sendErr, syscall.EPIPE) || errors.Is(sendErr, syscall.ECONNRESET)
	switch {
	case notRead:
		return &abi.Error{Code: abi.ECONNREFUSED, Err: ErrNotDelivered,
			Message: "ipc: the daemon went away before reading the request (it had no effect)"}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return abi.Errorf(abi.ETIMEDOUT, "ipc: no answer from the daemon before the deadline")
	case abi.CodeOf(err) == abi.EMSGSIZE, abi.CodeOf(err) == abi.EPROTO:
		return err
	case sendErr != nil && errors.Is(sendErr, os.ErrDeadlineExceeded):
		return abi.Errorf(abi.ETIMEDOUT, "ipc: the daemon did not take the request before the deadline")
	case sendErr != nil:
		return abi.Errorf(abi.ECONNREFUSED, "ipc: send to daemon: %v", sendErr)
	case errors.Is(err, io.EOF):
		return abi.Errorf(abi.ECONNREFUSED, "ipc: the daemon closed the connection before answering "+
			"(it may have exited; the request's effect is unknown)")
	}
	return abi.Errorf(abi.ECONNREFUSED, "ipc: reading the daemon's answer: %v", err)
}
