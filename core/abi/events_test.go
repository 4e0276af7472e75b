package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestEventConstants(t *testing.T) {
	types := map[EventType]string{
		EvStart: "start", EvDelta: "delta", EvMessage: "message",
		EvReasoningDelta: "reasoning_delta", EvReasoningMessage: "reasoning_message",
		EvToolCall: "tool_call", EvUsage: "usage", EvError: "error", EvDone: "done", EvPong: "pong",
	}
	for ty, want := range types {
		if string(ty) != want {
			t.Errorf("event type %q, want %q", ty, want)
		}
	}
	if StatusOK != "ok" || StatusError != "error" || StatusCancelled != "cancelled" {
		t.Errorf("statuses = %q %q %q", StatusOK, StatusError, StatusCancelled)
	}
}

// The seed lines of model-abi.md, byte for byte.
func TestEventGoldenSeed(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"start", StartEvent("r1", "debug/echo"), `{"type":"start","run":"r1","model":"debug/echo"}`},
		{"delta", DeltaEvent("r1", "hello"), `{"type":"delta","run":"r1","text":"hello"}`},
		{"message", TextMessage("r1", "assistant", "hello"), `{"type":"message","run":"r1","role":"assistant","content":[{"type":"text","text":"hello"}]}`},
		{"usage", UsageEvent("r1", 10, 1), `{"type":"usage","run":"r1","input_tokens":10,"output_tokens":1}`},
		{"done ok", DoneEvent("r1", StatusOK), `{"type":"done","run":"r1","status":"ok"}`},
		{"error", ErrorEvent("r1", Errorf(EACCES, "permission denied")), `{"type":"error","run":"r1","code":"EACCES","message":"permission denied"}`},
		{"done error", DoneEvent("r1", StatusError), `{"type":"done","run":"r1","status":"error"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGolden(t, tt.ev, tt.want)
		})
	}
}

func TestEventGoldenMore(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		// Socket frames: "id" right after "type".
		{"socket delta", Event{Type: EvDelta, ID: "event-id", Run: "run-id", Text: "..."},
			`{"type":"delta","id":"event-id","run":"run-id","text":"..."}`},
		{"socket start", Event{Type: EvStart, ID: "1", Run: "r", Model: "debug/echo"},
			`{"type":"start","id":"1","run":"r","model":"debug/echo"}`},
		{"socket done", Event{Type: EvDone, ID: "9", Run: "r", Status: StatusCancelled},
			`{"type":"done","id":"9","run":"r","status":"cancelled"}`},
		{"pong", Event{Type: EvPong}, `{"type":"pong"}`},
		{"pong with id", Event{Type: EvPong, ID: "7"}, `{"type":"pong","id":"7"}`},
		{"pong drops unrelated fields", Event{Type: EvPong, Text: "x", Status: "ok", InputTokens: 3}, `{"type":"pong"}`},

		// Required fields are written even when zero.
		{"usage zero counts", UsageEvent("r1", 0, 0), `{"type":"usage","run":"r1","input_tokens":0,"output_tokens":0}`},
		{"usage reasoning tokens", Event{Type: EvUsage, Run: "r1", InputTokens: 1, OutputTokens: 2, ReasoningTokens: 5},
			`{"type":"usage","run":"r1","input_tokens":1,"output_tokens":2,"reasoning_tokens":5}`},
		{"usage negative", UsageEvent("r1", -1, 0), `{"type":"usage","run":"r1","input_tokens":-1,"output_tokens":0}`},
		{"delta empty text", DeltaEvent("r1", ""), `{"type":"delta","run":"r1","text":""}`},
		{"done empty status", DoneEvent("r1", ""), `{"type":"done","run":"r1","status":""}`},
		{"no run", DeltaEvent("", "x"), `{"type":"delta","text":"x"}`},
		{"error empty", Event{Type: EvError}, `{"type":"error","code":"","message":""}`},

		// start with an agent.
		{"start agent only", Event{Type: EvStart, Run: "r1", Agent: "helper"}, `{"type":"start","run":"r1","agent":"helper"}`},
		{"start model and agent", Event{Type: EvStart, Run: "r1", Model: "openai/gpt-4o", Agent: "helper"},
			`{"type":"start","run":"r1","model":"openai/gpt-4o","agent":"helper"}`},
		{"start neither", Event{Type: EvStart, Run: "r1"}, `{"type":"start","run":"r1","model":""}`},
		{"start tool only", Event{Type: EvStart, Run: "r1", Tool: "grep"}, `{"type":"start","run":"r1","tool":"grep"}`},
		{"start agent and tool", Event{Type: EvStart, Run: "r1", Agent: "helper", Tool: "grep"},
			`{"type":"start","run":"r1","agent":"helper","tool":"grep"}`},
		{"start model, agent and tool", Event{Type: EvStart, Run: "r1", Model: "p/m", Agent: "helper", Tool: "grep"},
			`{"type":"start","run":"r1","model":"p/m","agent":"helper","tool":"grep"}`},
		{"tool dropped outside start", Event{Type: EvDelta, Run: "r1", Tool: "grep", Agent: "a", Text: "t"},
			`{"type":"delta","run":"r1","text":"t"}`},

		// Reasoning and tools.
		{"reasoning_delta", Event{Type: EvReasoningDelta, Run: "r1", Text: "thinking"}, `{"type":"reasoning_delta","run":"r1","text":"thinking"}`},
		{"reasoning_message", Event{Type: EvReasoningMessage, Run: "r1", Text: "all"}, `{"type":"reasoning_message","run":"r1","text":"all"}`},
		{"tool_call", Event{Type: EvToolCall, Run: "r1", CallID: "c1", Name: "read", Arguments: json.RawMessage(`{"path":"/etc/motd","n":2}`)},
			`{"type":"tool_call","run":"r1","call_id":"c1","name":"read","arguments":{"path":"/etc/motd","n":2}}`},
		{"tool_call nil arguments", Event{Type: EvToolCall, Run: "r1", CallID: "c1", Name: "now"},
			`{"type":"tool_call","run":"r1","call_id":"c1","name":"now","arguments":{}}`},
		{"tool_call empty arguments", Event{Type: EvToolCall, Run: "r1", CallID: "c1", Name: "now", Arguments: json.RawMessage{}},
			`{"type":"tool_call","run":"r1","call_id":"c1","name":"now","arguments":{}}`},
		{"tool_call empty ids", Event{Type: EvToolCall}, `{"type":"tool_call","call_id":"","name":"","arguments":{}}`},
		{"message role tool", Event{Type: EvMessage, Run: "r1", Role: "tool", CallID: "c1", Content: []Part{{Type: "text", Text: "42"}}},
			`{"type":"message","run":"r1","role":"tool","content":[{"type":"text","text":"42"}],"call_id":"c1"}`},
		{"message role tool with name", Event{Type: EvMessage, Run: "r1", Role: "tool", CallID: "c1", Name: "read", Content: []Part{{Type: "text", Text: "42"}}},
			`{"type":"message","run":"r1","role":"tool","content":[{"type":"text","text":"42"}],"call_id":"c1","name":"read"}`},
		{"message nil content", Event{Type: EvMessage, Run: "r1", Role: "assistant"}, `{"type":"message","run":"r1","role":"assistant","content":[]}`},
		{"message two parts", Event{Type: EvMessage, Run: "r1", Role: "user", Content: []Part{{"text", "a"}, {"text", "b"}}},
			`{"type":"message","run":"r1","role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`},

		// Fields of other types are never written.
		{"delta drops unrelated fields", Event{Type: EvDelta, Run: "r1", Text: "t", Model: "m/x", Status: "ok", InputTokens: 5, Code: EIO, Arguments: json.RawMessage(`[1]`)},
			`{"type":"delta","run":"r1","text":"t"}`},
		{"done drops text", Event{Type: EvDone, Run: "r1", Status: "ok", Text: "x", Message: "y"}, `{"type":"done","run":"r1","status":"ok"}`},

		// Escaping: HTML characters stay literal; JSON specials are escaped.
		{"html not escaped", DeltaEvent("r1", "<b>a & b</b>"), `{"type":"delta","run":"r1","text":"<b>a & b</b>"}`},
		{"html in content", TextMessage("r1", "assistant", "x<y&&z>w"), `{"type":"message","run":"r1","role":"assistant","content":[{"type":"text","text":"x<y&&z>w"}]}`},
		{"json specials", DeltaEvent("r1", "a\"b\\c\nd\te\x01"), `{"type":"delta","run":"r1","text":"a\"b\\c\nd\te\u0001"}`},
		{"unicode literal", DeltaEvent("r1", "caf\u00e9 \U0001F600"), "{\"type\":\"delta\",\"run\":\"r1\",\"text\":\"caf\u00e9 \U0001F600\"}"},
		{"line separators escaped", DeltaEvent("r1", "a\u2028b"), `{"type":"delta","run":"r1","text":"a\u2028b"}`},

		// Unknown types keep every set field (struct order, omitempty).
		{"unknown type", Event{Type: "custom", Run: "r1", Text: "x", Status: "ok"}, `{"type":"custom","run":"r1","text":"x","status":"ok"}`},
		{"empty type", Event{}, `{"type":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGolden(t, tt.ev, tt.want)
		})
	}
}

// checkGolden marshals ev, compares with want byte for byte, and checks that
// want decodes back to an event that marshals to the same bytes.
func checkGolden(t *testing.T, ev Event, want string) {
	t.Helper()
	got, err := ev.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	if string(got) != want {
		t.Fatalf("MarshalJSON:\n got %s\nwant %s", got, want)
	}
	if !json.Valid(got) {
		t.Errorf("output is not valid JSON: %s", got)
	}
	if bytes.ContainsAny(got, "\n\r") {
		t.Errorf("output spans lines: %q", got)
	}
	var back Event
	if err := json.Unmarshal([]byte(want), &back); err != nil {
		t.Fatalf("Unmarshal(%s): %v", want, err)
	}
	again, err := back.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON after Unmarshal: %v", err)
	}
	if string(again) != want {
		t.Errorf("round trip not stable:\n got %s\nwant %s", again, want)
	}
}

// Invalid UTF-8 is written as an escaped U+FFFD (encoding/json behaviour);
// after one decode the text is valid UTF-8 and is written literally.
func TestEventInvalidUTF8(t *testing.T) {
	got, err := DeltaEvent("r1", "a\xffb").MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"delta","run":"r1","text":"a\ufffdb"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	var back Event
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.Text != "a\ufffdb" {
		t.Errorf("decoded text %q", back.Text)
	}
}

// The constructors fill exactly the documented fields.
func TestEventConstructors(t *testing.T) {
	tests := []struct {
		name string
		got  Event
		want Event
	}{
		{"StartEvent", StartEvent("r", "p/m"), Event{Type: EvStart, Run: "r", Model: "p/m"}},
		{"DeltaEvent", DeltaEvent("r", "t"), Event{Type: EvDelta, Run: "r", Text: "t"}},
		{"DoneEvent", DoneEvent("r", "ok"), Event{Type: EvDone, Run: "r", Status: "ok"}},
		{"TextMessage", TextMessage("r", "user", "hi"), Event{Type: EvMessage, Run: "r", Role: "user", Content: []Part{{Type: "text", Text: "hi"}}}},
		{"UsageEvent", UsageEvent("r", 3, 4), Event{Type: EvUsage, Run: "r", InputTokens: 3, OutputTokens: 4}},
		{"ErrorEvent *Error", ErrorEvent("r", Errorf(ENOKEY, "no key")), Event{Type: EvError, Run: "r", Code: ENOKEY, Message: "no key"}},
		{"ErrorEvent wrapped", ErrorEvent("r", fmt.Errorf("open: %w", os.ErrNotExist)), Event{Type: EvError, Run: "r", Code: ENOENT, Message: "open: file does not exist"}},
		{"ErrorEvent plain", ErrorEvent("r", errors.New("boom")), Event{Type: EvError, Run: "r", Code: EIO, Message: "boom"}},
		{"ErrorEvent code only", ErrorEvent("r", &Error{Code: EBUSY}), Event{Type: EvError, Run: "r", Code: EBUSY, Message: "EBUSY"}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

func TestMessageText(t *testing.T) {
	tests := []struct {
		ev   Event
		want string
	}{
		{TextMessage("r", "assistant", "hello"), "hello"},
		{Event{Type: EvMessage}, ""},
		{Event{Type: EvMessage, Content: []Part{{"text", "a"}, {"text", "b"}, {"text", "c"}}}, "abc"},
		{Event{Type: EvMessage, Content: []Part{{"text", ""}}}, ""},
	}
	for _, tt := range tests {
		if got := tt.ev.MessageText(); got != tt.want {
			t.Errorf("MessageText(%+v) = %q, want %q", tt.ev.Content, got, tt.want)
		}
	}
}

func TestEventUnmarshal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Event
	}{
		{"unknown fields ignored", `{"type":"delta","run":"r1","text":"hi","extra":{"a":[1,2]},"x":null,"y":1.5}`, DeltaEvent("r1", "hi")},
		{"field order irrelevant", `{"text":"hi","run":"r1","type":"delta"}`, DeltaEvent("r1", "hi")},
		{"socket id", `{"type":"delta","id":"e1","run":"r1","text":"hi"}`, Event{Type: EvDelta, ID: "e1", Run: "r1", Text: "hi"}},
		{"pong", `{"type":"pong"}`, Event{Type: EvPong}},
		{"message", `{"type":"message","run":"r1","role":"assistant","content":[{"type":"text","text":"hello"}]}`, TextMessage("r1", "assistant", "hello")},
		{"tool_call keeps raw arguments", `{"type":"tool_call","call_id":"c","name":"n","arguments":{"a":[1,2]}}`,
			Event{Type: EvToolCall, CallID: "c", Name: "n", Arguments: json.RawMessage(`{"a":[1,2]}`)}},
		{"usage", `{"type":"usage","run":"r1","input_tokens":10,"output_tokens":1,"reasoning_tokens":3}`,
			Event{Type: EvUsage, Run: "r1", InputTokens: 10, OutputTokens: 1, ReasoningTokens: 3}},
		{"error", `{"type":"error","run":"r1","code":"EACCES","message":"permission denied"}`,
			Event{Type: EvError, Run: "r1", Code: EACCES, Message: "permission denied"}},
		{"html escapes decode", `{"type":"delta","text":"\u003cb\u003e \u0026"}`, Event{Type: EvDelta, Text: "<b> &"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Event
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Unmarshal(%s)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}

	t.Run("overwrites previous contents", func(t *testing.T) {
		ev := Event{Type: EvDelta, Run: "old", Text: "old", Model: "p/m", InputTokens: 9}
		if err := json.Unmarshal([]byte(`{"type":"done","status":"ok"}`), &ev); err != nil {
			t.Fatal(err)
		}
		if want := DoneEvent("", "ok"); !reflect.DeepEqual(ev, want) {
			t.Errorf("got %+v, want %+v", ev, want)
		}
	})

	for _, bad := range []string{``, `{`, `[]`, `"delta"`, `{"type":1}`, `{"input_tokens":"10"}`,
		`{"input_tokens":1.5}`, `{"content":{"type":"text"}}`, `{"type":"delta"} x`} {
		var ev Event
		if err := json.Unmarshal([]byte(bad), &ev); err == nil {
			t.Errorf("Unmarshal(%q) = nil error, want error", bad)
		}
	}
}

func TestEventInvalidArguments(t *testing.T) {
	for _, args := range []string{`{bad`, `{"a":1} trailing`, `'x'`, `{"a":}`, "\xff"} {
		ev := Event{Type: EvToolCall, Run: "r1", CallID: "c1", Name: "n", Arguments: json.RawMessage(args)}
		b, err := ev.MarshalJSON()
		if err == nil {
			t.Errorf("MarshalJSON with arguments %q = %s, want error", args, b)
			continue
		}
		wantErr(t, err, EINVAL, "arguments")
		if b != nil {
			t.Errorf("MarshalJSON returned bytes %q with the error", b)
		}
		if _, err := json.Marshal(ev); err == nil {
			t.Errorf("json.Marshal with arguments %q succeeded", args)
		}
	}
	// Unknown types go through encoding/json, which also refuses bad raw JSON.
	ev := Event{Type: "custom", Arguments: json.RawMessage(`{bad`)}
	if _, err := ev.MarshalJSON(); err == nil {
		t.Errorf("unknown type with invalid arguments: want error")
	}
}

// A frame must stay on one line (the stream is one JSON object per line),
// so raw arguments must be written compactly.
func TestEventArgumentsCompact(t *testing.T) {
	ev := Event{Type: EvToolCall, Run: "r1", CallID: "c1", Name: "n", Arguments: json.RawMessage("{\n  \"a\" : 1\n}")}
	want := `{"type":"tool_call","run":"r1","call_id":"c1","name":"n","arguments":{"a":1}}`
	got, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("MarshalJSON copies Arguments verbatim: got %q, want %q (frame spans lines)", got, want)
	}
}

// How the frame is written matters: ev.MarshalJSON and an Encoder with
// SetEscapeHTML(false) keep '<' '&' '>' literal, but json.Marshal(ev)
// re-compacts the Marshaler's output with HTML escaping (encoding/json
// behaviour), so writers must not use plain json.Marshal for frames.
func TestEventHTMLThroughEncoders(t *testing.T) {
	ev := DeltaEvent("r1", "<a&b>")
	want := `{"type":"delta","run":"r1","text":"<a&b>"}`

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != want+"\n" {
		t.Errorf("Encoder(SetEscapeHTML(false)) = %q, want %q", got, want+"\n")
	}

	viaMarshal, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"delta","run":"r1","text":"\u003ca\u0026b\u003e"}`; string(viaMarshal) != want {
		t.Errorf("json.Marshal(ev) = %s, want %s (encoding/json escapes HTML)", viaMarshal, want)
	}
	// Either way the decoded text is the same.
	var back Event
	if err := json.Unmarshal(viaMarshal, &back); err != nil || back.Text != "<a&b>" {
		t.Errorf("decode = %+v, %v", back, err)
	}
}

// A whole stream of seed frames written one per line decodes frame by frame.
func TestEventStream(t *testing.T) {
	frames := []Event{
		StartEvent("r1", "debug/echo"),
		DeltaEvent("r1", "hel"),
		DeltaEvent("r1", "lo\n<&>"),
		TextMessage("r1", "assistant", "hello\n<&>"),
		{Type: EvToolCall, Run: "r1", CallID: "c1", Name: "read", Arguments: json.RawMessage(`{"p":"x"}`)},
		UsageEvent("r1", 10, 1),
		ErrorEvent("r1", Errorf(EACCES, "permission denied")),
		DoneEvent("r1", StatusError),
	}
	var stream bytes.Buffer
	for _, f := range frames {
		b, err := f.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		stream.Write(b)
		stream.WriteByte('\n')
	}
	lines := strings.Split(strings.TrimSuffix(stream.String(), "\n"), "\n")
	if len(lines) != len(frames) {
		t.Fatalf("%d lines for %d frames:\n%s", len(lines), len(frames), stream.String())
	}
	for i, line := range lines {
		var ev Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(ev, frames[i]) {
			t.Errorf("line %d: got %+v, want %+v", i+1, ev, frames[i])
		}
	}
}
