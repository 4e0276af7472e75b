package tool

import (
	"encoding/json"
	"testing"
)

// Every built-in schema (input and output) is valid and compiles; a bad
// literal would otherwise only surface when a caller validates against it.
func TestBuiltinSchemasCompile(t *testing.T) {
	all := All()
	// The agent.* tools are registered only when an agent runtime links in;
	// their schemas are checked here all the same.
	for _, in := range []json.RawMessage{agentNameInput.JSON(), agentCreateInput.JSON()} {
		all = append(all, Builtin{Name: "agent.*", Schema: mustSchema(in, agentOutput.JSON())})
	}
	if len(all) < 5 {
		t.Fatal("no built-in tools registered")
	}
	for _, b := range all {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b.Schema, &doc); err != nil {
			t.Fatalf("%s: schema document: %v", b.Name, err)
		}
		for _, part := range []string{"input", "output"} {
			v, err := decodeStrict(doc[part])
			if err == nil {
				_, err = compile(v, "", 0)
			}
			if err != nil {
				t.Errorf("%s: %s schema does not compile: %v", b.Name, part, err)
			}
		}
	}
}
