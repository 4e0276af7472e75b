package tool

import (
	"bytes"
	"encoding/json"
	"sync"

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

// mustSchema builds a .d/schema document from the input and output schemas.
// That every built-in schema compiles is checked by TestBuiltinSchemasCompile,
// not here: this runs at every process start of every applet.
func mustSchema(input, output json.RawMessage) json.RawMessage {
	doc := append([]byte(`{"input":`), input...)
	doc = append(doc, `,"output":`...)
	doc = append(doc, output...)
	return append(doc, '}')
}

// schemaLit is a schema literal written for humans, compacted on first
// use: nothing of it runs before main (every applet starts with this
// package linked in, and most never call a tool).
type schemaLit struct {
	src  string
	once sync.Once
	doc  json.RawMessage
}

func lit(src string) *schemaLit { return &schemaLit{src: src} }

// JSON is the compact document.
func (l *schemaLit) JSON() json.RawMessage {
	l.once.Do(func() { l.doc = compact(l.src) })
	return l.doc
}

// compact turns a schema literal written for humans into compact JSON.
func compact(s string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic("tool: bad built-in schema literal: " + err.Error())
	}
	return b.Bytes()
}
