package provider

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/wire/sse"
)

// gemini speaks the Gemini API (POST
// {base}/v1beta/models/{id}:streamGenerateContent?alt=sse, SSE of
// GenerateContentResponse). The key travels in the x-goog-api-key header,
// never in the URL, so no error message or log can show it.
const GeminiBase = "https://generativelanguage.googleapis.com"

func init() {
	model.RegisterDriver("gemini", func(cfg model.Config) (model.Driver, error) {
		c, err := NewConn(cfg, "gemini", GeminiBase, "required")
		return &gemini{c}, err
	})
}

type gemini struct{ c *Conn }

type gmPart struct {
	Text             string      `json:"text,omitempty"`
	Thought          bool        `json:"thought,omitempty"`
	FunctionCall     *gmCall     `json:"functionCall,omitempty"`
	FunctionResponse *gmResponse `json:"functionResponse,omitempty"`
}

type gmCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type gmResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

type gmContent struct {
	Role  string   `json:"role,omitempty"`
	Parts []gmPart `json:"parts"`
}

type gmFunc struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parametersJsonSchema"`
}

type gmGenConfig struct {
	Temperature     *float64          `json:"temperature,omitempty"`
	TopP            *float64          `json:"topP,omitempty"`
	TopK            *int              `json:"topK,omitempty"`
	MaxOutputTokens *int              `json:"maxOutputTokens,omitempty"`
	StopSequences   []string          `json:"stopSequences,omitempty"`
	Seed            *int              `json:"seed,omitempty"`
	ThinkingConfig  *gmThinkingConfig `json:"thinkingConfig,omitempty"`
}

type gmThinkingConfig struct {
	IncludeThoughts bool `json:"includeThoughts"`
	ThinkingBudget  *int `json:"thinkingBudget,omitempty"`
}

type gmReq struct {
	Contents          []gmContent `json:"contents"`
	SystemInstruction *gmContent  `json:"systemInstruction,omitempty"`
	Tools             []struct {
		FunctionDeclarations []gmFunc `json:"functionDeclarations"`
	} `json:"tools,omitempty"`
	GenerationConfig *gmGenConfig `json:"generationConfig,omitempty"`
}

