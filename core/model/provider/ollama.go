package provider

import (
	"context"
	"encoding/json"
	"io"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// ollama speaks Ollama's native chat API (POST {base}/api/chat, NDJSON: one
// JSON object per line, the last with done:true and the token counts). A
// key is optional (local servers need none; a proxy in front may).
const OllamaBase = "http://127.0.0.1:11434"

func init() {
	model.RegisterDriver("ollama", func(cfg model.Config) (model.Driver, error) {
		c, err := NewConn(cfg, "ollama", OllamaBase, "optional")
		return &ollama{c}, err
	})
}

type ollama struct{ c *Conn }

type olCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type olMsg struct {
	Role      string   `json:"role"`
	Content   string   `json:"content"`
	Thinking  string   `json:"thinking,omitempty"`
	ToolCalls []olCall `json:"tool_calls,omitempty"`
	ToolName  string   `json:"tool_name,omitempty"`
}

type olReq struct {
	Model    string         `json:"model"`
	Messages []olMsg        `json:"messages"`
	Tools    []oaTool       `json:"tools,omitempty"`
	Stream   bool           `json:"stream"`
	Think    *bool          `json:"think,omitempty"`
	Options  map[string]any `json:"options,omitempty"`
}

func ollamaBody(req model.Request, names toolNames) (olReq, error) {
	p := params(req.Params)
	cm, err := commonParams(p)
	if err != nil {
		return olReq{}, err
	}
	body := olReq{Model: nativeID(req), Stream: true, Options: map[string]any{}}
	if body.Think, err = p.bool("think"); err != nil {
		return body, err
	}
	topK, err := p.int("top_k")
	if err != nil {
		return body, err
	}
	for k, v := range map[string]any{"temperature": cm.Temperature, "top_p": cm.TopP, "num_predict": cm.MaxTokens, "seed": cm.Seed, "top_k": topK} {
		switch x := v.(type) {
		case *float64:
			if x != nil {
				body.Options[k] = *x
			}
		case *int:
			if x != nil {
				body.Options[k] = *x
			}
		}
	}
	if cm.Stop != nil {
		body.Options["stop"] = cm.Stop
	}
	if len(body.Options) == 0 {
		body.Options = nil
	}
	callNames := map[string]string{}
	for _, m := range req.Messages {
		om := olMsg{Role: m.Role, Content: m.Content}
		for _, c := range m.ToolCalls {
			callNames[c.ID] = c.Name
			var oc olCall
			oc.Function.Name, oc.Function.Arguments = names.encode(c.Name), argsObject(c.Arguments)
			om.ToolCalls = append(om.ToolCalls, oc)
		}
		if m.Role == "tool" {
			om.ToolName = m.Name
			if om.ToolName == "" {
				om.ToolName = callNames[m.ToolCallID]
			}
			om.ToolName = names.encode(om.ToolName)
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

func (d *ollama) Stream(ctx context.Context, req model.Request, emit func(abi.Event) error) error {
	names := newToolNames(req)
	body, err := ollamaBody(req, names)
	if err != nil {
		return err
	}
	return d.c.stream(ctx, call{url: d.c.Base + "/api/chat", body: body, headers: bearer, notFound: ollamaModelNotFound, decode: decodeOllama}, names, emit)
}

// ollamaModelNotFound: Ollama answers an unknown model with a JSON
// {"error":…} body; a server without /api/chat answers a plain-text 404.
func ollamaModelNotFound(body []byte) bool {
	var v struct {
		Error *string `json:"error"`
	}
	return json.Unmarshal(body, &v) == nil && v.Error != nil
}

type olLine struct {
	Message *struct {
		Content   string   `json:"content"`
		Thinking  string   `json:"thinking"`
		ToolCalls []olCall `json:"tool_calls"`
	} `json:"message"`
	Done            bool    `json:"done"`
	CreatedAt       string  `json:"created_at"`
	PromptEvalCount int     `json:"prompt_eval_count"`
	EvalCount       int     `json:"eval_count"`
	Error           *string `json:"error"`
}

// decodeOllama maps /api/chat lines: message.content → delta,
// message.thinking → reasoning_delta, message.tool_calls (whole, arguments
// an object) → tool_call, the done:true line → usage and the end; an
// {"error":…} line is an error; a stream without done:true was cut.
func decodeOllama(ctx context.Context, c *Conn, body io.Reader, o *out) error {
	rd := jsonl.NewReader(body)
	for {
		frame, err := rd.ReadFrame()
		if err == io.EOF {
			return c.Truncated()
		}
		if err != nil {
			if abi.CodeOf(err) == abi.EMSGSIZE {
				return abi.Errorf(abi.EPROTO, "%s (%s): stream line too long", c.ModelID, c.Driver)
			}
			return c.TransportError(ctx, err)
		}
		var l olLine
		if err := json.Unmarshal(frame, &l); err != nil {
			return abi.Errorf(abi.EPROTO, "%s (%s): bad stream line: %v", c.ModelID, c.Driver, err)
		}
		if l.Error != nil {
			return abi.Errorf(abi.EHOSTDOWN, "%s (%s): error in stream: %s", c.ModelID, c.Driver, c.redact(sanitizeLine(*l.Error)))
		}
		if m := l.Message; m != nil {
			if err := o.Reasoning(m.Thinking); err != nil {
				return err
			}
			if err := o.Text(m.Content); err != nil {
				return err
			}
			for _, tc := range m.ToolCalls {
				if err := o.ToolCall("", tc.Function.Name, tc.Function.Arguments); err != nil {
					return err
				}
			}
		}
		if l.Done {
			o.responseID = l.CreatedAt
			o.Usage(l.PromptEvalCount, l.EvalCount, 0)
			return o.Finish()
		}
	}
}
