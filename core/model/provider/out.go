package provider

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
)

// out assembles the canonical body frames every driver emits, in one order:
// reasoning_delta… then reasoning_message when the reasoning ends (at the
// first text, tool call or the finish), delta… as text arrives, tool_call
// when a call is complete, and at the finish the assistant message (when
// there was text) and usage (when the provider reported it).
type out struct {
	emit       func(abi.Event) error
	names      toolNames
	text       strings.Builder
	reasoning  strings.Builder
	inThought  bool
	usage      *abi.Event
	calls      int
	responseID string
}

func newOut(emit func(abi.Event) error, names toolNames) *out {
	return &out{emit: emit, names: names}
}

func (o *out) Text(s string) error {
	if s == "" {
		return nil
	}
	if err := o.EndReasoning(); err != nil {
		return err
	}
	o.text.WriteString(s)
	return o.emit(abi.DeltaEvent("", s))
}

func (o *out) Reasoning(s string) error {
	if s == "" {
		return nil
	}
	o.inThought = true
	o.reasoning.WriteString(s)
	return o.emit(abi.Event{Type: abi.EvReasoningDelta, Text: s})
}

// EndReasoning closes a reasoning block with its full text.
func (o *out) EndReasoning() error {
	if !o.inThought {
		return nil
	}
	o.inThought = false
	t := o.reasoning.String()
	o.reasoning.Reset()
	return o.emit(abi.Event{Type: abi.EvReasoningMessage, Text: t})
}

// ToolCall emits a complete call. Arguments must be a JSON object (empty
// means {}); a provider that sent anything else spoke its format wrongly.
// A missing id is numbered call_1, call_2… in stream order.
func (o *out) ToolCall(id, name string, args []byte) error {
	if err := o.EndReasoning(); err != nil {
		return err
	}
	o.calls++
	if id == "" {
		id = "call_" + strconv.Itoa(o.calls)
	}
	if strings.TrimSpace(string(args)) == "" {
		args = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return abi.Errorf(abi.EPROTO, "tool call %s: arguments are not a JSON object", o.names.decode(name))
	}
	return o.emit(abi.Event{Type: abi.EvToolCall, CallID: id, Name: o.names.decode(name), Arguments: json.RawMessage(args)})
}

// Usage records token counts; the last report wins.
func (o *out) Usage(in, outTok, reasoning int) {
	o.usage = &abi.Event{Type: abi.EvUsage, InputTokens: in, OutputTokens: outTok, ReasoningTokens: reasoning}
}

// Finish closes the stream body: reasoning, message, usage.
func (o *out) Finish() error {
	if err := o.EndReasoning(); err != nil {
		return err
	}
	if o.text.Len() > 0 {
		if err := o.emit(abi.TextMessage("", "assistant", o.text.String())); err != nil {
			return err
		}
	}
	if o.usage != nil {
		return o.emit(*o.usage)
	}
	return nil
}

// toolNames maps canonical tool names (which may hold '.' and '+') to the
// [A-Za-z0-9_-]{1,64} names provider APIs accept, and back.
type toolNames struct{ enc, dec map[string]string }

func newToolNames(req model.Request) toolNames {
	t := toolNames{enc: map[string]string{}, dec: map[string]string{}}
	for _, s := range req.Tools {
		t.add(s.Name)
	}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			t.add(c.Name)
		}
		if m.Role == "tool" && m.Name != "" {
			t.add(m.Name)
		}
	}
	return t
}

func (t toolNames) add(name string) {
	if _, ok := t.enc[name]; ok {
		return
	}
	base := WireToolName(name)
	enc := base
	for n := 2; t.dec[enc] != ""; n++ {
		enc = base + "_" + strconv.Itoa(n)
	}
	t.enc[name], t.dec[enc] = enc, name
}

// WireToolName is the provider-side name of a canonical tool name when no
// other offered tool collides with it: every byte outside [A-Za-z0-9_-]
// becomes '_', cut to 60 bytes ("shell.exec" → "shell_exec"). A caller
// that sees a tool call by a name that was not offered (so the request's
// own mapping cannot decode it) uses this to find the tool it stands for.
func WireToolName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 60 {
		b = b[:60]
	}
	if len(b) == 0 {
		b = []byte("tool")
	}
	return string(b)
}

func (t toolNames) encode(name string) string {
	if e, ok := t.enc[name]; ok {
		return e
	}
	return name
}

func (t toolNames) decode(name string) string {
	if d, ok := t.dec[name]; ok {
		return d
	}
	return name
}

// nativeID is the provider's model id: .d/id, else the model component.
func nativeID(req model.Request) string {
	if req.NativeID != "" {
		return req.NativeID
	}
	_, m, _ := strings.Cut(req.Model, "/")
	return m
}

// params reads the per-request parameters (the merged .d/default and
// per-call overrides) a driver maps onto its provider's request. Adapter
// keys are never parameters; unknown keys are ignored (other drivers'
// parameters such as the debug driver's repeat).
type params map[string]string

func (p params) raw(key string) (string, bool) {
	if adapterKeys[key] {
		return "", false
	}
	v, ok := p[key]
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (p params) float(key string) (*float64, error) {
	v, ok := p.raw(key)
	if !ok {
		return nil, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "parameter %s=%q: want a number", key, v)
	}
	return &f, nil
}

func (p params) int(key string) (*int, error) {
	v, ok := p.raw(key)
	if !ok {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return nil, abi.Errorf(abi.EINVAL, "parameter %s=%q: want a non-negative integer", key, v)
	}
	return &n, nil
}

func (p params) bool(key string) (*bool, error) {
	v, ok := p.raw(key)
	if !ok {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "parameter %s=%q: want true or false", key, v)
	}
	return &b, nil
}

// strs reads a string list: a JSON array of strings or one plain string.
func (p params) strs(key string) ([]string, error) {
	v, ok := p.raw(key)
	if !ok {
		return nil, nil
	}
	if strings.HasPrefix(v, "[") {
		var l []string
		if err := json.Unmarshal([]byte(v), &l); err != nil {
			return nil, abi.Errorf(abi.EINVAL, "parameter %s: want a string or a JSON array of strings", key)
		}
		return l, nil
	}
	return []string{v}, nil
}

// common are the parameters every driver understands.
type common struct {
	Temperature *float64
	TopP        *float64
	MaxTokens   *int
	Stop        []string
	Seed        *int
}

func commonParams(p params) (common, error) {
	var c common
	var err error
	set := func(e error) {
		if err == nil {
			err = e
		}
	}
	var e error
	c.Temperature, e = p.float("temperature")
	set(e)
	c.TopP, e = p.float("top_p")
	set(e)
	c.MaxTokens, e = p.int("max_tokens")
	set(e)
	c.Stop, e = p.strs("stop")
	set(e)
	c.Seed, e = p.int("seed")
	set(e)
	return c, err
}

// schema is a tool's parameters, an empty object schema when absent.
func schema(s model.ToolSpec) json.RawMessage {
	if len(s.Parameters) == 0 || string(s.Parameters) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s.Parameters
}

// argsObject is a history tool call's arguments as a JSON object value.
func argsObject(a json.RawMessage) json.RawMessage {
	if len(a) == 0 || string(a) == "null" {
		return json.RawMessage("{}")
	}
	if a[0] == '"' { // arguments kept as an encoded string
		var s string
		if json.Unmarshal(a, &s) == nil && json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
	}
	return a
}
