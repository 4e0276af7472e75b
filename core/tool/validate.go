package tool

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Validate checks value against schema. Both must be strict JSON (see
// decodeStrict): invalid JSON, duplicate keys, lone surrogates, nesting
// deeper than 64 and trailing data are EINVAL. A value that does not match
// is EINVAL naming the first offending place as a JSON pointer, e.g.
// "/path: required" or "/limit: want integer, got string". A broken schema
// is EINVAL starting with "schema". Only the first problem is reported.
func Validate(schema, value json.RawMessage) error {
	sv, err := decodeStrict(schema)
	if err != nil {
		return abi.Errorf(abi.EINVAL, "schema: %w", err)
	}
	s, err := compile(sv, "", 0)
	if err != nil {
		return err
	}
	v, err := decodeStrict(value)
	if err != nil {
		return err
	}
	return s.check(v, "")
}

// check walks value and schema together; decodeStrict already bounded the
// depth of v, which bounds this recursion.
func (s *schema) check(v any, path string) error {
	if s.reject {
		return abi.Errorf(abi.EINVAL, "%s: not allowed", where(path))
	}
	if len(s.types) > 0 && !s.typeMatches(v) {
		return abi.Errorf(abi.EINVAL, "%s: want %s, got %s", where(path), strings.Join(s.types, " or "), typeName(v))
	}
	if s.hasEnum && !inEnum(s.enum, v) {
		return abi.Errorf(abi.EINVAL, "%s: not one of the allowed values %s", where(path), enumText(s.enum))
	}
	switch t := v.(type) {
	case json.Number:
		return s.checkNumber(t, path)
	case string:
		n := utf8.RuneCountInString(t)
		if s.minLength >= 0 && n < s.minLength {
			return abi.Errorf(abi.EINVAL, "%s: want at least %d characters, got %d", where(path), s.minLength, n)
		}
		if s.maxLength >= 0 && n > s.maxLength {
			return abi.Errorf(abi.EINVAL, "%s: want at most %d characters, got %d", where(path), s.maxLength, n)
		}
	case *object:
		return s.checkObject(t, path)
	case []any:
		if s.items != nil {
			for i, e := range t {
				if err := s.items.check(e, pointer(path, strconv.Itoa(i))); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (s *schema) checkNumber(n json.Number, path string) error {
	if s.minimum == nil && s.maximum == nil {
		return nil
	}
	f, ok := bigOf(n)
	if !ok {
		return abi.Errorf(abi.EINVAL, "%s: number out of range", where(path))
	}
	if s.minimum != nil && f.Cmp(s.minimum) < 0 {
		return abi.Errorf(abi.EINVAL, "%s: want >= %s, got %s", where(path), s.minimum.Text('g', -1), truncate(string(n), 40))
	}
	if s.maximum != nil && f.Cmp(s.maximum) > 0 {
		return abi.Errorf(abi.EINVAL, "%s: want <= %s, got %s", where(path), s.maximum.Text('g', -1), truncate(string(n), 40))
	}
	return nil
}

// checkObject reports missing required keys first (the commonest mistake
// of a model), then the properties in document order.
func (s *schema) checkObject(o *object, path string) error {
	for _, k := range s.required {
		if _, ok := o.vals[k]; !ok {
			return abi.Errorf(abi.EINVAL, "%s: required", where(pointer(path, k)))
		}
	}
	for _, k := range o.keys {
		sub, known := s.props[k]
		switch {
		case known:
		case s.additional == nil:
			continue
		case s.additional.reject:
			return abi.Errorf(abi.EINVAL, "%s: unknown property", where(pointer(path, k)))
		default:
			sub = s.additional
		}
		if err := sub.check(o.vals[k], pointer(path, k)); err != nil {
			return err
		}
	}
	return nil
}

func (s *schema) typeMatches(v any) bool {
	for _, t := range s.types {
		switch v := v.(type) {
		case nil:
			if t == "null" {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case json.Number:
			if t == "number" || t == "integer" && isIntegral(v) {
				return true
			}
		case *object:
			if t == "object" {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		}
	}
	return false
}

// typeName names the JSON type of a decoded value for messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case *object:
		return "object"
	case []any:
		return "array"
	}
	return "unknown"
}

func inEnum(enum []any, v any) bool {
	for _, e := range enum {
		if jsonEqual(e, v) {
			return true
		}
	}
	return false
}

// jsonEqual is JSON Schema equality: numbers by value (1 == 1.0), objects
// regardless of key order.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		fa, okA := bigOf(a)
		fb, okB := bigOf(b)
		return okA && okB && fa.Cmp(fb) == 0
	case *object:
		b, ok := b.(*object)
		if !ok || len(a.keys) != len(b.keys) {
			return false
		}
		for k, va := range a.vals {
			vb, ok := b.vals[k]
			if !ok || !jsonEqual(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return a == b // nil, bool, string
}

// enumText lists the allowed values compactly and bounded.
func enumText(enum []any) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range enum {
		if i > 0 {
			b.WriteByte(',')
		}
		if b.Len() > 200 {
			b.WriteString("…")
			break
		}
		switch e := e.(type) {
		case string:
			js, _ := json.Marshal(truncate(e, 40))
			b.Write(js)
		case json.Number:
			b.WriteString(truncate(string(e), 40))
		case nil:
			b.WriteString("null")
		case bool:
			if e {
				b.WriteString("true")
			} else {
				b.WriteString("false")
			}
		default:
			b.WriteString(typeName(e))
		}
	}
	b.WriteByte(']')
	return b.String()
}
