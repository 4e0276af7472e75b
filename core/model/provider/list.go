package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/wire/httpx"
)

// Listing is one model of a provider's listing, in the model-abi listing
// fields (the first metadata keys of a model object).
type Listing struct {
	ID            string `json:"id"` // provider-native id
	Name          string `json:"name"`
	Description   string `json:"description"`
	Type          string `json:"type"` // chat | embedding | …
	CreatedAt     string `json:"created_at"`
	OwnedBy       string `json:"owned_by"`
	ContextLength string `json:"context_length"`
}

// maxListing bounds a listing body.
const maxListing = 16 << 20

// List fetches the listing of the provider behind cfg with the listing
// call of driver: OpenAI-style GET /models, Anthropic GET /v1/models,
// Gemini GET /v1beta/models, Ollama GET /api/tags. The credential rules are
// the driver's: an unconfigured provider is ENOKEY and nothing is sent.
func List(ctx context.Context, driver string, cfg model.Config) ([]Listing, error) {
	var base, auth string
	switch driver {
	case "openai-chat", "openai-responses":
		base, auth = OpenAIBase, "required"
	case "anthropic-messages":
		base, auth = AnthropicBase, "required"
	case "gemini":
		base, auth = GeminiBase, "required"
	case "ollama":
		base, auth = OllamaBase, "optional"
	default:
		return nil, abi.Errorf(abi.ENOTSUP, "driver %q cannot list models", driver)
	}
	c, err := NewConn(cfg, driver, base, auth)
	if err != nil {
		return nil, err
	}
	key, err := c.credential(ctx)
	if err != nil {
		return nil, err
	}
	var out []Listing
	switch driver {
	case "anthropic-messages":
		out, err = c.listAnthropic(ctx, key)
	case "gemini":
		out, err = c.listGemini(ctx, key)
	case "ollama":
		out, err = c.listOllama(ctx, key)
	default:
		out, err = c.listOpenAI(ctx, key)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

func (c *Conn) getJSON(ctx context.Context, u string, headers map[string]string, v any) error {
	resp, err := c.send(ctx, http.MethodGet, u, nil, headers, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := httpx.ReadLimited(resp.Body, maxListing)
	if err != nil {
		return c.TransportError(ctx, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return abi.Errorf(abi.EPROTO, "%s: bad model listing: %v", c.Driver, err)
	}
	return nil
}

func unixTime(n int64) string {
	if n <= 0 {
		return ""
	}
	return time.Unix(n, 0).UTC().Format(time.RFC3339)
}

func itoa(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// embeddingish guesses the type of an OpenAI-style id: those endpoints
// carry no type field.
func embeddingish(id string) string {
	if strings.Contains(id, "embed") {
		return "embedding"
	}
	return "chat"
}

func (c *Conn) listOpenAI(ctx context.Context, key string) ([]Listing, error) {
	var v struct {
		Data []struct {
			ID            string `json:"id"`
			Name          string `json:"name"`
			Description   string `json:"description"`
			Created       int64  `json:"created"`
			OwnedBy       string `json:"owned_by"`
			ContextLength int    `json:"context_length"`
		} `json:"data"`
	}
	if err := c.getJSON(ctx, c.Base+"/models", bearer(key), &v); err != nil {
		return nil, err
	}
	out := make([]Listing, 0, len(v.Data))
	for _, m := range v.Data {
		name := m.Name
		if name == "" {
			name = m.ID
		}
		out = append(out, Listing{ID: m.ID, Name: name, Description: m.Description, Type: embeddingish(m.ID),
			CreatedAt: unixTime(m.Created), OwnedBy: m.OwnedBy, ContextLength: itoa(m.ContextLength)})
	}
	return out, nil
}

func (c *Conn) listAnthropic(ctx context.Context, key string) ([]Listing, error) {
	var out []Listing
	after := ""
	for page := 0; page < 20; page++ {
		var v struct {
			Data []struct {
				ID          string `json:"id"`
				DisplayName string `json:"display_name"`
				CreatedAt   string `json:"created_at"`
			} `json:"data"`
			HasMore bool   `json:"has_more"`
			LastID  string `json:"last_id"`
		}
		u := c.Base + "/v1/models?limit=1000"
		if after != "" {
			u += "&after_id=" + url.QueryEscape(after)
		}
		if err := c.getJSON(ctx, u, anthropicHeaders(key), &v); err != nil {
			return nil, err
		}
		for _, m := range v.Data {
			out = append(out, Listing{ID: m.ID, Name: m.DisplayName, Type: "chat", CreatedAt: m.CreatedAt, OwnedBy: "anthropic"})
		}
		if !v.HasMore || v.LastID == "" {
			break
		}
		after = v.LastID
	}
	return out, nil
}

func (c *Conn) listGemini(ctx context.Context, key string) ([]Listing, error) {
	var out []Listing
	token := ""
	for page := 0; page < 20; page++ {
		var v struct {
			Models []struct {
				Name                       string   `json:"name"`
				DisplayName                string   `json:"displayName"`
				Description                string   `json:"description"`
				InputTokenLimit            int      `json:"inputTokenLimit"`
				SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
			} `json:"models"`
			NextPageToken string `json:"nextPageToken"`
		}
		u := c.Base + "/v1beta/models?pageSize=1000"
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		if err := c.getJSON(ctx, u, geminiHeaders(key), &v); err != nil {
			return nil, err
		}
		for _, m := range v.Models {
			typ := "chat"
			methods := strings.Join(m.SupportedGenerationMethods, ",")
			if !strings.Contains(methods, "generateContent") && strings.Contains(methods, "embed") {
				typ = "embedding"
			}
			out = append(out, Listing{ID: strings.TrimPrefix(m.Name, "models/"), Name: m.DisplayName, Description: m.Description,
				Type: typ, OwnedBy: "google", ContextLength: itoa(m.InputTokenLimit)})
		}
		if v.NextPageToken == "" {
			break
		}
		token = v.NextPageToken
	}
	return out, nil
}

func (c *Conn) listOllama(ctx context.Context, key string) ([]Listing, error) {
	var v struct {
		Models []struct {
			Name       string `json:"name"`
			ModifiedAt string `json:"modified_at"`
			Details    struct {
				Family        string `json:"family"`
				ParameterSize string `json:"parameter_size"`
			} `json:"details"`
		} `json:"models"`
	}
	if err := c.getJSON(ctx, c.Base+"/api/tags", bearer(key), &v); err != nil {
		return nil, err
	}
	out := make([]Listing, 0, len(v.Models))
	for _, m := range v.Models {
		created := m.ModifiedAt
		if t, err := time.Parse(time.RFC3339Nano, created); err == nil {
			created = t.UTC().Format(time.RFC3339)
		}
		desc := strings.TrimSpace(m.Details.Family + " " + m.Details.ParameterSize)
		out = append(out, Listing{ID: m.Name, Name: m.Name, Description: desc, Type: embeddingish(m.Name), CreatedAt: created, OwnedBy: "ollama"})
	}
	return out, nil
}
