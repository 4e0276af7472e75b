package provider

import (
	"context"
	"encoding/json"
	"io"
	"sort"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/wire/sse"
)

// openai-chat speaks OpenAI-compatible Chat Completions streaming
// (POST {base}/chat/completions, SSE of chat.completion.chunk, "[DONE]"):
// OpenAI, llama.cpp server, vLLM, Ollama's /v1, OpenRouter and any
// OpenAI-compatible base URL.
const OpenAIBase = "https://api.openai.com/v1"

func init() {
	model.RegisterDriver("openai-chat", func(cfg model.Config) (model.Driver, error) {
		c, err := NewConn(cfg, "openai-chat", OpenAIBase, "required")
		return &openAIChat{c}, err
	})
}

type openAIChat struct{ c *Conn }

type oaMsg struct {
	Role       string       `json:"role"`
	Content    *string      `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type oaChatReq struct {
	Model               string       `json:"model"`
	Messages            []oaMsg      `json:"messages"`
	Tools               []oaTool     `json:"tools,omitempty"`
	Stream              bool         `json:"stream"`
	StreamOptions       *oaStreamOpt `json:"stream_options,omitempty"`
	Temperature         *float64     `json:"temperature,omitempty"`
	TopP                *float64     `json:"top_p,omitempty"`
	MaxTokens           *int         `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int         `json:"max_completion_tokens,omitempty"`
	Stop                []string     `json:"stop,omitempty"`
	Seed                *int         `json:"seed,omitempty"`
	PresencePenalty     *float64     `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64     `json:"frequency_penalty,omitempty"`
	ReasoningEffort     string       `json:"reasoning_effort,omitempty"`
}

type oaStreamOpt struct {
	IncludeUsage bool `json:"include_usage"`
}

// openAIChatBody builds the request in the Chat Completions format.
func openAIChatBody(req model.Request, names toolNames) (oaChatReq, error) {
	p := params(req.Params)
	cm, err := commonParams(p)
	if err != nil {
		return oaChatReq{}, err
	}
	body := oaChatReq{Model: nativeID(req), Stream: true, StreamOptions: &oaStreamOpt{true},
		Temperature: cm.Temperature, TopP: cm.TopP, MaxTokens: cm.MaxTokens, Stop: cm.Stop, Seed: cm.Seed}
	if body.MaxCompletionTokens, err = p.int("max_completion_tokens"); err != nil {
		return body, err
	}
	if body.PresencePenalty, err = p.float("presence_penalty"); err != nil {
		return body, err
	}
	if body.FrequencyPenalty, err = p.float("frequency_penalty"); err != nil {
		return body, err
	}
	body.ReasoningEffort, _ = p.raw("reasoning_effort")
	for _, m := range req.Messages {
		content := m.Content
		om := oaMsg{Role: m.Role, Content: &content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			tc := oaToolCall{ID: c.ID, Type: "function"}
			tc.Function.Name = names.encode(c.Name)
			tc.Function.Arguments = string(argsObject(c.Arguments))
			om.ToolCalls = append(om.ToolCalls, tc)
		}
		if len(om.ToolCalls) > 0 && content == "" {
			om.Content = nil
		}
		body.Messages = append(body.Messages, om)
	}
	for _, t := range req.Tools {
		ot := oaTool{Type: "function"}
		ot.Function.Name, ot.Function.Description, ot.Function.Parameters = names.encode(t.Name), t.Description, schema(t)
		body.Tools = append(body.Tools, ot)
	}
	return body, nil
}

func (d *openAIChat) Stream(ctx context.Context, req model.Request, emit func(abi.Event) error) error {
	names := newToolNames(req)
	body, err := openAIChatBody(req, names)
	if err != nil {
		return err
	}
	return d.c.stream(ctx, call{url: d.c.Base + "/chat/completions", body: body, headers: bearer, notFound: openAIModelNotFound, decode: decodeOpenAIChat}, names, emit)
}

func bearer(key string) map[string]string {
	if key == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + key}
}

// eventStream refuses a 2xx answer that is a web page: the base URL points
// at something that does not speak the API (ENOTSUP, try the next driver).
func eventStream(c *Conn, ctype string) error {
	if strings.HasPrefix(strings.ToLower(ctype), "text/html") {
		return abi.Errorf(abi.ENOTSUP, "%s (%s): endpoint answered %s, not an API stream", c.ModelID, c.Driver, ctype)
	}
	return nil
}

// openAIModelNotFound: OpenAI answers an unknown model with 404 and code
// model_not_found; an unknown path is a 404 without it.
func openAIModelNotFound(body []byte) bool {
	var v struct {
		Error struct {
			Code any `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &v) == nil && v.Error.Code == "model_not_found"
}

type oaChunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens            int `json:"prompt_tokens"`
		CompletionTokens        int `json:"completion_tokens"`
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type pendingCall struct {
	id, name string
	args     strings.Builder
}

// decodeOpenAIChat maps chat.completion.chunk events: delta.content →
// delta; reasoning_content / reasoning → reasoning_delta; tool_calls
// fragments joined by index (id and name arrive first), emitted at the
// choice's finish_reason; the usage chunk; "[DONE]". A stream that ends
// before "[DONE]" and before any finish_reason was cut.
func decodeOpenAIChat(ctx context.Context, c *Conn, body io.Reader, o *out) error {
	rd := sse.NewReader(body)
	calls := map[int]*pendingCall{}
	finished := false
	flush := func() error {
		idx := make([]int, 0, len(calls))
		for i := range calls {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, i := range idx {
			pc := calls[i]
			if err := o.ToolCall(pc.id, pc.name, []byte(pc.args.String())); err != nil {
				return err
			}
		}
		clear(calls)
		return nil
	}
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			if !finished {
				return c.Truncated()
			}
			break
		}
		if err != nil {
			return c.TransportError(ctx, err)
		}
		data := strings.TrimSpace(string(ev.Data))
		if data == "[DONE]" {
			break
		}
		var ch oaChunk
		if err := json.Unmarshal(ev.Data, &ch); err != nil {
			return abi.Errorf(abi.EPROTO, "%s (%s): bad stream chunk: %v", c.ModelID, c.Driver, err)
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" || ev.Type == "error" {
			return c.streamError(ev.Data)
		}
		if ch.ID != "" {
			o.responseID = ch.ID
		}
		for _, choice := range ch.Choices {
			if choice.Index != 0 {
				continue // n=1: only the first choice is the answer
			}
			dl := choice.Delta
			if err := o.Reasoning(dl.ReasoningContent + dl.Reasoning); err != nil {
				return err
			}
			if err := o.Text(dl.Content); err != nil {
				return err
			}
			for _, tc := range dl.ToolCalls {
				pc := calls[tc.Index]
				if pc == nil {
					pc = &pendingCall{}
					calls[tc.Index] = pc
				}
				if tc.ID != "" {
					pc.id = tc.ID
				}
				if pc.name == "" {
					pc.name = tc.Function.Name
				}
				pc.args.WriteString(tc.Function.Arguments)
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				finished = true
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if u := ch.Usage; u != nil {
			r := 0
			if u.CompletionTokensDetails != nil {
				r = u.CompletionTokensDetails.ReasoningTokens
			}
			o.Usage(u.PromptTokens, u.CompletionTokens, r)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return o.Finish()
}
