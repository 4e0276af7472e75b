package tool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestValidate(t *testing.T) {
	const obj = `{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false}`
	tests := []struct {
		name   string
		schema string
		value  string
		msg    string // "" means valid
	}{
		// type
		{"object ok", `{"type":"object"}`, `{}`, ""},
		{"object got array", `{"type":"object"}`, `[]`, "/: want object, got array"},
		{"string ok", `{"type":"string"}`, `"x"`, ""},
		{"string got number", `{"type":"string"}`, `1`, "/: want string, got number"},
		{"integer ok", `{"type":"integer"}`, `42`, ""},
		{"integer negative", `{"type":"integer"}`, `-7`, ""},
		{"integer 1.0", `{"type":"integer"}`, `1.0`, ""},
		{"integer 1e2", `{"type":"integer"}`, `1e2`, ""},
		{"integer 1.5e1", `{"type":"integer"}`, `1.5e1`, ""},
		{"integer 1.5", `{"type":"integer"}`, `1.5`, "want integer, got number"},
		{"integer 1e-400", `{"type":"integer"}`, `1e-400`, "want integer"},
		{"integer 15e-1", `{"type":"integer"}`, `15e-1`, "want integer"},
		{"integer huge", `{"type":"integer"}`, `1e400`, ""},
		{"integer got string", `{"type":"integer"}`, `"1"`, "want integer, got string"},
		{"number ok", `{"type":"number"}`, `1.5`, ""},
		{"number accepts integer", `{"type":"number"}`, `3`, ""},
		{"number got bool", `{"type":"number"}`, `true`, "want number, got boolean"},
		{"boolean ok", `{"type":"boolean"}`, `false`, ""},
		{"boolean got null", `{"type":"boolean"}`, `null`, "want boolean, got null"},
		{"array ok", `{"type":"array"}`, `[1,"a"]`, ""},
		{"array got object", `{"type":"array"}`, `{}`, "want array, got object"},
		{"null ok", `{"type":"null"}`, `null`, ""},
		{"null got string", `{"type":"null"}`, `""`, "want null, got string"},
		{"type list ok", `{"type":["string","null"]}`, `null`, ""},
		{"type list miss", `{"type":["string","null"]}`, `1`, "want string or null, got number"},
		{"no type accepts all", `{}`, `[{"a":null}]`, ""},
		{"true schema", `true`, `1`, ""},
		{"false schema", `false`, `1`, "/: not allowed"},

		// properties, required, additionalProperties
		{"object ok full", obj, `{"path":"a","limit":3}`, ""},
		{"required", obj, `{"limit":3}`, "/path: required"},
		{"property type", obj, `{"path":"a","limit":"3"}`, "/limit: want integer, got string"},
		{"property minimum", obj, `{"path":"a","limit":0}`, "/limit: want >= 1, got 0"},
		{"unknown property", obj, `{"path":"a","extra":1}`, "/extra: unknown property"},
		{"wrong case is unknown", obj, `{"path":"a","Limit":1}`, "/Limit: unknown property"},
		{"additional allowed by default", `{"properties":{"a":{"type":"string"}}}`, `{"b":1}`, ""},
		{"additional true", `{"additionalProperties":true}`, `{"b":1}`, ""},
		{"additional schema ok", `{"additionalProperties":{"type":"integer"}}`, `{"b":1}`, ""},
		{"additional schema miss", `{"additionalProperties":{"type":"integer"}}`, `{"b":"x"}`, "/b: want integer, got string"},
		{"properties ignore non-objects", `{"properties":{"a":{"type":"string"}},"required":["a"]}`, `"str"`, ""},
		{"nested path", `{"properties":{"a":{"properties":{"b":{"type":"string"}}}}}`, `{"a":{"b":1}}`, "/a/b: want string"},
		{"pointer escapes", `{"additionalProperties":false}`, `{"a/b~c":1}`, "/a~1b~0c: unknown property"},
		{"key with newline is quoted", `{"additionalProperties":false}`, `{"a\nb":1}`, `/a\nb: unknown property`},
		{"first error in document order", obj, `{"path":"a","x":1,"y":2}`, "/x: unknown property"},

		// items
		{"items ok", `{"items":{"type":"string"}}`, `["a","b"]`, ""},
		{"items miss", `{"items":{"type":"string"}}`, `["a",2]`, "/1: want string, got number"},
		{"items nested", `{"items":{"items":{"type":"null"}}}`, `[[null],[null,0]]`, "/1/1: want null"},

		// enum
		{"enum ok", `{"enum":["a","b"]}`, `"b"`, ""},
		{"enum miss", `{"enum":["a","b"]}`, `"c"`, `/: not one of the allowed values ["a","b"]`},
		{"enum number by value", `{"enum":[1,2]}`, `1.0`, ""},
		{"enum number miss", `{"enum":[1,2]}`, `3`, "not one of the allowed values [1,2]"},
		{"enum mixed", `{"enum":[null,true,"x"]}`, `true`, ""},
		{"enum type matters", `{"enum":["1"]}`, `1`, "not one of"},
		{"enum object any key order", `{"enum":[{"a":1,"b":[2]}]}`, `{"b":[2],"a":1}`, ""},
		{"enum object miss", `{"enum":[{"a":1}]}`, `{"a":1,"b":2}`, "not one of"},
		{"enum array miss", `{"enum":[[1,2]]}`, `[2,1]`, "not one of"},

		// minimum, maximum
		{"minimum equal", `{"minimum":0}`, `0`, ""},
		{"minimum below", `{"minimum":0}`, `-1`, "/: want >= 0, got -1"},
		{"minimum fraction", `{"minimum":0.5}`, `0.25`, "want >= 0.5"},
		{"maximum equal", `{"maximum":3600}`, `3600`, ""},
		{"maximum above", `{"maximum":3600}`, `3601`, "/: want <= 3600, got 3601"},
		{"maximum huge", `{"maximum":3600}`, `1e400`, "want <= 3600"},
		{"maximum exponent overflow", `{"maximum":3600}`, `1e99999999999999999999`, "/: "},
		{"minimum ignores strings", `{"minimum":5}`, `"1"`, ""},

		// minLength, maxLength (characters, not bytes)
		{"minLength ok", `{"minLength":1}`, `"a"`, ""},
		{"minLength empty", `{"minLength":1}`, `""`, "/: want at least 1 characters, got 0"},
		{"maxLength ok runes", `{"maxLength":2}`, `"é€"`, ""},
		{"maxLength over", `{"maxLength":2}`, `"abc"`, "/: want at most 2 characters, got 3"},
		{"length ignores numbers", `{"maxLength":1}`, `12345`, ""},

		// unknown keywords are ignored
		{"unknown keywords", `{"description":"x","pattern":"^a$","format":"uri","$schema":"x"}`, `"b"`, ""},

		// strict JSON in the value
		{"empty value", `{}`, ``, "invalid JSON: unexpected end of input"},
		{"not JSON", `{}`, `{path:1}`, "invalid JSON"},
		{"truncated", `{}`, `{"a":`, "invalid JSON"},
		{"trailing data", `{}`, `{} {}`, "data after the top-level value"},
		{"trailing garbage", `{}`, `{}x`, "invalid JSON"},
		{"duplicate key", obj, `{"path":"a","path":"b"}`, "/path: duplicate key"},
		{"nested duplicate key", `{}`, `{"a":[{"k":1,"k":1}]}`, "/a/0/k: duplicate key"},
		{"invalid UTF-8", `{}`, "\"\xff\"", "not valid UTF-8"},
		{"lone high surrogate", `{}`, `"\ud800"`, "lone UTF-16 surrogate"},
		{"lone low surrogate", `{}`, `"\udc00x"`, "lone UTF-16 surrogate"},
		{"high surrogate then other escape", `{}`, `"\ud800\n"`, "lone UTF-16 surrogate"},
		{"surrogate in key", `{}`, `{"\udfff":1}`, "lone UTF-16 surrogate"},
		{"surrogate pair ok", `{"maxLength":1}`, `"\ud83d\ude00"`, ""},
		{"escaped backslash u is text", `{}`, `"\\ud800"`, ""},
		{"long number", `{}`, strings.Repeat("1", maxNumberLen+1), "number longer than"},
		{"deep nesting", `{}`, strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), "nested deeper than 64"},
		{"nesting at limit", `{}`, strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), ""},

		// broken schemas
		{"schema not JSON", `{`, `1`, "schema: invalid JSON"},
		{"schema not object", `[]`, `1`, "schema /: want an object or a boolean, got array"},
		{"schema unknown type", `{"type":"float"}`, `1`, `schema /type: unknown type "float"`},
		{"schema empty type list", `{"type":[]}`, `1`, "schema /type: want at least one type"},
		{"schema type not string", `{"type":1}`, `1`, "schema /type: want an array of strings"},
		{"schema properties not object", `{"properties":[]}`, `1`, "schema /properties: want an object"},
		{"schema nested broken", `{"properties":{"a":{"type":"x"}}}`, `{}`, "schema /properties/a/type: unknown type"},
		{"schema required not strings", `{"required":[1]}`, `{}`, "schema /required: want an array of strings"},
		{"schema enum not array", `{"enum":"a"}`, `"a"`, "schema /enum: want an array"},
		{"schema minimum not number", `{"minimum":"1"}`, `1`, "schema /minimum: want a number"},
		{"schema minLength negative", `{"minLength":-1}`, `""`, "schema /minLength: want a non-negative integer"},
		{"schema maxLength fraction", `{"maxLength":1.5}`, `""`, "schema /maxLength: want a non-negative integer"},
		{"schema items array form", `{"items":[{}]}`, `[]`, "schema /items: want an object or a boolean"},
		{"schema additional not schema", `{"additionalProperties":1}`, `{}`, "schema /additionalProperties: want an object or a boolean"},
		{"schema duplicate key", `{"type":"string","type":"integer"}`, `1`, "schema: /type: duplicate key"},
		{"schema checked before value", `{"type":"x"}`, `not json`, "schema /type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(json.RawMessage(tt.schema), json.RawMessage(tt.value))
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("Validate(%s, %s) = %v, want nil", tt.schema, tt.value, err)
				}
				return
			}
			wantErr(t, err, abi.EINVAL, tt.msg)
		})
	}
}

