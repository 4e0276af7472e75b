package provider

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/wire/sse"
)

// anthropic-messages speaks the Anthropic Messages API (POST
// {base}/v1/messages with stream:true, SSE of message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping, error).
const (
	AnthropicBase    = "https://api.anthropic.com"
	anthropicVersion = "2023-06-01"
	// anthropicMaxTokens is sent when no max_tokens is set: the API
	// requires one.
	anthropicMaxTokens = 4096
)

func init() {
	model.RegisterDriver("anthropic-messages", func(cfg model.Config) (model.Driver, error) {
		c, err := NewConn(cfg, "anthropic-messages", AnthropicBase, "required")
		return &anthropic{c}, err
	})
}

type anthropic struct{ c *Conn }

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

type anMsg struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type anReq struct {
	Model         string      `json:"model"`
	MaxTokens     int         `json:"max_tokens"`
	System        string      `json:"system,omitempty"`
	Messages      []anMsg     `json:"messages"`
	Tools         []anTool    `json:"tools,omitempty"`
	Stream        bool        `json:"stream"`
	Temperature   *float64    `json:"temperature,omitempty"`
	TopP          *float64    `json:"top_p,omitempty"`
	StopSequences []string    `json:"stop_sequences,omitempty"`
	Thinking      *anThinking `json:"thinking,omitempty"`
}

// anthropicBody builds a Messages request: system messages become the
// system prompt, tool results are user tool_result blocks, and consecutive
// messages of one role are merged (the API wants alternating roles).
func anthropicBody(req model.Request, names toolNames) (anReq, error) {
	p := params(req.Params)
	cm, err := commonParams(p)
	if err != nil {
		return anReq{}, err
	}
	body := anReq{Model: nativeID(req), MaxTokens: anthropicMaxTokens, Stream: true,
		Temperature: cm.Temperature, TopP: cm.TopP, StopSequences: cm.Stop}
	if cm.MaxTokens != nil {
		body.MaxTokens = *cm.MaxTokens
	}
	budget, err := p.int("thinking_budget")
	if err != nil {
		return body, err
	}
	if budget != nil && *budget > 0 {
		body.Thinking = &anThinking{"enabled", *budget}
	}
	var system []string
	for _, m := range req.Messages {
		var role string
		var blocks []anBlock
		switch m.Role {
		case "system":
			system = append(system, m.Content)
			continue
		case "tool":
			role, blocks = "user", []anBlock{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content}}
		default:
			role = m.Role
			if m.Content != "" {
				blocks = append(blocks, anBlock{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, anBlock{Type: "tool_use", ID: c.ID, Name: names.encode(c.Name), Input: argsObject(c.Arguments)})
			}
		}
		if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == role {
			body.Messages[n-1].Content = append(body.Messages[n-1].Content, blocks...)
			continue
		}
		if blocks == nil {
			blocks = []anBlock{{Type: "text", Text: ""}}
		}
		body.Messages = append(body.Messages, anMsg{role, blocks})
	}
	body.System = strings.Join(system, "\n\n")
	for _, t := range req.Tools {
		body.Tools = append(body.Tools, anTool{names.encode(t.Name), t.Description, schema(t)})
	}
	return body, nil
}

func anthropicHeaders(key string) map[string]string {
	h := map[string]string{"anthropic-version": anthropicVersion}
	if key != "" {
		h["x-api-key"] = key
	}
	return h
}

func (d *anthropic) Stream(ctx context.Context, req model.Request, emit func(abi.Event) error) error {
	names := newToolNames(req)
	body, err := anthropicBody(req, names)
	if err != nil {
		return err
	}
	return d.c.stream(ctx, call{url: d.c.Base + "/v1/messages", body: body, headers: anthropicHeaders, notFound: anthropicModelNotFound, decode: decodeAnthropic}, names, emit)
}

// anthropicModelNotFound: an unknown model is a 404 with the structured
// not_found_error; a path the server lacks answers without it.
func anthropicModelNotFound(body []byte) bool {
	var v struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &v) == nil && v.Error.Type == "not_found_error"
}

type anEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID    string  `json:"id"`
		Usage anUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
	Usage *anUsage `json:"usage"`
}

type anUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

type anBlockState struct {
	kind, id, name string
	args           strings.Builder
}

// decodeAnthropic maps Messages events: text_delta → delta, thinking_delta
// → reasoning_delta (the thinking block's stop → reasoning_message),
// input_json_delta joined per tool_use block and emitted at its stop;
// usage from message_start (input) and message_delta (output, cumulative);
// message_stop ends; error is an error; ping is ignored.
func decodeAnthropic(ctx context.Context, c *Conn, body io.Reader, o *out) error {
	rd := sse.NewReader(body)
	blocks := map[int]*anBlockState{}
	in, outTok := 0, 0
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return c.Truncated()
		}
		if err != nil {
			return c.TransportError(ctx, err)
		}
		var e anEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return abi.Errorf(abi.EPROTO, "%s (%s): bad stream event: %v", c.ModelID, c.Driver, err)
		}
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				o.responseID = e.Message.ID
				u := e.Message.Usage
				in, outTok = u.InputTokens+u.CacheCreationInputTokens+u.CacheReadInputTokens, u.OutputTokens
			}
		case "content_block_start":
			b := &anBlockState{}
			if cb := e.ContentBlock; cb != nil {
				b.kind, b.id, b.name = cb.Type, cb.ID, cb.Name
				if cb.Type == "text" {
					err = o.Text(cb.Text)
				}
			}
			blocks[e.Index] = b
		case "content_block_delta":
			err = anthropicDelta(e, blocks[e.Index], o)
		case "content_block_stop":
			b := blocks[e.Index]
			delete(blocks, e.Index)
			switch {
			case b == nil:
			case b.kind == "thinking":
				err = o.EndReasoning()
			case b.kind == "tool_use":
				err = o.ToolCall(b.id, b.name, []byte(b.args.String()))
			}
		case "message_delta":
			if e.Usage != nil {
				outTok = e.Usage.OutputTokens
				if e.Usage.InputTokens > 0 {
					in = e.Usage.InputTokens + e.Usage.CacheCreationInputTokens + e.Usage.CacheReadInputTokens
				}
			}
		case "message_stop":
			o.Usage(in, outTok, 0)
			return o.Finish()
		case "error":
			return c.streamError(ev.Data)
		}
		if err != nil {
			return err
		}
	}
}

func anthropicDelta(e anEvent, b *anBlockState, o *out) error {
	if e.Delta == nil {
		return nil
	}
	switch e.Delta.Type {
	case "text_delta":
		return o.Text(e.Delta.Text)
	case "thinking_delta":
		return o.Reasoning(e.Delta.Thinking)
	case "input_json_delta":
		if b != nil {
			b.args.WriteString(e.Delta.PartialJSON)
		}
	}
	return nil
}
