package fake

import (
	"encoding/json"
	"fmt"
)

func rev(typ string, fields string) string {
	if fields != "" {
		fields = "," + fields
	}
	return fmt.Sprintf(`{"type":%q%s}`, typ, fields)
}

func respEvents(evs ...string) []string {
	var out []string
	for i, e := range evs {
		var v struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(e), &v)
		// Real streams number every event.
		e = e[:len(e)-1] + fmt.Sprintf(`,"sequence_number":%d}`, i)
		out = append(out, sseData(v.Type, e)...)
	}
	return out
}

const respHead = `"response":{"id":"resp_fake1","object":"response","created_at":1700000000,"status":"in_progress","model":"fake","output":[],"usage":null}`

func respCompleted(in, out, reasoning int) string {
	return rev("response.completed", fmt.Sprintf(`"response":{"id":"resp_fake1","object":"response","created_at":1700000000,"status":"completed","model":"fake","output":[],"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}}`, in, out, reasoning, in+out))
}

func textDelta(s string) string {
	b, _ := json.Marshal(s)
	return rev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+string(b))
}

// ResponsesText is a complete Responses stream of text deltas.
func ResponsesText(deltas ...string) []string {
	evs := []string{rev("response.created", respHead), rev("response.in_progress", respHead),
		rev("response.output_item.added", `"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}`)}
	for _, d := range deltas {
		evs = append(evs, textDelta(d))
	}
	evs = append(evs, rev("response.output_item.done", `"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant"}`),
		respCompleted(5, len(deltas), 0))
	return respEvents(evs...)
}

func responsesScenario(name, key string) Reply {
	switch name {
	case "reasoning":
		return Reply{Chunks: respEvents(rev("response.created", respHead),
			rev("response.output_item.added", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`),
			rev("response.reasoning_summary_part.added", `"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}`),
			rev("response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"think"`),
			rev("response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"ing"`),
			rev("response.reasoning_summary_text.done", `"item_id":"rs_1","output_index":0,"summary_index":0,"text":"thinking"`),
			rev("response.output_item.done", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"thinking"}]}`),
			textDelta("ok"), respCompleted(5, 4, 3))}
	case "tool":
		return Reply{Chunks: respEvents(rev("response.created", respHead),
			textDelta("Let me look."),
			rev("response.output_item.added", `"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"fs_read"}`),
			rev("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"{\"pa"`),
			rev("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"th\":\"RE"`),
			rev("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"ADME\"}"`),
			rev("response.function_call_arguments.done", `"item_id":"fc_1","output_index":1,"arguments":"{\"path\":\"README\"}"`),
			rev("response.output_item.done", `"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"path\":\"README\"}","call_id":"call_a","name":"fs_read"}`),
			rev("response.output_item.done", `"output_index":2,"item":{"id":"fc_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_b","name":"fs_list"}`),
			respCompleted(12, 9, 0))}
	case "error":
		return Reply{Chunks: respEvents(rev("response.created", respHead), textDelta("partial"),
			rev("response.failed", `"response":{"id":"resp_fake1","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error processing your request."},"usage":null}`))}
	case "truncated":
		return Reply{Chunks: respEvents(rev("response.created", respHead), textDelta("parti"))}
	case "cut":
		return Reply{Chunks: append(respEvents(rev("response.created", respHead), textDelta("parti")), "event: response.output_text.delta\ndata: {\"ty"), Cut: true}
	case "incomplete":
		return Reply{Chunks: respEvents(rev("response.created", respHead), textDelta("parti"),
			rev("response.incomplete", `"response":{"id":"resp_fake1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`))}
	}
	return chatScenario(name, key).errorsOnly(ResponsesText("hel", "lo"))
}

// errorsOnly keeps a status reply (the HTTP error shapes of the OpenAI
// APIs are the same) and replaces a stream with chunks.
func (r Reply) errorsOnly(chunks []string) Reply {
	if r.Status != 0 && r.Status != 200 || r.Delay > 0 {
		return r
	}
	return Reply{Chunks: chunks}
}
