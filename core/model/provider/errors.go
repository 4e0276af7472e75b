package provider

import (
	"encoding/json"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// errorKinds maps the structured error type/code/status words providers put
// in an error object (OpenAI code/type, Anthropic error.type, Gemini
// status) to stable codes. Words, never message text.
var errorKinds = map[string]abi.Code{
	"rate_limit_exceeded": abi.EBUSY, "rate_limit_error": abi.EBUSY, "insufficient_quota": abi.EBUSY,
	"overloaded_error": abi.EBUSY, "resource_exhausted": abi.EBUSY, "slow_down": abi.EBUSY,
	"server_error": abi.EHOSTDOWN, "api_error": abi.EHOSTDOWN, "internal": abi.EHOSTDOWN, "internal_error": abi.EHOSTDOWN,
	"unavailable": abi.EHOSTDOWN, "service_unavailable": abi.EHOSTDOWN,
	"invalid_api_key": abi.EACCES, "authentication_error": abi.EACCES, "permission_error": abi.EACCES,
	"permission_denied": abi.EACCES, "unauthenticated": abi.EACCES,
	"model_not_found": abi.ENOENT, "not_found_error": abi.ENOENT, "not_found": abi.ENOENT,
	"invalid_request_error": abi.EINVAL, "context_length_exceeded": abi.EINVAL, "invalid_argument": abi.EINVAL,
	"invalid_prompt": abi.EINVAL, "request_too_large": abi.EMSGSIZE,
	"deadline_exceeded": abi.ETIMEDOUT, "timeout": abi.ETIMEDOUT,
}

// kindCode returns the code of the first known word among kinds, else EHOSTDOWN:
// a provider that reports an unclassified failure mid-stream is failing.
func kindCode(kinds ...string) abi.Code {
	for _, k := range kinds {
		if c, ok := errorKinds[strings.ToLower(k)]; ok {
			return c
		}
	}
	return abi.EHOSTDOWN
}

// streamError maps an error reported inside a stream. The object may be
// {"error":{…}} or the error itself, with code/type/status words and a
// message (for humans, redacted).
func (c *Conn) streamError(data []byte) error {
	var outer struct {
		Error json.RawMessage `json:"error"`
	}
	obj := data
	if json.Unmarshal(data, &outer) == nil && len(outer.Error) > 0 && outer.Error[0] == '{' {
		obj = outer.Error
	}
	var e struct {
		Code    any    `json:"code"`
		Type    string `json:"type"`
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(obj, &e)
	code := ""
	if s, ok := e.Code.(string); ok {
		code = s
	}
	k := kindCode(code, e.Type, e.Status)
	if n, ok := e.Code.(float64); ok && code == "" && e.Type == "" && e.Status == "" {
		if err := c.StatusError(int(n), obj, nil); abi.CodeOf(err) != abi.EPROTO {
			k = abi.CodeOf(err)
		}
	}
	msg := providerMessage(data)
	if msg == "" {
		msg = "provider reported an error"
	}
	return abi.Errorf(k, "%s (%s): error in stream: %s", c.ModelID, c.Driver, c.redact(msg))
}
