// Package fake serves local stand-ins of model provider HTTP APIs for
// tests: OpenAI Chat Completions and Responses, Anthropic Messages, Gemini
// and Ollama, each in its exact streaming wire format. The reply is chosen
// by the requested model id (a scenario name: text, reasoning, tool, error,
// truncated, cut, e401, e429, e500, missing, slow) or by a per-test Script.
// Test code only; never shipped behaviour.
package fake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Kind is a provider API format, named like the driver that speaks it.
type Kind string

const (
	OpenAIChat      Kind = "openai-chat"
	OpenAIResponses Kind = "openai-responses"
	Anthropic       Kind = "anthropic-messages"
	Gemini          Kind = "gemini"
	Ollama          Kind = "ollama"
)

// Kinds lists every format the server speaks.
var Kinds = []Kind{OpenAIChat, OpenAIResponses, Anthropic, Gemini, Ollama}

// Request is one request the server saw.
type Request struct {
	Kind   Kind
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Model  string // model id the request named ("" for listings)
}

// Reply is what the server answers: a status, then Chunks written and
// flushed one by one (Delay apart). Cut drops the connection after the
// chunks instead of ending the body properly.
type Reply struct {
	Status      int
	ContentType string
	Chunks      []string
	Delay       time.Duration
	Cut         bool
}

// Server is a fake provider speaking every Kind, each on its own paths:
// /v1/chat/completions, /v1/responses, /v1/models (OpenAI: base URL
// URL+"/v1"); /v1/messages, /v1/models with anthropic-version (Anthropic);
// /v1beta/models/M:streamGenerateContent, /v1beta/models (Gemini);
// /api/chat, /api/tags (Ollama).
type Server struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []Request
	script func(Request) (Reply, bool)
	// NoResponses makes /v1/responses answer 404 like an OpenAI-compatible
	// server without the Responses API.
	NoResponses bool
}

// New starts a server; it is closed with the test.
func New() *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Script overrides the scenario choice: when f returns true its reply is
// used.
func (s *Server) Script(f func(Request) (Reply, bool)) {
	s.mu.Lock()
	s.script = f
	s.mu.Unlock()
}

// Requests returns what the server saw so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// BaseURL is the base URL a driver of kind k is configured with.
func (s *Server) BaseURL(k Kind) string {
	if k == OpenAIChat || k == OpenAIResponses {
		return s.URL + "/v1"
	}
	return s.URL
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	kind, list := route(r)
	req.Kind = kind
	req.Model = requestModel(kind, r.URL.Path, body)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	script, noResp := s.script, s.NoResponses
	s.mu.Unlock()
	var rep Reply
	ok := false
	if script != nil {
		rep, ok = script(req)
	}
	switch {
	case ok:
	case kind == "" || noResp && kind == OpenAIResponses:
		rep = Reply{Status: 404, ContentType: "application/json", Chunks: []string{
			`{"error":{"message":"Invalid URL (` + r.Method + ` ` + r.URL.Path + `)","type":"invalid_request_error","param":null,"code":null}}`}}
	case list:
		rep = listing(kind)
	default:
		rep = Scenario(kind, req.Model, bearerKey(r))
	}
	write(w, rep)
}

// route tells the format and whether it is a listing.
func route(r *http.Request) (Kind, bool) {
	p := r.URL.Path
	switch {
	case r.Method == "POST" && p == "/v1/chat/completions":
		return OpenAIChat, false
	case r.Method == "POST" && p == "/v1/responses":
		return OpenAIResponses, false
	case r.Method == "POST" && p == "/v1/messages":
		return Anthropic, false
	case r.Method == "GET" && p == "/v1/models" && r.Header.Get("anthropic-version") != "":
		return Anthropic, true
	case r.Method == "GET" && p == "/v1/models":
		return OpenAIChat, true
	case r.Method == "POST" && strings.HasPrefix(p, "/v1beta/models/") && strings.HasSuffix(p, ":streamGenerateContent"):
		return Gemini, false
	case r.Method == "GET" && p == "/v1beta/models":
		return Gemini, true
	case r.Method == "POST" && p == "/api/chat":
		return Ollama, false
	case r.Method == "GET" && p == "/api/tags":
		return Ollama, true
	}
	return "", false
}

func requestModel(k Kind, path string, body []byte) string {
	if k == Gemini {
		m := strings.TrimPrefix(path, "/v1beta/models/")
		return strings.TrimSuffix(m, ":streamGenerateContent")
	}
	var v struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Model
}

// bearerKey is the credential the request carried, whatever the header.
func bearerKey(r *http.Request) string {
	if k := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); k != "" {
		return k
	}
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return r.Header.Get("x-goog-api-key")
}

func write(w http.ResponseWriter, rep Reply) {
	if rep.Status == 0 {
		rep.Status = 200
	}
	if rep.ContentType == "" {
		rep.ContentType = "text/event-stream"
	}
	w.Header().Set("Content-Type", rep.ContentType)
	w.WriteHeader(rep.Status)
	fl, _ := w.(http.Flusher)
	for i, c := range rep.Chunks {
		if i > 0 && rep.Delay > 0 {
			time.Sleep(rep.Delay)
		}
		if _, err := io.WriteString(w, c); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
	if rep.Cut {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
	}
}

// sseData renders events as "data: …\n\n" frames (named when name != "").
func sseData(name string, payloads ...string) []string {
	out := make([]string, len(payloads))
	for i, p := range payloads {
		var b bytes.Buffer
		if name != "" {
			b.WriteString("event: " + name + "\n")
		}
		b.WriteString("data: " + p + "\n\n")
		out[i] = b.String()
	}
	return out
}

func jsonReply(status int, body string) Reply {
	return Reply{Status: status, ContentType: "application/json", Chunks: []string{body}}
}

// Scenario is the reply of kind k for a model named like a scenario; any
// other name streams "hello" back. key is the credential the request
// carried: the e401 reply echoes it, as real providers echo masked keys,
// so tests prove drivers redact it.
func Scenario(k Kind, name, key string) Reply {
	switch k {
	case OpenAIChat:
		return chatScenario(name, key)
	case OpenAIResponses:
		return responsesScenario(name, key)
	case Anthropic:
		return anthropicScenario(name, key)
	case Gemini:
		return geminiScenario(name, key)
	case Ollama:
		return ollamaScenario(name, key)
	}
	return jsonReply(404, `{"error":"unknown kind"}`)
}

// slow answers headers only after a pause longer than tests' timeouts.
func slow() Reply {
	return Reply{Chunks: []string{": waiting\n\n", ""}, Delay: 1500 * time.Millisecond}
}
