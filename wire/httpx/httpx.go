// Package httpx is the HTTP plumbing of provider adapters: a client that
// never follows redirects (a redirect must not carry credentials to another
// host) and a response body that fails when the peer goes silent.
package httpx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts of a client. Zero values take the defaults.
type Timeouts struct {
	Connect time.Duration // TCP/TLS connect (default 10s)
	Header  time.Duration // request sent → response headers (default 120s)
	Idle    time.Duration // silence between two reads of a streaming body (default 120s)
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Connect <= 0 {
		t.Connect = 10 * time.Second
	}
	if t.Header <= 0 {
		t.Header = 120 * time.Second
	}
	if t.Idle <= 0 {
		t.Idle = 120 * time.Second
	}
	return t
}

// Client is an http.Client plus the idle timeout of streaming bodies.
type Client struct {
	HTTP *http.Client
	Idle time.Duration
}

// NewClient builds a client that does not follow redirects: the 3xx
// response is returned as is.
func NewClient(t Timeouts) *Client {
	t = t.withDefaults()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: t.Connect, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = t.Connect
	tr.ResponseHeaderTimeout = t.Header
	return &Client{
		HTTP: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Idle: t.Idle,
	}
}

// ErrIdle is returned by a body read when the peer sent nothing for longer
// than the idle timeout.
var ErrIdle = errors.New("httpx: stream idle timeout")

// Do sends req. The response body, when there is one, is wrapped so a read
// that waits longer than the idle timeout fails with ErrIdle (the request is
// cancelled to unblock it).
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := c.HTTP.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = newIdleBody(resp.Body, c.Idle, cancel)
	return resp, nil
}

type idleBody struct {
	rc     io.ReadCloser
	idle   time.Duration
	cancel context.CancelFunc
	timer  *time.Timer
	mu     sync.Mutex
	fired  bool
}

func newIdleBody(rc io.ReadCloser, idle time.Duration, cancel context.CancelFunc) *idleBody {
	b := &idleBody{rc: rc, idle: idle, cancel: cancel}
	b.timer = time.AfterFunc(idle, b.fire)
	return b
}

func (b *idleBody) fire() {
	b.mu.Lock()
	b.fired = true
	b.mu.Unlock()
	b.cancel()
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.rc.Read(p)
	if err != nil {
		b.mu.Lock()
		fired := b.fired
		b.mu.Unlock()
		if fired {
			return n, ErrIdle
		}
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel()
	return err
}

// ReadLimited reads at most limit bytes of r (an error body, a listing).
func ReadLimited(r io.Reader, limit int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, limit))
}
