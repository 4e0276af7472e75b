// Package ipc is cbth's internal daemon protocol: versioned JSONL requests
// and responses over the Unix socket $CBTH_HOME/run/cbth.sock, served only
// to peers whose SO_PEERCRED uid is the daemon owner's. A message larger
// than one frame travels as base64 parts; a request may carry open files
// (SCM_RIGHTS) so the daemon reads what the client could open instead of
// opening client-named paths itself. It is not a public API; the version
// field lets an old client get a clear EPROTO.
package ipc

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Version is the protocol version this binary speaks (2: parts and
// descriptors).
const Version = 2

// MaxOp bounds an operation name.
const MaxOp = 64

// Request is one client frame.
type Request struct {
	V    int             `json:"v"`
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
	// Fds is how many descriptors came with the request (SCM_RIGHTS on
	// its first byte).
	Fds int `json:"fds,omitempty"`
}

// ErrorBody is the stable error shape.
type ErrorBody struct {
	Code    abi.Code `json:"code"`
	Message string   `json:"message"`
}

// Response is one daemon frame.
type Response struct {
	V      int             `json:"v"`
	ID     uint64          `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *ErrorBody      `json:"error,omitempty"`
}

// DecodeRequest parses and validates one request frame. A frame with
// another protocol version is EPROTO naming both versions; any other
// malformation is EPROTO too (the peer spoke the protocol wrongly).
func DecodeRequest(frame []byte) (Request, error) {
	var probe struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(frame, &probe); err != nil {
		return Request{}, abi.Errorf(abi.EPROTO, "ipc: request is not a JSON object: %v", err)
	}
	if probe.V == nil {
		return Request{}, abi.Errorf(abi.EPROTO, "ipc: request has no protocol version \"v\"")
	}
	if *probe.V != Version {
		return Request{}, VersionError(*probe.V)
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return Request{}, abi.Errorf(abi.EPROTO, "ipc: bad request: %v", err)
	}
	if dec.More() {
		return Request{}, abi.Errorf(abi.EPROTO, "ipc: trailing data after request")
	}
	if !validOp(r.Op) {
		return Request{}, abi.Errorf(abi.EPROTO, "ipc: bad op %q", truncate(r.Op))
	}
	if len(r.Args) > 0 && r.Args[0] != '{' && string(r.Args) != "null" {
		return Request{}, abi.Errorf(abi.EPROTO, "ipc: args must be a JSON object")
	}
	if r.Fds < 0 || r.Fds > MaxFds {
		return Request{}, abi.Errorf(abi.EPROTO, "ipc: request announces %d descriptors (at most %d)", r.Fds, MaxFds)
	}
	return r, nil
}

// VersionError is the clear error an old (or newer) client gets.
func VersionError(got int) error {
	return abi.Errorf(abi.EPROTO, "ipc: client speaks cbth protocol v%d but the daemon speaks v%d; "+
		"run `cbth daemon stop` and retry with one cbth binary", got, Version)
}

func validOp(op string) bool {
	if op == "" || len(op) > MaxOp {
		return false
	}
	for _, c := range op {
		if !(c >= 'a' && c <= 'z' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > MaxOp {
		return s[:MaxOp] + "…"
	}
	return s
}

// errorResponse turns err into a response frame.
func errorResponse(id uint64, err error) Response {
	return Response{V: Version, ID: id, Error: &ErrorBody{Code: abi.CodeOf(err), Message: err.Error()}}
}

// okResponse marshals v as the result. A result too large for one reply
// is EMSGSIZE with a hint, never a dropped connection.
func okResponse(id uint64, v any) (Response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Response{}, fmt.Errorf("ipc: cannot encode result: %w", err)
	}
	if len(b) > MaxReply-1024 {
		return Response{}, abi.Errorf(abi.EMSGSIZE, "reply of %d bytes exceeds the %d-byte limit; ask for less (e.g. a smaller --limit)",
			len(b), MaxReply)
	}
	return Response{V: Version, ID: id, OK: true, Result: b}, nil
}
