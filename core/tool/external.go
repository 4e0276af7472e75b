package tool

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/cortexfs/cortexfs/core/abi"
)

// External tools (MCP servers, plugins) bring schemas written by anyone in
// full JSON Schema, draft-07 or 2020-12: $ref, anyOf, pattern, const…
// The built-in subset validator would ignore what it does not know and let
// the input through, so their input is checked by a complete validator
// instead (github.com/google/jsonschema-go, the one the MCP SDK uses), after
// the same strict decoding as built-in input.

// StrictJSON checks that data is exactly one JSON value with no duplicate
// keys, lone surrogates, invalid UTF-8, excessive nesting or trailing data.
func StrictJSON(data []byte) error {
	_, err := decodeStrict(data)
	return err
}

// CompileExternal parses and resolves a tool's input schema. Remote $refs
// are refused (nothing is fetched); an unsupported $schema version is EINVAL.
func CompileExternal(schema json.RawMessage) (*jsonschema.Resolved, error) {
	if err := StrictJSON(schema); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "schema: %v", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "schema: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "schema: %v", err)
	}
	return rs, nil
}

// CompileInput is CompileExternal for an input schema: tool input is a
// JSON object, so a schema whose top-level type says otherwise (or names
// no JSON type at all) is EINVAL.
func CompileInput(schema json.RawMessage) (*jsonschema.Resolved, error) {
	rs, err := CompileExternal(schema)
	if err != nil {
		return nil, err
	}
	s := rs.Schema()
	types := s.Types
	if s.Type != "" {
		types = append(types, s.Type)
	}
	if len(types) > 0 && !slices.Contains(types, "object") {
		return nil, abi.Errorf(abi.EINVAL, "schema: an input schema must describe an object, not %v", types)
	}
	return rs, nil
}

// ValidateExternal checks args (a JSON object) against an external tool's
// input schema. Any mismatch, and any schema that cannot be understood, is
// EINVAL: input that was not validated never reaches the tool.
func ValidateExternal(schema, args json.RawMessage) error {
	rs, err := CompileInput(schema)
	if err != nil {
		return err
	}
	return ValidateResolved(rs, args)
}

// ValidateResolved is ValidateExternal with the schema already compiled.
func ValidateResolved(rs *jsonschema.Resolved, args json.RawMessage) error {
	if err := StrictJSON(args); err != nil {
		return err
	}
	if t := bytes.TrimSpace(args); len(t) == 0 || t[0] != '{' {
		return abi.Errorf(abi.EINVAL, "input must be a JSON object")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	if err := dec.Decode(&v); err != nil {
		return abi.Errorf(abi.EINVAL, "invalid JSON: %v", err)
	}
	if err := rs.Validate(v); err != nil {
		return abi.Errorf(abi.EINVAL, "input does not match the tool's schema: %s", truncate(tidy(err.Error()), 400))
	}
	return nil
}

// tidy shortens the validator's nested "validating root: validating
// /properties/a: validating /properties/a/properties/b: type: …" to the
// innermost place and the reason: "/properties/a/properties/b: type: …".
func tidy(s string) string {
	if i := strings.LastIndex(s, "validating "); i >= 0 {
		s = s[i+len("validating "):]
	}
	return strings.TrimPrefix(s, "root: ")
}
