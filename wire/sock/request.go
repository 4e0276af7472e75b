package sock

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// The four request ops.
const (
	OpSend   = "send"
	OpResume = "resume"
	OpCancel = "cancel"
	OpPing   = "ping"
)

// DefaultSession is the session a send without "session" goes to.
const DefaultSession = "default"

// maxClientID bounds client-chosen ids: they are kept in memory and in the
// index for the session's whole life.
const maxClientID = 256

// Request is one client frame. Which fields matter depends on Op:
//
//	send:   ID (client message id, required), Session (default "default"),
//	        Cwd, Input (required, any JSON value but null), Temp
//	resume: Session (required), After ("" or "0": from the start)
//	cancel: ID (the run id, required)
//	ping:   nothing
//
// Temp makes the run end with the connection: it is cancelled when the
// client closes the socket. A client that only shuts down its writing side
// still reads, so that is not a close.
type Request struct {
	Op      string          `json:"op"`
	ID      string          `json:"id,omitempty"`
	Session string          `json:"session,omitempty"`
	Cwd     string          `json:"cwd,omitempty"`
	After   string          `json:"after,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Temp    bool            `json:"temp,omitempty"`
}

// ParseRequest decodes and validates one request frame. Unknown fields are
// ignored; a send without session gets DefaultSession. Anything else wrong —
// invalid JSON, a field of the wrong type, an unknown op, a missing required
// field, an invalid session name or after — is EINVAL; a frame over
// jsonl.MaxFrame is EMSGSIZE.
func ParseRequest(line []byte) (Request, error) {
	if len(line) > jsonl.MaxFrame {
		return Request{}, abi.Errorf(abi.EMSGSIZE, "request of %d bytes exceeds the %d-byte frame limit", len(line), jsonl.MaxFrame)
	}
	// Unmarshal would turn null into a zero Request; only objects are requests.
	if t := bytes.TrimLeft(line, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Request{}, abi.Errorf(abi.EINVAL, "invalid request: not a JSON object")
	}
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		return Request{}, abi.Errorf(abi.EINVAL, "invalid request: %v", err)
	}
	return r, r.validate()
}

// validate checks r as ParseRequest does, filling in the default session.
func (r *Request) validate() error {
	switch r.Op {
	case OpSend:
		if r.Session == "" {
			r.Session = DefaultSession
		}
		if err := checkClientID(r.ID); err != nil {
			return err
		}
		if len(r.Input) == 0 || string(r.Input) == "null" {
			return abi.Errorf(abi.EINVAL, "send needs an input")
		}
	case OpResume:
		if r.Session == "" {
			return abi.Errorf(abi.EINVAL, "resume needs a session")
		}
		if _, err := parseAfter(r.After); err != nil {
			return err
		}
	case OpCancel:
		if r.ID == "" {
			return abi.Errorf(abi.EINVAL, "cancel needs the run id")
		}
		return nil
	case OpPing:
		return nil
	case "":
		return abi.Errorf(abi.EINVAL, "request without op")
	default:
		return abi.Errorf(abi.EINVAL, "unknown op %q", truncate(r.Op))
	}
	if err := abi.ValidName(r.Session); err != nil {
		return abi.Errorf(abi.EINVAL, "invalid session: %w", err)
	}
	return nil
}

func checkClientID(id string) error {
	switch {
	case id == "":
		return abi.Errorf(abi.EINVAL, "send needs an id (the client message id)")
	case len(id) > maxClientID:
		return abi.Errorf(abi.EINVAL, "send id longer than %d bytes", maxClientID)
	case !utf8.ValidString(id):
		return abi.Errorf(abi.EINVAL, "send id is not valid UTF-8")
	}
	return nil
}

// parseAfter reads a resume cursor: "" and "0" mean from the start,
// anything else must be a decimal event id.
func parseAfter(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, abi.Errorf(abi.EINVAL, "after %q is not an event id", truncate(s))
	}
	return n, nil
}

// truncate keeps error messages bounded when the input is hostile.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
