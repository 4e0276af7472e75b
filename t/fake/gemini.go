package fake

import (
	"encoding/json"
	"fmt"
)

func gmChunk(parts, finish, usage string) string {
	f := ""
	if finish != "" {
		f = `,"finishReason":"` + finish + `"`
	}
	u := ""
	if usage != "" {
		u = `,"usageMetadata":` + usage
	}
	return fmt.Sprintf(`{"candidates":[{"content":{"parts":[%s],"role":"model"}%s,"index":0}]%s,"modelVersion":"fake","responseId":"gm_fake1"}`, parts, f, u)
}

func gmText(s string) string {
	b, _ := json.Marshal(s)
	return `{"text":` + string(b) + `}`
}

func gmUsage(in, out, thoughts int) string {
	t := ""
	if thoughts > 0 {
		t = fmt.Sprintf(`,"thoughtsTokenCount":%d`, thoughts)
	}
	return fmt.Sprintf(`{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d%s}`, in, out, in+out+thoughts, t)
}

// GeminiText is a complete streamGenerateContent stream of text parts.
func GeminiText(deltas ...string) []string {
	var p []string
	for i, d := range deltas {
		if i == len(deltas)-1 {
			p = append(p, gmChunk(gmText(d), "STOP", gmUsage(5, len(deltas), 0)))
		} else {
			p = append(p, gmChunk(gmText(d), "", ""))
		}
	}
	return sseData("", p...)
}

func geminiScenario(name, key string) Reply {
	switch name {
	case "reasoning":
		return Reply{Chunks: sseData("",
			gmChunk(`{"text":"think","thought":true}`, "", ""),
			gmChunk(`{"text":"ing","thought":true}`, "", ""),
			gmChunk(gmText("ok"), "STOP", gmUsage(5, 1, 3)))}
	case "tool":
		// Gemini sends each functionCall whole (args an object); two calls
		// arrive in separate chunks.
		return Reply{Chunks: sseData("",
			gmChunk(gmText("Let me look."), "", ""),
			gmChunk(`{"functionCall":{"name":"fs_read","args":{"path":"README"}},"thoughtSignature":"CiIBVKhc"}`, "", ""),
			gmChunk(`{"functionCall":{"name":"fs_list","args":{}}}`, "STOP", gmUsage(12, 9, 0)))}
	case "error":
		return Reply{Chunks: sseData("", gmChunk(gmText("partial"), "", ""),
			`{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)}
	case "truncated":
		return Reply{Chunks: sseData("", gmChunk(gmText("parti"), "", ""))}
	case "cut":
		return Reply{Chunks: []string{sseData("", gmChunk(gmText("parti"), "", ""))[0], `data: {"candidates":[{"con`}, Cut: true}
	case "e401":
		return jsonReply(403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers (key `+key+`).","status":"PERMISSION_DENIED"}}`)
	case "e429":
		return jsonReply(429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`)
	case "e500":
		return jsonReply(500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`)
	case "missing":
		return jsonReply(404, `{"error":{"code":404,"message":"models/missing is not found for API version v1beta","status":"NOT_FOUND"}}`)
	case "slow":
		return slow()
	}
	return Reply{Chunks: GeminiText("hel", "lo")}
}
