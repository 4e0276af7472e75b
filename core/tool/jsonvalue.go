package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
)

// maxDepth bounds the nesting of arguments and schemas so hostile input
// cannot exhaust the stack of the recursive validator.
const maxDepth = 64

// maxNumberLen bounds one number literal. No tool argument needs more
// digits, and it keeps big-number arithmetic on hostile input cheap.
const maxNumberLen = 128

// object is a decoded JSON object that remembers its key order, so errors
// name the first offending key of the document, not a random one.
type object struct {
	keys []string
	vals map[string]any
}

// decodeStrict parses data as exactly one JSON value into nil, bool,
// string, json.Number, []any or *object. Anything encoding/json would
// silently repair or pick for us is EINVAL instead: invalid UTF-8, lone
// UTF-16 surrogate escapes (both become U+FFFD), duplicate keys (the last
// one wins), trailing data. Ambiguous input must not reach a tool.
func decodeStrict(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, abi.Errorf(abi.EINVAL, "invalid JSON: not valid UTF-8")
	}
	if err := checkSurrogates(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, abi.Errorf(abi.EINVAL, "invalid JSON: data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, path string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, abi.Errorf(abi.EINVAL, "%s: nested deeper than %d levels", where(path), maxDepth)
		}
		if t == '{' {
			return decodeObject(dec, path, depth)
		}
		return decodeArray(dec, path, depth)
	case json.Number:
		if len(t) > maxNumberLen {
			return nil, abi.Errorf(abi.EINVAL, "%s: number longer than %d bytes", where(path), maxNumberLen)
		}
	}
	return tok, nil
}

func decodeObject(dec *json.Decoder, path string, depth int) (any, error) {
	obj := &object{vals: map[string]any{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(err)
		}
		key := tok.(string) // Token only returns a string in key position
		kpath := pointer(path, key)
		if _, dup := obj.vals[key]; dup {
			return nil, abi.Errorf(abi.EINVAL, "%s: duplicate key", where(kpath))
		}
		v, err := decodeValue(dec, kpath, depth+1)
		if err != nil {
			return nil, err
		}
		obj.keys = append(obj.keys, key)
		obj.vals[key] = v
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, syntaxErr(err)
	}
	return obj, nil
}

func decodeArray(dec *json.Decoder, path string, depth int) (any, error) {
	arr := []any{}
	for dec.More() {
		v, err := decodeValue(dec, pointer(path, strconv.Itoa(len(arr))), depth+1)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, syntaxErr(err)
	}
	return arr, nil
}

func syntaxErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return abi.Errorf(abi.EINVAL, "invalid JSON: unexpected end of input")
	}
	return abi.Errorf(abi.EINVAL, "invalid JSON: %v", err)
}

// checkSurrogates rejects \u escapes that are lone UTF-16 surrogates,
// which encoding/json would turn into U+FFFD. Outside strings valid JSON
// has no backslash, so scanning escapes left to right over the whole
// document is exact; invalid JSON is rejected by the decoder anyway.
func checkSurrogates(data []byte) error {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 < len(data) && data[i+1] != 'u' {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		r, ok := hex4(data, i+2)
		if !ok {
			return nil // malformed escape: the decoder reports it
		}
		i += 5
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return abi.Errorf(abi.EINVAL, "invalid JSON: lone UTF-16 surrogate escape \\u%04x", r)
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(data) || data[i+1] != '\\' || data[i+2] != 'u' {
				return abi.Errorf(abi.EINVAL, "invalid JSON: lone UTF-16 surrogate escape \\u%04x", r)
			}
			lo, ok := hex4(data, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return abi.Errorf(abi.EINVAL, "invalid JSON: lone UTF-16 surrogate escape \\u%04x", r)
			}
			i += 6
		}
	}
	return nil
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[at:at+4]), 16, 16)
	return rune(n), err == nil
}

// pointer appends key to the JSON-pointer-ish path, escaped as RFC 6901
// says and bounded so hostile keys cannot blow up error messages.
func pointer(path, key string) string {
	key = truncate(key, 64)
	key = pointerEscaper.Replace(key)
	if strings.ContainsFunc(key, func(r rune) bool { return !strconv.IsPrint(r) }) {
		q := strconv.Quote(key)
		key = q[1 : len(q)-1]
	}
	return path + "/" + key
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// maxWhere bounds a path in a message; deep hostile paths keep their
// most specific end.
const maxWhere = 256

// where renders a path for a message; the document root is "/".
func where(path string) string {
	if path == "" {
		return "/"
	}
	if len(path) > maxWhere {
		cut := len(path) - maxWhere
		for cut < len(path) && !utf8.RuneStart(path[cut]) {
			cut++
		}
		return "…" + path[cut:]
	}
	return path
}
