package tool

import (
	"encoding/json"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// fuzzSchemas are the schemas FuzzValidate picks from: the built-ins' own
// input and output schemas, then every keyword of the subset.
var fuzzSchemas = []string{
	string(fsReadInput.JSON()), string(fsWriteInput.JSON()), string(shellExecInput.JSON()),
	string(fsReadOutput.JSON()), string(fsWriteOutput.JSON()), string(shellExecOutput.JSON()),
	`{}`,
	`true`,
	`false`,
	`{"type":["string","null"],"minLength":1,"maxLength":3}`,
	`{"type":"array","items":{"type":"integer","minimum":-5,"maximum":5}}`,
	`{"enum":[1,"a",null,true,[1],{"k":"v"}]}`,
	`{"type":"object","additionalProperties":{"type":"number","maximum":1e300}}`,
	`{"properties":{"a":{"properties":{"b":{"items":{"enum":[0.5]}}}}},"required":["a"]}`,
}

// argsFor maps the built-ins' input schemas to their argument structs, so
// the fuzzer also checks that what validates decodes (or is EINVAL).
var argsFor = map[int]func() any{
	0: func() any { return new(fsReadArgs) },
	1: func() any { return new(fsWriteArgs) },
	2: func() any { return new(shellExecArgs) },
}

// FuzzValidate: Validate never panics, only ever says nil or EINVAL, is
// deterministic, never accepts what encoding/json calls invalid, and keeps
// its messages bounded. Seeds are also in testdata/fuzz/FuzzValidate.
func FuzzValidate(f *testing.F) {
	for _, s := range []struct {
		schema uint8
		value  string
	}{
		{0, `{"path":"README.md"}`},
		{0, `{"path":"a","offset":1e2,"limit":1.0}`},
		{0, `{"path":"a","path":"b"}`},
		{1, `{"path":"f","content":"\ud83d\ude00","mode":"0644","create_dirs":true}`},
		{2, `{"cmd":"ls","timeout":3600,"stdin":"","cwd":"/"}`},
		{2, `{"cmd":"ls","timeout":1e400}`},
		{5, `{"exit_code":-1,"stdout":"","stderr":"","truncated":false,"timed_out":true,"duration_ms":1000}`},
		{9, `"\ud800"`},
		{10, `[1,-5,5,6]`},
		{11, `{"k":"v"}`},
		{13, `{"a":{"b":[0.5,5e-1,0.50]}}`},
		{6, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`},
	} {
		f.Add(s.schema, []byte(s.value))
	}
	f.Fuzz(func(t *testing.T, pick uint8, value []byte) {
		i := int(pick) % len(fuzzSchemas)
		schema := json.RawMessage(fuzzSchemas[i])
		err := Validate(schema, value)
		if err != nil {
			if code := abi.CodeOf(err); code != abi.EINVAL {
				t.Fatalf("Validate(%s, %q) = %v with code %s, want EINVAL", schema, value, err, code)
			}
			if n := len(err.Error()); n == 0 || n > 1024 {
				t.Fatalf("message of %d bytes: %q", n, err)
			}
		}
		if again := Validate(schema, value); (again == nil) != (err == nil) || (err != nil && again.Error() != err.Error()) {
			t.Fatalf("Validate is not deterministic: %v, then %v", err, again)
		}
		if err != nil {
			return
		}
		if !json.Valid(value) {
			t.Fatalf("Validate accepted invalid JSON %q", value)
		}
		if newArgs := argsFor[i]; newArgs != nil {
			if derr := decodeArgs(schema, value, newArgs()); derr != nil && abi.CodeOf(derr) != abi.EINVAL {
				t.Fatalf("decodeArgs(%q) = %v, want nil or EINVAL", value, derr)
			}
		}
	})
}

// FuzzParseEffects: .d/effects parsing never panics, fails with EINVAL
// only, and what it accepts has only known values and round-trips.
func FuzzParseEffects(f *testing.F) {
	f.Add([]byte(`[{"kind":"delete_file","target":"/tmp","reversibility":"irreversible","confirmation":"always","dry_run":"required_before_execute"}]`))
	f.Add([]byte(`[{"kind":"read_file"}]`))
	f.Add([]byte(`[{"kind":"x","kind":"read_file"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := ParseEffects(b)
		if err != nil {
			if abi.CodeOf(err) != abi.EINVAL {
				t.Fatalf("code %s: %v", abi.CodeOf(err), err)
			}
			return
		}
		again, err := ParseEffects(FormatEffects(es))
		if err != nil || len(again) != len(es) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range es {
			if again[i] != es[i] {
				t.Fatalf("round trip changed %+v to %+v", es[i], again[i])
			}
		}
	})
}

// FuzzValidateExternal: the full JSON Schema validator used for external
// tools never panics and only ever says nil or EINVAL.
func FuzzValidateExternal(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`), []byte(`{"message":"hi"}`))
	f.Add([]byte(`{"$defs":{"a":{"type":"integer"}},"type":"object","properties":{"n":{"$ref":"#/$defs/a"}}}`), []byte(`{"n":1.5}`))
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		if err := ValidateExternal(schema, args); err != nil && abi.CodeOf(err) != abi.EINVAL {
			t.Fatalf("code %s: %v", abi.CodeOf(err), err)
		}
	})
}
