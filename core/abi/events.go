package abi

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// EventType is the "type" of a canonical stream frame (model-abi.md,
// "Canonical Event Stream"), plus pong for sockets.
type EventType string

const (
	EvStart            EventType = "start"
	EvDelta            EventType = "delta"
	EvMessage          EventType = "message"
	EvReasoningDelta   EventType = "reasoning_delta"
	EvReasoningMessage EventType = "reasoning_message"
	EvToolCall         EventType = "tool_call"
	EvUsage            EventType = "usage"
	EvError            EventType = "error"
	EvDone             EventType = "done"
	EvPong             EventType = "pong"
)

// Done statuses.
const (
	StatusOK        = "ok"
	StatusError     = "error"
	StatusCancelled = "cancelled"
)

// Part is one element of a message's content array.
type Part struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// Event is one canonical frame. Only the fields of its Type are written, in
// the seed's order, so the JSON matches the seed examples field for field:
//
//	{"type":"start","id":…,"run":…,"model":…}
//	{"type":"delta","id":…,"run":…,"text":…}
//	{"type":"message","id":…,"run":…,"role":…,"content":[…]}
//	{"type":"usage","id":…,"run":…,"input_tokens":…,"output_tokens":…}
//	{"type":"error","id":…,"run":…,"code":…,"message":…}
//	{"type":"done","id":…,"run":…,"status":…}
//
// id is the per-session event id that sockets add; one-shot exec leaves it
// empty and it is omitted.
type Event struct {
	Type  EventType `json:"type"`
	ID    string    `json:"id,omitempty"`
	Run   string    `json:"run,omitempty"`
	Model string    `json:"model,omitempty"` // start: stable model id
	Agent string    `json:"agent,omitempty"` // start: agent name, for agent runs
	Tool  string    `json:"tool,omitempty"`  // start: tool name, for tool runs

	Text    string `json:"text,omitempty"`    // delta, reasoning_delta, reasoning_message
	Role    string `json:"role,omitempty"`    // message: assistant | tool | user
	Content []Part `json:"content,omitempty"` // message

	// tool_call (and message role "tool": the call it answers).
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`

	InputTokens     int `json:"input_tokens,omitempty"`
	OutputTokens    int `json:"output_tokens,omitempty"`
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`

	Code    Code   `json:"code,omitempty"`    // error
	Message string `json:"message,omitempty"` // error: for humans only
	Status  string `json:"status,omitempty"`  // done: ok | error | cancelled
}

// Constructors for the common frames.

func StartEvent(run, model string) Event { return Event{Type: EvStart, Run: run, Model: model} }
func DeltaEvent(run, text string) Event  { return Event{Type: EvDelta, Run: run, Text: text} }
func DoneEvent(run, status string) Event { return Event{Type: EvDone, Run: run, Status: status} }

func TextMessage(run, role, text string) Event {
	return Event{Type: EvMessage, Run: run, Role: role, Content: []Part{{Type: "text", Text: text}}}
}

func UsageEvent(run string, in, out int) Event {
	return Event{Type: EvUsage, Run: run, InputTokens: in, OutputTokens: out}
}

// ErrorEvent turns err into an error frame carrying its stable code.
func ErrorEvent(run string, err error) Event {
	if err == nil {
		err = Errorf(EIO, "unknown error")
	}
	return Event{Type: EvError, Run: run, Code: CodeOf(err), Message: err.Error()}
}

// MessageText concatenates the text parts of a message.
func (e Event) MessageText() string {
	if len(e.Content) == 1 {
		return e.Content[0].Text
	}
	var b bytes.Buffer
	for _, p := range e.Content {
		b.WriteString(p.Text)
	}
	return b.String()
}

// MarshalJSON writes exactly the fields of e.Type, in the seed's order.
// Required fields are written even when zero (usage counts, done status).
func (e Event) MarshalJSON() ([]byte, error) {
	w := objWriter{}
	w.str("type", string(e.Type))
	w.optStr("id", e.ID)
	if e.Type != EvPong || e.Run != "" {
		w.optStr("run", e.Run)
	}
	switch e.Type {
	case EvStart:
		if e.Model != "" || e.Agent == "" && e.Tool == "" {
			w.str("model", e.Model)
		}
		w.optStr("agent", e.Agent)
		w.optStr("tool", e.Tool)
	case EvDelta, EvReasoningDelta, EvReasoningMessage:
		w.str("text", e.Text)
	case EvMessage:
		w.str("role", e.Role)
		content := e.Content
		if content == nil {
			content = []Part{}
		}
		w.raw("content", content)
		w.optStr("call_id", e.CallID)
		w.optStr("name", e.Name)
	case EvToolCall:
		w.str("call_id", e.CallID)
		w.str("name", e.Name)
		args := e.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		w.raw("arguments", args)
	case EvUsage:
		w.num("input_tokens", e.InputTokens)
		w.num("output_tokens", e.OutputTokens)
		if e.ReasoningTokens != 0 {
			w.num("reasoning_tokens", e.ReasoningTokens)
		}
	case EvError:
		w.str("code", string(e.Code))
		w.str("message", e.Message)
	case EvDone:
		w.str("status", e.Status)
	case EvPong:
	default:
		// Unknown types keep every set field so nothing is silently lost.
		type plain Event
		return json.Marshal(plain(e))
	}
	return w.close()
}

// UnmarshalJSON reads any frame; unknown fields are ignored.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = Event(p)
	return nil
}

type objWriter struct {
	b   bytes.Buffer
	err error
}

func (w *objWriter) key(k string) {
	if w.b.Len() == 0 {
		w.b.WriteByte('{')
	} else {
		w.b.WriteByte(',')
	}
	w.b.WriteString(strconv.Quote(k))
	w.b.WriteByte(':')
}

func (w *objWriter) str(k, v string) { w.raw(k, v) }

func (w *objWriter) optStr(k, v string) {
	if v != "" {
		w.raw(k, v)
	}
}

func (w *objWriter) num(k string, v int) {
	w.key(k)
	w.b.WriteString(strconv.Itoa(v))
}

func (w *objWriter) raw(k string, v any) {
	var b []byte
	var err error
	if r, ok := v.(json.RawMessage); ok {
		// Compact: raw JSON from a provider may span lines, a frame may not.
		var c bytes.Buffer
		if json.Compact(&c, r) != nil {
			err = Errorf(EINVAL, "field %s: invalid JSON", k)
		}
		b = c.Bytes()
	} else {
		b, err = marshalPlain(v)
	}
	if err != nil && w.err == nil {
		w.err = err
	}
	w.key(k)
	w.b.Write(b)
}

func (w *objWriter) close() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	w.b.WriteByte('}')
	return w.b.Bytes(), nil
}

// marshalPlain is json.Marshal without HTML escaping: model text full of
// "<" and "&" stays readable in the stream.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