func TestValidateHostileMessagesBounded(t *testing.T) {
	long := strings.Repeat("k", 10000)
	err := Validate(json.RawMessage(`{"additionalProperties":false}`), json.RawMessage(`{"`+long+`":1}`))
	wantErr(t, err, abi.EINVAL, "unknown property")
	if len(err.Error()) > 200 {
		t.Errorf("message of %d bytes for a hostile key", len(err.Error()))
	}
}

func TestIntegerParts(t *testing.T) {
	tests := []struct {
		in    string
		ok    bool
		int64 int64
		fits  bool
	}{
		{"0", true, 0, true},
		{"-0", true, 0, true},
		{"0.0e-999", true, 0, true},
		{"7", true, 7, true},
		{"-7", true, -7, true},
		{"1.0", true, 1, true},
		{"1e2", true, 100, true},
		{"1E+2", true, 100, true},
		{"1.25e2", true, 125, true},
		{"1500e-3", false, 0, false},
		{"15e-1", false, 0, false},
		{"1200e-2", true, 12, true},
		{"0.5", false, 0, false},
		{"9223372036854775807", true, 9223372036854775807, true},
		{"-9223372036854775808", true, -9223372036854775808, true},
		{"9223372036854775808", true, 0, false},
		{"1e19", true, 0, false},
		{"1e99999999999999999999", true, 0, false},
		{"1e-99999999999999999999", false, 0, false},
	}
	for _, tt := range tests {
		if got := isIntegral(json.Number(tt.in)); got != tt.ok {
			t.Errorf("isIntegral(%s) = %v, want %v", tt.in, got, tt.ok)
		}
		got, fits := int64Of(json.Number(tt.in))
		if fits != tt.fits || got != tt.int64 {
			t.Errorf("int64Of(%s) = %d, %v; want %d, %v", tt.in, got, fits, tt.int64, tt.fits)
		}
	}
}
