// Package codexfake is a scriptable fake of the OpenAI Responses API
// (POST /v1/responses, stream:true) for end-to-end tests: real codex runs
// real turns offline against it. Every request body is recorded; each
// request takes the next scripted Behavior, or the default one.
package codexfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Kind is what the fake does with one request.
type Kind string

const (
	// Answer streams a normal assistant message and response.completed.
	Answer Kind = "answer"
	// Fail streams response.failed, which fails the turn.
	Fail Kind = "fail"
	// Slow waits Delay (or until Release) before answering normally.
	Slow Kind = "slow"
)

// Behavior scripts one response.
type Behavior struct {
	Kind  Kind
	Text  string        // assistant text (Answer, Slow)
	Delay time.Duration // Slow: how long to hold the stream open
}

// Request is one recorded request.
type Request struct {
	At   time.Time
	Path string
	Body []byte
}

// Server is a running fake.
type Server struct {
	URL string // base URL, e.g. http://127.0.0.1:PORT/v1

	mu       sync.Mutex
	script   []Behavior
	def      Behavior
	requests []Request
	release  chan struct{}
	notify   chan struct{}
	srv      *http.Server
}

// Start listens on a loopback port and serves until Close.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("codexfake: failed to listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/v1", def: Behavior{Kind: Answer, Text: "done"},
		release: make(chan struct{}), notify: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.handle)
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server and releases any held slow response.
func (s *Server) Close() {
	s.Release()
	s.srv.Close()
}

// SetDefault sets the behaviour for requests beyond the script.
func (s *Server) SetDefault(b Behavior) {
	s.mu.Lock()
	s.def = b
	s.mu.Unlock()
}

// Push appends behaviours for the next requests, in order.
func (s *Server) Push(b ...Behavior) {
	s.mu.Lock()
	s.script = append(s.script, b...)
	s.mu.Unlock()
}

// Release ends every slow response now being held (once).
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// Requests returns a copy of every recorded request so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Responses returns the recorded /responses requests whose body contains sub.
func (s *Server) Matching(sub string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if strings.HasSuffix(r.Path, "/responses") && strings.Contains(string(r.Body), sub) {
			out = append(out, r)
		}
	}
	return out
}

// WaitMatching waits until a /responses request containing sub arrived.
func (s *Server) WaitMatching(sub string, d time.Duration) (Request, bool) {
	end := time.After(d)
	for {
		if m := s.Matching(sub); len(m) > 0 {
			return m[0], true
		}
		select {
		case <-s.notify:
		case <-end:
			return Request{}, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) next() Behavior {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) > 0 {
		b := s.script[0]
		s.script = s.script[1:]
		return b
	}
	return s.def
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	s.mu.Lock()
	s.requests = append(s.requests, Request{At: time.Now(), Path: r.URL.Path, Body: body})
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		// codex probes /models and others; an empty list is a valid answer.
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[],"models":[]}`)
		return
	}
	b := s.next()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	respID := fmt.Sprintf("resp_%d", time.Now().UnixNano())
	sse(w, "response.created", map[string]any{"type": "response.created",
		"response": map[string]any{"id": respID, "status": "in_progress"}})
	flush()
	switch b.Kind {
	case Fail:
		sse(w, "response.failed", map[string]any{"type": "response.failed", "response": map[string]any{
			"id": respID, "status": "failed",
			"error": map[string]any{"code": "server_error", "message": "codexfake: scripted failure"}}})
		flush()
		return
	case Slow:
		select {
		case <-time.After(b.Delay):
		case <-s.release:
		case <-r.Context().Done():
			return
		}
	}
	answer(w, respID, b.Text)
	flush()
}

func answer(w io.Writer, respID, text string) {
	if text == "" {
		text = "done"
	}
	itemID := "msg_" + respID
	item := map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": itemID,
		"output_index": 0, "content_index": 0, "delta": text})
	done := map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": done})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": respID, "status": "completed", "output": []any{done},
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}})
}

func sse(w io.Writer, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

// ConfigTOML is a CODEX_HOME/config.toml that points codex at the fake and
// trusts each project dir, so no first-run prompt blocks a test.
func (s *Server) ConfigTOML(projects ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `model = "fake-model"
model_provider = "codexfake"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.codexfake]
name = "codexfake"
base_url = %q
wire_api = "responses"
env_key = "CODEXFAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 300000
`, s.URL)
	for _, p := range projects {
		fmt.Fprintf(&b, "\n[projects.%q]\ntrust_level = \"trusted\"\n", p)
	}
	return b.String()
}
