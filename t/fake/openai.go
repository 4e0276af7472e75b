package fake

import (
	"encoding/json"
	"fmt"
)

// chunk renders one chat.completion.chunk with choice 0's delta and finish.
func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return fmt.Sprintf(`{"id":"chatcmpl-fake1","object":"chat.completion.chunk","created":1700000000,"model":"fake","system_fingerprint":null,"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`, delta, f)
}

func content(s string) string {
	b, _ := json.Marshal(s)
	return `{"content":` + string(b) + `}`
}

func usageChunk(in, out, reasoning int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-fake1","object":"chat.completion.chunk","created":1700000000,"model":"fake","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"completion_tokens_details":{"reasoning_tokens":%d}}}`, in, out, in+out, reasoning)
}

// ChatText is a complete Chat Completions stream of text deltas.
func ChatText(deltas ...string) []string {
	p := []string{chunk(`{"role":"assistant","content":""}`, "")}
	for _, d := range deltas {
		p = append(p, chunk(content(d), ""))
	}
	p = append(p, chunk(`{}`, "stop"), usageChunk(5, len(deltas), 0), "[DONE]")
	return sseData("", p...)
}

func chatScenario(name, key string) Reply {
	switch name {
	case "reasoning":
		return Reply{Chunks: sseData("",
			chunk(`{"role":"assistant","content":null,"reasoning_content":"think"}`, ""),
			chunk(`{"reasoning":"ing"}`, ""),
			chunk(content("ok"), ""),
			chunk(`{}`, "stop"), usageChunk(5, 4, 3), "[DONE]")}
	case "tool":
		// Two calls interleaved by index, arguments in fragments; id and
		// name arrive first.
		return Reply{Chunks: sseData("",
			chunk(content("Let me look."), ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"fs_read","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"fs_list","arguments":"{}"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"RE"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ADME\"}"}}]}`, ""),
			chunk(`{}`, "tool_calls"), usageChunk(12, 9, 0), "[DONE]")}
	case "error":
		return Reply{Chunks: sseData("",
			chunk(content("partial"), ""),
			`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)}
	case "truncated":
		return Reply{Chunks: sseData("", chunk(content("parti"), ""))}
	case "cut":
		return Reply{Chunks: []string{sseData("", chunk(content("parti"), ""))[0], `data: {"id":"chatcmpl-fake1","obj`}, Cut: true}
	case "e401":
		return jsonReply(401, `{"error":{"message":"Incorrect API key provided: `+key+`. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
	case "e429":
		return jsonReply(429, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	case "e500":
		return jsonReply(500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
	case "missing":
		return jsonReply(404, `{"error":{"message":"The model `+"`missing`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
	case "slow":
		return slow()
	}
	return Reply{Chunks: ChatText("hel", "lo")}
}

func listing(k Kind) Reply {
	switch k {
	case Anthropic:
		return jsonReply(200, `{"data":[{"type":"model","id":"claude-sonnet-4-20250514","display_name":"Claude Sonnet 4","created_at":"2025-05-22T00:00:00Z"},{"type":"model","id":"claude-3-5-haiku-20241022","display_name":"Claude Haiku 3.5","created_at":"2024-10-22T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-20250514","last_id":"claude-3-5-haiku-20241022"}`)
	case Gemini:
		return jsonReply(200, `{"models":[{"name":"models/gemini-2.5-pro","version":"2.5","displayName":"Gemini 2.5 Pro","description":"Stable release of Gemini 2.5 Pro","inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","countTokens"]},{"name":"models/text-embedding-004","displayName":"Text Embedding 004","description":"Obtain a distributed representation of a text.","inputTokenLimit":2048,"outputTokenLimit":1,"supportedGenerationMethods":["embedContent"]}]}`)
	case Ollama:
		return jsonReply(200, `{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest","modified_at":"2025-01-02T03:04:05.123456789Z","size":2019393189,"digest":"a80c4f17acd5","details":{"parent_model":"","format":"gguf","family":"llama","families":["llama"],"parameter_size":"3.2B","quantization_level":"Q4_K_M"}}]}`)
	}
	return jsonReply(200, `{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"},{"id":"text-embedding-3-small","object":"model","created":1705948997,"owned_by":"system"}]}`)
}
