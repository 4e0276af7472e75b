package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
)

// Envelope is the one --json shape of every command's answer: an object
// whose "ok" says whether the exit status is 0. An object result keeps its
// keys at the top level with "ok" in front (a result with its own "ok",
// such as a doctor's report, keeps that); a list is {"ok":…,"items":[…]}.
func Envelope(ok bool, v any) ([]byte, error) {
	if isList(v) {
		items, err := marshal(v)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(items, []byte("null")) {
			items = []byte("[]")
		}
		return concat(`{"ok":`, okText(ok), `,"items":`, string(items), `}`), nil
	}
	b, err := marshal(v)
	if err != nil {
		return nil, err
	}
	switch {
	case bytes.Equal(b, []byte("null")):
		return concat(`{"ok":`, okText(ok), `}`), nil
	case len(b) == 0 || b[0] != '{':
		return concat(`{"ok":`, okText(ok), `,"value":`, string(b), `}`), nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, err
	}
	if _, has := keys["ok"]; has {
		return b, nil
	}
	if len(keys) == 0 {
		return concat(`{"ok":`, okText(ok), `}`), nil
	}
	return concat(`{"ok":`, okText(ok), `,`, string(b[1:])), nil
}

func isList(v any) bool {
	if v == nil {
		return false
	}
	k := reflect.TypeOf(v).Kind()
	if k == reflect.Pointer {
		k = reflect.TypeOf(v).Elem().Kind()
	}
	return k == reflect.Slice || k == reflect.Array
}

func okText(ok bool) string {
	if ok {
		return "true"
	}
	return "false"
}

func concat(parts ...string) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p)
	}
	return b.Bytes()
}

// marshal is json.Marshal without HTML escaping and without the newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// WriteJSON writes v as one line of JSON without HTML escaping.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