func geminiBody(req model.Request, names toolNames) (gmReq, error) {
	p := params(req.Params)
	cm, err := commonParams(p)
	if err != nil {
		return gmReq{}, err
	}
	gc := &gmGenConfig{Temperature: cm.Temperature, TopP: cm.TopP, MaxOutputTokens: cm.MaxTokens, StopSequences: cm.Stop, Seed: cm.Seed}
	if gc.TopK, err = p.int("top_k"); err != nil {
		return gmReq{}, err
	}
	budget, err := p.int("thinking_budget")
	if err != nil {
		return gmReq{}, err
	}
	if budget != nil {
		gc.ThinkingConfig = &gmThinkingConfig{IncludeThoughts: *budget != 0, ThinkingBudget: budget}
	}
	var body gmReq
	if b, _ := json.Marshal(gc); string(b) != "{}" {
		body.GenerationConfig = gc
	}
	callNames := map[string]string{} // call id → tool name, for function responses
	var system []gmPart
	for _, m := range req.Messages {
		var c gmContent
		switch m.Role {
		case "system":
			system = append(system, gmPart{Text: m.Content})
			continue
		case "tool":
			name := m.Name
			if name == "" {
				name = callNames[m.ToolCallID]
			}
			c = gmContent{Role: "user", Parts: []gmPart{{FunctionResponse: &gmResponse{ID: m.ToolCallID, Name: names.encode(name),
				Response: map[string]any{"content": m.Content}}}}}
		default:
			c.Role = "user"
			if m.Role == "assistant" {
				c.Role = "model"
			}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				c.Parts = append(c.Parts, gmPart{Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				callNames[tc.ID] = tc.Name
				c.Parts = append(c.Parts, gmPart{FunctionCall: &gmCall{ID: tc.ID, Name: names.encode(tc.Name), Args: argsObject(tc.Arguments)}})
			}
		}
		if n := len(body.Contents); n > 0 && body.Contents[n-1].Role == c.Role {
			body.Contents[n-1].Parts = append(body.Contents[n-1].Parts, c.Parts...)
			continue
		}
		body.Contents = append(body.Contents, c)
	}
	if len(system) > 0 {
		body.SystemInstruction = &gmContent{Parts: system}
	}
	if len(req.Tools) > 0 {
		body.Tools = make([]struct {
			FunctionDeclarations []gmFunc `json:"functionDeclarations"`
		}, 1)
		for _, t := range req.Tools {
			body.Tools[0].FunctionDeclarations = append(body.Tools[0].FunctionDeclarations, gmFunc{names.encode(t.Name), t.Description, schema(t)})
		}
	}
	return body, nil
}

func geminiHeaders(key string) map[string]string {
	if key == "" {
		return nil
	}
	return map[string]string{"x-goog-api-key": key}
}

func (d *gemini) Stream(ctx context.Context, req model.Request, emit func(abi.Event) error) error {
	names := newToolNames(req)
	body, err := geminiBody(req, names)
	if err != nil {
		return err
	}
	id := strings.TrimPrefix(nativeID(req), "models/")
	u := d.c.Base + "/v1beta/models/" + url.PathEscape(id) + ":streamGenerateContent?alt=sse"
	return d.c.stream(ctx, call{url: u, body: body, headers: geminiHeaders, notFound: geminiModelNotFound, decode: decodeGemini}, names, emit)
}

// geminiModelNotFound: an unknown model is a 404 with status NOT_FOUND in
// the Google error object; an unknown path is a bare 404 page.
func geminiModelNotFound(body []byte) bool {
	var v struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &v) == nil && v.Error.Status == "NOT_FOUND"
}

type gmChunk struct {
	Candidates []struct {
		Content      gmContent `json:"content"`
		FinishReason string    `json:"finishReason"`
		Index        int       `json:"index"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	ResponseID string          `json:"responseId"`
	Error      json.RawMessage `json:"error"`
}

// decodeGemini maps GenerateContentResponse chunks: text parts → delta,
// thought parts → reasoning_delta, functionCall parts (whole, args an
// object) → tool_call, the last usageMetadata → usage (output counts
// thoughts too, as reasoning_tokens). The stream has no end marker: a
// finishReason is the end; a stream that closes before one was cut.
func decodeGemini(ctx context.Context, c *Conn, body io.Reader, o *out) error {
	rd := sse.NewReader(body)
	finished := false
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			if !finished {
				return c.Truncated()
			}
			return o.Finish()
		}
		if err != nil {
			return c.TransportError(ctx, err)
		}
		var ch gmChunk
		if err := json.Unmarshal(ev.Data, &ch); err != nil {
			return abi.Errorf(abi.EPROTO, "%s (%s): bad stream chunk: %v", c.ModelID, c.Driver, err)
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return c.streamError(ev.Data)
		}
		if ch.ResponseID != "" {
			o.responseID = ch.ResponseID
		}
		for _, cand := range ch.Candidates {
			if cand.Index != 0 {
				continue
			}
			for _, part := range cand.Content.Parts {
				switch {
				case part.FunctionCall != nil:
					err = o.ToolCall(part.FunctionCall.ID, part.FunctionCall.Name, part.FunctionCall.Args)
				case part.Thought:
					err = o.Reasoning(part.Text)
				default:
					err = o.Text(part.Text)
				}
				if err != nil {
					return err
				}
			}
			if cand.FinishReason != "" {
				finished = true
			}
		}
		if u := ch.UsageMetadata; u != nil {
			o.Usage(u.PromptTokenCount, u.CandidatesTokenCount+u.ThoughtsTokenCount, u.ThoughtsTokenCount)
		}
	}
}
