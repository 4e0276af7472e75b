package fake

import (
	"encoding/json"
	"fmt"
)

// anEv renders one named Messages event; the data carries the same type.
func anEv(typ, fields string) string {
	if fields != "" {
		fields = "," + fields
	}
	return sseData(typ, fmt.Sprintf(`{"type":%q%s}`, typ, fields))[0]
}

func anStart(in int) string {
	return anEv("message_start", fmt.Sprintf(`"message":{"id":"msg_fake1","type":"message","role":"assistant","content":[],"model":"fake","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}`, in))
}

func anTextBlock(i int, deltas ...string) []string {
	out := []string{anEv("content_block_start", fmt.Sprintf(`"index":%d,"content_block":{"type":"text","text":""}`, i))}
	for _, d := range deltas {
		b, _ := json.Marshal(d)
		out = append(out, anEv("content_block_delta", fmt.Sprintf(`"index":%d,"delta":{"type":"text_delta","text":%s}`, i, b)))
	}
	return append(out, anEv("content_block_stop", fmt.Sprintf(`"index":%d`, i)))
}

func anEnd(reason string, out int) []string {
	return []string{anEv("message_delta", fmt.Sprintf(`"delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}`, reason, out)),
		anEv("message_stop", "")}
}

// AnthropicText is a complete Messages stream of text deltas.
func AnthropicText(deltas ...string) []string {
	out := []string{anStart(5), anEv("ping", "")}
	out = append(out, anTextBlock(0, deltas...)...)
	return append(out, anEnd("end_turn", len(deltas))...)
}

func anthropicScenario(name, key string) Reply {
	switch name {
	case "reasoning":
		out := []string{anStart(5),
			anEv("content_block_start", `"index":0,"content_block":{"type":"thinking","thinking":""}`),
			anEv("content_block_delta", `"index":0,"delta":{"type":"thinking_delta","thinking":"think"}`),
			anEv("content_block_delta", `"index":0,"delta":{"type":"thinking_delta","thinking":"ing"}`),
			anEv("content_block_delta", `"index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}`),
			anEv("content_block_stop", `"index":0`)}
		out = append(out, anTextBlock(1, "ok")...)
		return Reply{Chunks: append(out, anEnd("end_turn", 4)...)}
	case "tool":
		out := []string{anStart(12)}
		out = append(out, anTextBlock(0, "Let me look.")...)
		out = append(out,
			anEv("content_block_start", `"index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"fs_read","input":{}}`),
			anEv("content_block_delta", `"index":1,"delta":{"type":"input_json_delta","partial_json":""}`),
			anEv("content_block_delta", `"index":1,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}`),
			anEv("ping", ""),
			anEv("content_block_delta", `"index":1,"delta":{"type":"input_json_delta","partial_json":"th\":\"RE"}`),
			anEv("content_block_delta", `"index":1,"delta":{"type":"input_json_delta","partial_json":"ADME\"}"}`),
			anEv("content_block_stop", `"index":1`),
			anEv("content_block_start", `"index":2,"content_block":{"type":"tool_use","id":"toolu_b","name":"fs_list","input":{}}`),
			anEv("content_block_stop", `"index":2`))
		return Reply{Chunks: append(out, anEnd("tool_use", 9)...)}
	case "error":
		out := []string{anStart(5), anEv("content_block_start", `"index":0,"content_block":{"type":"text","text":""}`),
			anEv("content_block_delta", `"index":0,"delta":{"type":"text_delta","text":"partial"}`),
			anEv("error", `"error":{"type":"overloaded_error","message":"Overloaded"}`)}
		return Reply{Chunks: out}
	case "truncated":
		return Reply{Chunks: []string{anStart(5), anEv("content_block_start", `"index":0,"content_block":{"type":"text","text":""}`),
			anEv("content_block_delta", `"index":0,"delta":{"type":"text_delta","text":"parti"}`)}}
	case "cut":
		return Reply{Chunks: []string{anStart(5), anEv("content_block_start", `"index":0,"content_block":{"type":"text","text":""}`),
			anEv("content_block_delta", `"index":0,"delta":{"type":"text_delta","text":"parti"}`), "event: content_block_delta\ndata: {\"ty"}, Cut: true}
	case "e401":
		return jsonReply(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key `+key+`"}}`)
	case "e429":
		return jsonReply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
	case "e500":
		return jsonReply(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
	case "missing":
		return jsonReply(404, `{"type":"error","error":{"type":"not_found_error","message":"model: missing"}}`)
	case "slow":
		return slow()
	}
	return Reply{Chunks: AnthropicText("hel", "lo")}
}
