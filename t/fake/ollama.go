package fake

import (
	"encoding/json"
	"fmt"
)

func olLine(msg string) string {
	return fmt.Sprintf(`{"model":"fake","created_at":"2025-01-02T03:04:05.000000001Z","message":%s,"done":false}`+"\n", msg)
}

func olMsg(content, thinking string) string {
	c, _ := json.Marshal(content)
	t := ""
	if thinking != "" {
		b, _ := json.Marshal(thinking)
		t = `,"thinking":` + string(b)
	}
	return `{"role":"assistant","content":` + string(c) + t + `}`
}

func olDone(in, out int) string {
	return fmt.Sprintf(`{"model":"fake","created_at":"2025-01-02T03:04:06.000000001Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":123456,"load_duration":1000,"prompt_eval_count":%d,"prompt_eval_duration":1000,"eval_count":%d,"eval_duration":1000}`+"\n", in, out)
}

const ndjson = "application/x-ndjson"

// OllamaText is a complete /api/chat stream of content deltas.
func OllamaText(deltas ...string) []string {
	var out []string
	for _, d := range deltas {
		out = append(out, olLine(olMsg(d, "")))
	}
	return append(out, olDone(5, len(deltas)))
}

func ollamaScenario(name, key string) Reply {
	switch name {
	case "reasoning":
		return Reply{ContentType: ndjson, Chunks: []string{olLine(olMsg("", "think")), olLine(olMsg("", "ing")), olLine(olMsg("ok", "")), olDone(5, 4)}}
	case "tool":
		// Ollama sends tool calls whole (arguments an object, no id); the
		// line is split across writes to exercise reassembly.
		call := olLine(`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"fs_read","arguments":{"path":"README"}}},{"function":{"name":"fs_list","arguments":{}}}]}`)
		return Reply{ContentType: ndjson, Chunks: []string{olLine(olMsg("Let me look.", "")), call[:40], call[40:], olDone(12, 9)}}
	case "error":
		return Reply{ContentType: ndjson, Chunks: []string{olLine(olMsg("partial", "")), `{"error":"an error was encountered while running the model: unexpected EOF"}` + "\n"}}
	case "truncated":
		return Reply{ContentType: ndjson, Chunks: []string{olLine(olMsg("parti", ""))}}
	case "cut":
		return Reply{ContentType: ndjson, Chunks: []string{olLine(olMsg("parti", "")), `{"model":"fake","crea`}, Cut: true}
	case "e401":
		return jsonReply(401, `{"error":"unauthorized: bad token `+key+`"}`)
	case "e429":
		return jsonReply(429, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`)
	case "e500":
		return jsonReply(500, `{"error":"llama runner process has terminated: exit status 2"}`)
	case "missing":
		return jsonReply(404, `{"error":"model \"missing\" not found, try pulling it first"}`)
	case "slow":
		r := slow()
		r.ContentType = ndjson
		r.Chunks = []string{olLine(olMsg("", "")), ""}
		return r
	}
	return Reply{ContentType: ndjson, Chunks: OllamaText("hel", "lo")}
}
