// Package provider holds the HTTP model drivers (openai-chat,
// openai-responses, anthropic-messages, gemini, ollama): each maps its
// provider's streaming wire format onto the canonical events and lists the
// provider's models. Drivers register themselves with core/model.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/model/creds"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/wire/httpx"
)

// Adapter keys of .d/default. They configure the connection, are read only
// from .d/default (a per-call params override can never redirect a request
// and its credential elsewhere) and are never sent as request parameters.
const (
	KeyBaseURL       = "base_url"          // endpoint base, e.g. https://api.openai.com/v1
	KeyAuth          = "auth"              // required (default) | optional | none
	KeyIdleTimeoutMS = "idle_timeout_ms"   // silence allowed inside a stream
	KeyHeaderTimeout = "header_timeout_ms" // request → response headers
)

var adapterKeys = map[string]bool{KeyBaseURL: true, KeyAuth: true, KeyIdleTimeoutMS: true, KeyHeaderTimeout: true}

// AuthModes are the values of auth=: required sends the provider's key
// and fails with ENOKEY without one; optional sends it when there is one;
// none never looks one up (a local llama.cpp, vLLM or Ollama server).
var AuthModes = []string{"required", "optional", "none"}

// ValidAuth checks an auth= value.
func ValidAuth(mode string) error {
	if !slices.Contains(AuthModes, mode) {
		return abi.Errorf(abi.EINVAL, "%s=%q: want %s", KeyAuth, mode, strings.Join(AuthModes, ", "))
	}
	return nil
}

// Conn is one model's connection to its provider: where, with which key
// (looked up per call), through which client.
type Conn struct {
	Driver   string
	Provider string
	ModelID  string // stable provider/model
	Base     string // base URL without trailing slash
	Auth     string
	Client   *httpx.Client
	ctlDir   string // the model's .d/, for .d/native diagnostics ("" skips)
	key      string // set by credential, for redaction
}

// NewConn builds the connection of a driver from a model's config.
func NewConn(cfg model.Config, driver, defaultBase, defaultAuth string) (*Conn, error) {
	provider, _, _ := strings.Cut(cfg.Object.Name, "/")
	c := &Conn{Driver: driver, Provider: provider, ModelID: cfg.Object.Name, Base: defaultBase, Auth: defaultAuth}
	if b := strings.TrimSpace(cfg.Defaults[KeyBaseURL]); b != "" {
		c.Base = b
	}
	c.Base = strings.TrimRight(c.Base, "/")
	if !strings.HasPrefix(c.Base, "http://") && !strings.HasPrefix(c.Base, "https://") {
		return nil, abi.Errorf(abi.EINVAL, "model %s: %s=%q is not an http(s) URL", c.ModelID, KeyBaseURL, c.Base)
	}
	if a := strings.TrimSpace(cfg.Defaults[KeyAuth]); a != "" {
		c.Auth = a
	}
	if err := ValidAuth(c.Auth); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "model %s: %v", c.ModelID, err)
	}
	idle, err := msParam(cfg.Defaults, KeyIdleTimeoutMS)
	if err != nil {
		return nil, err
	}
	header, err := msParam(cfg.Defaults, KeyHeaderTimeout)
	if err != nil {
		return nil, err
	}
	c.Client = httpx.NewClient(httpx.Timeouts{Idle: idle, Header: header})
	if cfg.Object.Path != "" {
		c.ctlDir = abi.CtlDir(cfg.Object.Path)
	}
	return c, nil
}

func msParam(p map[string]string, key string) (time.Duration, error) {
	v := strings.TrimSpace(p[key])
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 3_600_000 {
		return 0, abi.Errorf(abi.EINVAL, "%s=%q: want milliseconds in [1,3600000]", key, v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// credential finds the key before anything is sent: an unconfigured
// provider fails with ENOKEY and the endpoint never sees a request.
func (c *Conn) credential(ctx context.Context) (string, error) {
	if c.Auth == "none" {
		return "", nil
	}
	key, _, err := creds.Lookup(ctx, c.Provider)
	if err != nil && c.Auth == "optional" {
		return "", nil
	}
	c.key = key
	return key, err
}

// call is one streaming request of a driver: what differs between APIs.
type call struct {
	url      string
	body     any
	headers  func(key string) map[string]string
	notFound func(body []byte) bool // a 404 that means "unknown model"
	decode   func(ctx context.Context, c *Conn, body io.Reader, o *out) error
}

// stream performs one call for every driver alike: the credential first
// (an unconfigured provider sends nothing), the POST, a refusal of answers
// that are not an API stream, the driver's decoder, and the last response
// id into .d/native.
func (c *Conn) stream(ctx context.Context, k call, names toolNames, emit func(abi.Event) error) error {
	key, err := c.credential(ctx)
	if err != nil {
		return err
	}
	resp, err := c.post(ctx, k.url, k.body, k.headers(key), k.notFound)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := eventStream(c, resp.Header.Get("Content-Type")); err != nil {
		return err
	}
	o := newOut(emit, names)
	if err := k.decode(ctx, c, resp.Body, o); err != nil {
		return err
	}
	c.Native(o.responseID)
	return nil
}

// post sends a JSON body and returns the streaming response of a 2xx
// answer; any other answer is mapped to a stable code (see StatusError).
func (c *Conn) post(ctx context.Context, url string, body any, headers map[string]string, notFoundModel func([]byte) bool) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "%s: failed to encode request: %v", c.Driver, err)
	}
	return c.send(ctx, http.MethodPost, url, bytes.NewReader(b), headers, notFoundModel)
}

