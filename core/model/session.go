package model

import (
	"bytes"
	"encoding/json"

	"github.com/cortexfs/cortexfs/core/abi"
)

// PastTurn is one completed turn of a CortexFS session: what the caller
// sent and the frames the run produced.
type PastTurn struct {
	Input  json.RawMessage
	Events []abi.Event
}

// ParseTurnInput reads a socket send's input: a JSON string is a user
// message; an object is {"messages":[…],"tools":…,"params":…}.
func ParseTurnInput(raw json.RawMessage) (Input, error) {
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0:
		return Input{}, abi.Errorf(abi.EINVAL, "empty input")
	case t[0] == '"':
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return Input{}, abi.Errorf(abi.EINVAL, "bad input string: %v", err)
		}
		return TextInput(s), nil
	case t[0] == '{':
		return ParseInput(t)
	default:
		return Input{}, abi.Errorf(abi.EINVAL, "input must be a string or a JSON object")
	}
}

// SessionInput replays a session to a stateless provider: the messages of
// every earlier turn (its input, then the assistant's messages and tool
// calls), then this turn's input. The session history is CortexFS's own,
// never provider-native state.
func SessionInput(history []PastTurn, current json.RawMessage) (Input, error) {
	in, err := ParseTurnInput(current)
	if err != nil {
		return Input{}, err
	}
	var msgs []Message
	for _, h := range history {
		past, err := ParseTurnInput(h.Input)
		if err != nil {
			continue // a turn that was refused never reached the model
		}
		msgs = append(msgs, past.Messages...)
		msgs = append(msgs, assistantMessages(h.Events)...)
	}
	in.Messages = append(msgs, in.Messages...)
	return in, nil
}

func assistantMessages(events []abi.Event) []Message {
	var out []Message
	var calls []ToolCall
	for _, e := range events {
		switch {
		case e.Type == abi.EvMessage && e.Role == "assistant":
			out = append(out, Message{Role: "assistant", Content: e.MessageText()})
		case e.Type == abi.EvToolCall:
			calls = append(calls, ToolCall{ID: e.CallID, Name: e.Name, Arguments: e.Arguments})
		}
	}
	if len(calls) > 0 {
		if len(out) > 0 {
			out[len(out)-1].ToolCalls = calls
		} else {
			out = append(out, Message{Role: "assistant", ToolCalls: calls})
		}
	}
	return out
}
