package tool

import (
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/cortexfs/cortexfs/core/abi"
)

// schema is a compiled JSON Schema of the subset our tools write: type,
// properties, required, additionalProperties, items, enum, minimum,
// maximum, minLength, maxLength. Other keywords are ignored, as JSON
// Schema asks of unknown ones.
type schema struct {
	reject     bool     // the boolean schema false
	types      []string // empty: any type
	props      map[string]*schema
	required   []string
	additional *schema // nil: extra properties are allowed unchecked
	items      *schema
	enum       []any
	hasEnum    bool
	minimum    *big.Float
	maximum    *big.Float
	minLength  int // -1: absent
	maxLength  int // -1: absent
}

// jsonTypes are the type names of JSON Schema.
var jsonTypes = map[string]bool{"object": true, "array": true, "string": true,
	"number": true, "integer": true, "boolean": true, "null": true}

// compile checks the whole schema up front, so a broken schema fails the
// same way whatever value it is given.
func compile(v any, path string, depth int) (*schema, error) {
	if depth > maxDepth {
		return nil, schemaErr(path, "nested deeper than %d levels", maxDepth)
	}
	s := &schema{minLength: -1, maxLength: -1}
	switch t := v.(type) {
	case bool:
		s.reject = !t
		return s, nil
	case *object:
		for _, k := range t.keys {
			if err := s.keyword(k, t.vals[k], pointer(path, k), depth); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	return nil, schemaErr(path, "want an object or a boolean, got %s", typeName(v))
}

func (s *schema) keyword(k string, v any, path string, depth int) error {
	var err error
	switch k {
	case "type":
		s.types, err = compileTypes(v, path)
	case "properties":
		props, ok := v.(*object)
		if !ok {
			return schemaErr(path, "want an object")
		}
		s.props = make(map[string]*schema, len(props.keys))
		for _, name := range props.keys {
			if s.props[name], err = compile(props.vals[name], pointer(path, name), depth+1); err != nil {
				return err
			}
		}
	case "required":
		s.required, err = compileStrings(v, path)
	case "additionalProperties":
		s.additional, err = compile(v, path, depth+1)
		if err == nil && !s.additional.reject && s.additional.isEmpty() {
			s.additional = nil // true or {}: anything goes
		}
	case "items":
		s.items, err = compile(v, path, depth+1)
	case "enum":
		arr, ok := v.([]any)
		if !ok {
			return schemaErr(path, "want an array")
		}
		s.enum, s.hasEnum = arr, true
	case "minimum", "maximum":
		n, ok := v.(json.Number)
		if !ok {
			return schemaErr(path, "want a number")
		}
		f, ok := bigOf(n)
		if !ok {
			return schemaErr(path, "number out of range")
		}
		if k == "minimum" {
			s.minimum = f
		} else {
			s.maximum = f
		}
	case "minLength", "maxLength":
		n, ok := v.(json.Number)
		i, inRange := int64Of(n)
		if !ok || !inRange || i < 0 || i > 1<<31 {
			return schemaErr(path, "want a non-negative integer")
		}
		if k == "minLength" {
			s.minLength = int(i)
		} else {
			s.maxLength = int(i)
		}
	}
	return err
}

func (s *schema) isEmpty() bool {
	return len(s.types) == 0 && s.props == nil && s.required == nil && s.additional == nil &&
		s.items == nil && !s.hasEnum && s.minimum == nil && s.maximum == nil &&
		s.minLength < 0 && s.maxLength < 0
}

func compileTypes(v any, path string) ([]string, error) {
	if t, ok := v.(string); ok {
		v = []any{t}
	}
	names, err := compileStrings(v, path)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, schemaErr(path, "want at least one type")
	}
	for _, n := range names {
		if !jsonTypes[n] {
			return nil, schemaErr(path, "unknown type %q", truncate(n, 40))
		}
	}
	return names, nil
}

func compileStrings(v any, path string) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, schemaErr(path, "want an array of strings")
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, schemaErr(path, "want an array of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

func schemaErr(path, format string, args ...any) error {
	return abi.Errorf(abi.EINVAL, "schema %s: %s", where(path), fmt.Sprintf(format, args...))
}
