package tool

import (
	"bytes"
	"encoding/json"

	"github.com/cortexfs/cortexfs/core/abi"
)

// decodeArgs validates args against input, then fills dst. Validation
// first matters: encoding/json alone ignores unknown keys, matches keys
// case-insensitively and lets a duplicate key win.
func decodeArgs(input, args json.RawMessage, dst any) error {
	if err := Validate(input, args); err != nil {
		return err
	}
	if err := json.Unmarshal(args, dst); err != nil {
		return abi.Errorf(abi.EINVAL, "%v", err)
	}
	return nil
}

// encodeResult renders a result object as compact JSON without HTML
// escaping, so "<" in file content reaches the model as "<", not "\u003c".
// Invalid UTF-8 in strings becomes U+FFFD.
func encodeResult(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, abi.Errorf(abi.EIO, "encode result: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// mustSchema builds a .d/schema document from the input and output schemas
// and panics if either does not compile: the schemas are ours.
func mustSchema(input, output json.RawMessage) json.RawMessage {
	for _, s := range []json.RawMessage{input, output} {
		v, err := decodeStrict(s)
		if err == nil {
			_, err = compile(v, "", 0)
		}
		if err != nil {
			panic("tool: bad built-in schema: " + err.Error())
		}
	}
	doc := append([]byte(`{"input":`), input...)
	doc = append(doc, `,"output":`...)
	doc = append(doc, output...)
	return append(doc, '}')
}

// compact turns a schema literal written for humans into compact JSON.
func compact(s string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic("tool: bad built-in schema literal: " + err.Error())
	}
	return b.Bytes()
}
