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

// openai-responses speaks the OpenAI Responses API (POST {base}/responses,
// SSE of typed response.* events). Requests are stateless (store=false):
// the whole conversation is sent each time.
func init() {
	model.RegisterDriver("openai-responses", func(cfg model.Config) (model.Driver, error) {
		c, err := NewConn(cfg, "openai-responses", OpenAIBase, "required")
		return &openAIResponses{c}, err
	})
}

type openAIResponses struct{ c *Conn }

type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type respReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

type respReq struct {
	Model           string         `json:"model"`
	Input           []any          `json:"input"`
	Tools           []respTool     `json:"tools,omitempty"`
	Stream          bool           `json:"stream"`
	Store           bool           `json:"store"`
	Temperature     *float64       `json:"temperature,omitempty"`
	TopP            *float64       `json:"top_p,omitempty"`
	MaxOutputTokens *int           `json:"max_output_tokens,omitempty"`
	Reasoning       *respReasoning `json:"reasoning,omitempty"`
}

func responsesBody(req model.Request, names toolNames) (respReq, error) {
	p := params(req.Params)
	cm, err := commonParams(p)
	if err != nil {
		return respReq{}, err
	}
	body := respReq{Model: nativeID(req), Stream: true, Temperature: cm.Temperature, TopP: cm.TopP, MaxOutputTokens: cm.MaxTokens}
	if effort, ok := p.raw("reasoning_effort"); ok {
		body.Reasoning = &respReasoning{Effort: effort, Summary: "auto"}
	}
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type call struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type output struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	for _, m := range req.Messages {
		switch {
		case m.Role == "tool":
			body.Input = append(body.Input, output{"function_call_output", m.ToolCallID, m.Content})
		default:
			if m.Content != "" || len(m.ToolCalls) == 0 {
				body.Input = append(body.Input, msg{m.Role, m.Content})
			}
			for _, c := range m.ToolCalls {
				body.Input = append(body.Input, call{"function_call", c.ID, names.encode(c.Name), string(argsObject(c.Arguments))})
			}
		}
	}
	for _, t := range req.Tools {
		body.Tools = append(body.Tools, respTool{"function", names.encode(t.Name), t.Description, schema(t)})
	}
	return body, nil
}

func (d *openAIResponses) Stream(ctx context.Context, req model.Request, emit func(abi.Event) error) error {
	names := newToolNames(req)
	body, err := responsesBody(req, names)
	if err != nil {
		return err
	}
	return d.c.stream(ctx, call{url: d.c.Base + "/responses", body: body, headers: bearer, notFound: openAIModelNotFound, decode: decodeResponses}, names, emit)
}

type respItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type respEvent struct {
	Type        string          `json:"type"`
	Delta       string          `json:"delta"`
	ItemID      string          `json:"item_id"`
	OutputIndex int             `json:"output_index"`
	Item        *respItem       `json:"item"`
	Code        any             `json:"code"`
	Message     string          `json:"message"`
	Response    json.RawMessage `json:"response"`
}

type respResponse struct {
	ID    string          `json:"id"`
	Error json.RawMessage `json:"error"`
	Usage *struct {
		InputTokens         int `json:"input_tokens"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// decodeResponses maps Responses events: output_text deltas → delta;
// reasoning summary/text deltas → reasoning_delta (closed when the
// reasoning item is done); function_call_arguments deltas joined per item,
// emitted as tool_call with the completed output item; response.completed
// → usage and the end; response.failed, response.incomplete and error →
// an error. A stream without a terminal event was cut.
func decodeResponses(ctx context.Context, c *Conn, body io.Reader, o *out) error {
	rd := sse.NewReader(body)
	args := map[string]*strings.Builder{}
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return c.Truncated()
		}
		if err != nil {
			return c.TransportError(ctx, err)
		}
		var e respEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return abi.Errorf(abi.EPROTO, "%s (%s): bad stream event: %v", c.ModelID, c.Driver, err)
		}
		if e.Type == "" {
			e.Type = ev.Type
		}
		var r respResponse
		if len(e.Response) > 0 {
			_ = json.Unmarshal(e.Response, &r)
			if r.ID != "" {
				o.responseID = r.ID
			}
		}
		switch e.Type {
		case "response.output_text.delta", "response.refusal.delta":
			err = o.Text(e.Delta)
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			err = o.Reasoning(e.Delta)
		case "response.function_call_arguments.delta":
			b := args[e.ItemID]
			if b == nil {
				b = &strings.Builder{}
				args[e.ItemID] = b
			}
			b.WriteString(e.Delta)
		case "response.output_item.done":
			err = responsesItemDone(e.Item, args, o)
		case "response.completed":
			if u := r.Usage; u != nil {
				rt := 0
				if u.OutputTokensDetails != nil {
					rt = u.OutputTokensDetails.ReasoningTokens
				}
				o.Usage(u.InputTokens, u.OutputTokens, rt)
			}
			return o.Finish()
		case "response.failed":
			return c.streamError(r.Error)
		case "response.incomplete":
			reason := "unknown"
			if r.IncompleteDetails != nil {
				reason = r.IncompleteDetails.Reason
			}
			code := abi.EHOSTDOWN
			if reason == "max_output_tokens" {
				code = abi.EMSGSIZE
			}
			return abi.Errorf(code, "%s (%s): response incomplete: %s", c.ModelID, c.Driver, sanitizeLine(reason))
		case "error":
			return c.streamError(ev.Data)
		}
		if err != nil {
			return err
		}
	}
}

func responsesItemDone(it *respItem, args map[string]*strings.Builder, o *out) error {
	if it == nil {
		return nil
	}
	switch it.Type {
	case "reasoning":
		return o.EndReasoning()
	case "function_call":
		a := it.Arguments
		if b := args[it.ID]; a == "" && b != nil {
			a = b.String()
		}
		delete(args, it.ID)
		return o.ToolCall(it.CallID, it.Name, []byte(a))
	}
	return nil
}