func (c *Conn) send(ctx context.Context, method, url string, body io.Reader, headers map[string]string, notFoundModel func([]byte) bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "%s: bad endpoint URL %q", c.Driver, url)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "cortexfs")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return nil, c.TransportError(ctx, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := httpx.ReadLimited(resp.Body, 64<<10)
	return nil, c.StatusError(resp.StatusCode, raw, notFoundModel)
}

// StatusError maps a non-2xx answer to a stable code by HTTP status, never
// by the provider's text: 401/403 EACCES; 404 ENOENT when the provider's
// structured error says the model is unknown, else ENOTSUP (the endpoint
// does not speak this format: the next driver of the route is tried);
// 405/501 ENOTSUP; 400/422 EINVAL; 413 EMSGSIZE; 408/504 ETIMEDOUT;
// 429/529 EBUSY; other 5xx EHOSTDOWN; anything else EPROTO.
func (c *Conn) StatusError(status int, body []byte, notFoundModel func([]byte) bool) error {
	var code abi.Code
	switch {
	case status == 401 || status == 403:
		code = abi.EACCES
	case status == 404 && notFoundModel != nil && notFoundModel(body):
		code = abi.ENOENT
	case status == 404 || status == 405 || status == 501:
		code = abi.ENOTSUP
	case status == 400 || status == 422:
		code = abi.EINVAL
	case status == 413:
		code = abi.EMSGSIZE
	case status == 408 || status == 504:
		code = abi.ETIMEDOUT
	case status == 429 || status == 529:
		code = abi.EBUSY
	case status >= 500:
		code = abi.EHOSTDOWN
	default:
		code = abi.EPROTO
	}
	msg := providerMessage(body)
	if msg != "" {
		msg = ": " + c.redact(msg)
	}
	return abi.Errorf(code, "%s (%s): HTTP %d%s", c.ModelID, c.Driver, status, msg)
}

// TransportError maps a failure to reach or read the endpoint: the caller
// cancelling is ECANCELED, any timeout ETIMEDOUT, everything else
// (refused, unreachable, reset, cut) EHOSTDOWN.
func (c *Conn) TransportError(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case ctx.Err() == context.Canceled:
		return abi.Errorf(abi.ECANCELED, "%s: cancelled", c.ModelID)
	case errors.Is(err, httpx.ErrIdle), errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return abi.Errorf(abi.ETIMEDOUT, "%s (%s): timed out: %s", c.ModelID, c.Driver, c.redact(err.Error()))
	case errors.Is(err, syscall.ECONNREFUSED):
		return abi.Errorf(abi.EHOSTDOWN, "%s (%s): connection refused by %s", c.ModelID, c.Driver, c.Base)
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		return err
	}
	return abi.Errorf(abi.EHOSTDOWN, "%s (%s): %s", c.ModelID, c.Driver, c.redact(err.Error()))
}

// Truncated is the error of a stream that ended before its provider's end
// marker: the connection was cut or the server gave up mid-answer.
func (c *Conn) Truncated() error {
	return abi.Errorf(abi.EHOSTDOWN, "%s (%s): stream ended before the provider finished", c.ModelID, c.Driver)
}

// providerMessage pulls a human message out of an error body: the common
// shapes {"error":{"message":…}}, {"error":"…"}, {"message":…}, else the
// start of a short text body. It is for humans only.
func providerMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	msg := ""
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
			msg = inner.Message
		case json.Unmarshal(v.Error, &s) == nil:
			msg = s
		default:
			msg = v.Message
		}
	} else if len(body) > 0 && !bytes.ContainsAny(body, "<{") {
		msg = string(body)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// redact removes the key from a message, and any word sharing 8 bytes with
// it (providers echo masked keys like "sk-abc…wxyz").
func (c *Conn) redact(msg string) string { return Redact(msg, c.key) }

// Redact is c.redact for a given secret.
func Redact(msg, secret string) string {
	if secret == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, secret, "[redacted]")
	words := strings.Fields(msg)
	changed := false
	for i, w := range words {
		if len(w) < 8 {
			continue
		}
		for j := 0; j+8 <= len(secret); j++ {
			if strings.Contains(w, secret[j:j+8]) {
				words[i], changed = "[redacted]", true
				break
			}
		}
	}
	if changed {
		msg = strings.Join(words, " ")
	}
	return msg
}

// Native records diagnostics in .d/native when the file exists (ctx model
// add creates it): the endpoint kind and the last native response id.
// Best effort; nothing depends on it. The file is never created, and
// never written through a symlink, a hard link or a FIFO (core/safefs):
// a privileged run must not truncate what a user pointed .d/native at.
func (c *Conn) Native(responseID string) {
	if c.ctlDir == "" {
		return
	}
	d, err := safefs.OpenRoot(c.ctlDir)
	if err != nil {
		return
	}
	defer d.Close()
	f, err := d.OpenFile("native", os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "# diagnostics only, not stable ABI\nendpoint=%s\nresponse_id=%s\n", c.Driver, sanitizeLine(responseID))
}

func sanitizeLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
