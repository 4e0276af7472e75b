// Package model runs models: the request shape, the driver registry, route
// selection with fallback, and the built-in drivers.
package model

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Message is one chat message of a request. Content accepts a string or an
// array of {"type":"text","text":…} parts on input.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCallID string     `json:"tool_call_id,omitempty"` // role tool: the call answered
	Name       string     `json:"name,omitempty"`         // role tool: the tool's name
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // role assistant: calls it made
}

// ToolCall is a tool call an assistant message made, as fed back in history.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool a model may call (it grants nothing).
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Request is the canonical model request every driver receives.
type Request struct {
	Model    string            `json:"-"` // stable id provider/model
	NativeID string            `json:"-"` // .d/id
	Messages []Message         `json:"messages"`
	Tools    []ToolSpec        `json:"tools,omitempty"`
	Params   map[string]string `json:"-"` // .d/default, then per-call overrides
}

// Valid roles of an input message.
var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}

// UnmarshalJSON accepts content as a string or as text parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		Name       string          `json:"name"`
		ToolCalls  []ToolCall      `json:"tool_calls"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message{Role: raw.Role, ToolCallID: raw.ToolCallID, Name: raw.Name, ToolCalls: raw.ToolCalls}
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		return json.Unmarshal(c, &m.Content)
	case c[0] == '[':
		var parts []abi.Part
		if err := json.Unmarshal(c, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			if p.Type != "text" {
				return abi.Errorf(abi.EINVAL, "content part type %q not supported", p.Type)
			}
			sb.WriteString(p.Text)
		}
		m.Content = sb.String()
	default:
		return abi.Errorf(abi.EINVAL, "content must be a string or an array of text parts")
	}
	return nil
}

// Input is the JSON object a caller may give a model on stdin or over a
// socket: messages, optional tools, and per-call parameter overrides.
type Input struct {
	Messages []Message      `json:"messages"`
	Tools    []ToolSpec     `json:"tools,omitempty"`
	Params   map[string]any `json:"params,omitempty"`
	Extra    map[string]any `json:"-"`
}

// ParseInput reads {"messages":[…],"tools":[…],"params":{…}}. Messages are
// required and each needs a known role; bad JSON or shape is EINVAL.
func ParseInput(data []byte) (Input, error) {
	var in Input
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&in); err != nil {
		return Input{}, abi.Errorf(abi.EINVAL, "bad JSON input: %v", err)
	}
	if dec.More() {
		return Input{}, abi.Errorf(abi.EINVAL, "bad JSON input: trailing data after the object")
	}
	if len(in.Messages) == 0 {
		return Input{}, abi.Errorf(abi.EINVAL, `JSON input needs a non-empty "messages" array`)
	}
	for i, m := range in.Messages {
		if !roles[m.Role] {
			return Input{}, abi.Errorf(abi.EINVAL, "messages[%d]: unknown role %q", i, m.Role)
		}
	}
	for i, t := range in.Tools {
		if err := abi.ValidName(t.Name); err != nil {
			return Input{}, abi.Errorf(abi.EINVAL, "tools[%d]: %v", i, err)
		}
	}
	return in, nil
}

// TextInput is a plain-text prompt as a one-message input.
func TextInput(text string) Input {
	return Input{Messages: []Message{{Role: "user", Content: text}}}
}

// LastUser returns the content of the last user message.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}
