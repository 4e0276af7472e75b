package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestRegistry(t *testing.T) {
	want := []struct {
		name string
		caps []string
	}{
		{"fs.read", []string{"read"}},
		{"fs.write", []string{"write"}},
		{"shell.exec", []string{"exec"}},
	}
	all := All()
	if len(all) != len(want) {
		t.Fatalf("All() has %d tools, want %d", len(all), len(want))
	}
	for i, w := range want {
		b := all[i]
		if b.Name != w.name {
			t.Errorf("All()[%d] = %q, want %q (sorted by name)", i, b.Name, w.name)
		}
		if !slices.Equal(b.Caps, w.caps) {
			t.Errorf("%s caps = %q, want %q", b.Name, b.Caps, w.caps)
		}
		if err := abi.ValidName(b.Name); err != nil {
			t.Errorf("%s is not a valid tool file name: %v", b.Name, err)
		}
		if b.Description == "" || strings.ContainsAny(b.Description, "\r\n") {
			t.Errorf("%s description %q is not one line", b.Name, b.Description)
		}
		if b.Run == nil {
			t.Errorf("%s has no Run", b.Name)
		}
		got, ok := Lookup(w.name)
		if !ok || got.Name != w.name {
			t.Errorf("Lookup(%q) = %q, %v", w.name, got.Name, ok)
		}
	}
	for _, name := range []string{"", "fs", "fs.Read", "shell.exec ", "/ctx/tool/fs.read"} {
		if _, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) found a tool", name)
		}
	}
}

func TestLookupReturnsCopies(t *testing.T) {
	b, _ := Lookup("fs.read")
	b.Caps[0] = "root"
	b.Schema[0] = 'X'
	again, _ := Lookup("fs.read")
	if again.Caps[0] != "read" || again.Schema[0] != '{' {
		t.Fatalf("changing a looked-up Builtin changed the registry: %q %q", again.Caps, again.Schema[:1])
	}
	all := All()
	all[0].Caps[0] = "root"
	if All()[0].Caps[0] == "root" {
		t.Fatal("changing All() changed the registry")
	}
}

// TestSchemas checks every .d/schema document: compact JSON with exactly
// input and output, both compiling, and the input rules we promise.
func TestSchemas(t *testing.T) {
	for _, b := range All() {
		t.Run(b.Name, func(t *testing.T) {
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(b.Schema, &doc); err != nil {
				t.Fatalf("schema: %v", err)
			}
			if len(doc) != 2 || doc["input"] == nil || doc["output"] == nil {
				t.Fatalf("schema keys = %v, want input and output", doc)
			}
			if string(InputSchema(b)) != string(doc["input"]) || string(OutputSchema(b)) != string(doc["output"]) {
				t.Error("InputSchema/OutputSchema disagree with the document")
			}
			var compacted bytes.Buffer
			if err := json.Compact(&compacted, b.Schema); err != nil || compacted.String() != string(b.Schema) {
				t.Errorf("schema is not compact JSON")
			}
			for which, s := range doc {
				var m struct {
					Type                 string                     `json:"type"`
					Properties           map[string]json.RawMessage `json:"properties"`
					Required             []string                   `json:"required"`
					AdditionalProperties *bool                      `json:"additionalProperties"`
				}
				if err := json.Unmarshal(s, &m); err != nil {
					t.Fatalf("%s: %v", which, err)
				}
				if m.Type != "object" || m.AdditionalProperties == nil || *m.AdditionalProperties {
					t.Errorf("%s: want type object with additionalProperties false", which)
				}
				for _, r := range m.Required {
					if m.Properties[r] == nil {
						t.Errorf("%s: required %q is not a property", which, r)
					}
				}
				if which == "output" && len(m.Required) != len(m.Properties) {
					t.Errorf("output: every result field is always present, so all must be required")
				}
				if err := Validate(s, json.RawMessage(`{}`)); err != nil && !strings.Contains(err.Error(), "required") {
					t.Errorf("%s does not compile: %v", which, err)
				}
			}
		})
	}
}

func TestInputSchemaMissing(t *testing.T) {
	for _, doc := range []string{``, `[]`, `{"output":{}}`} {
		b := Builtin{Schema: json.RawMessage(doc)}
		if s := InputSchema(b); s != nil {
			t.Errorf("InputSchema(%s) = %s, want nil", doc, s)
		}
		wantErr(t, Validate(InputSchema(b), json.RawMessage(`{}`)), abi.EINVAL, "schema")
	}
}

func TestCallErrors(t *testing.T) {
	tests := []struct {
		name string
		tool string
		args string
		code abi.Code
		msg  string
	}{
		{"unknown tool", "fs.delete", `{}`, abi.ENOENT, `no such built-in tool "fs.delete"`},
		{"unknown tool hostile name", strings.Repeat("x", 1000), `{}`, abi.ENOENT, "no such built-in tool"},
		{"empty args", "fs.read", ``, abi.EINVAL, "fs.read: invalid JSON"},
		{"args not JSON", "fs.read", `path=README`, abi.EINVAL, "invalid JSON"},
		{"args array", "fs.read", `["README"]`, abi.EINVAL, "fs.read: /: want object, got array"},
		{"args string", "shell.exec", `"ls"`, abi.EINVAL, "want object, got string"},
		{"args null", "fs.write", `null`, abi.EINVAL, "want object, got null"},
		{"missing required", "fs.write", `{"path":"x"}`, abi.EINVAL, "fs.write: /content: required"},
		{"unknown key", "fs.read", `{"path":"x","follow":true}`, abi.EINVAL, "/follow: unknown property"},
		{"duplicate key", "shell.exec", `{"cmd":"true","cmd":"rm -rf /"}`, abi.EINVAL, "/cmd: duplicate key"},
		{"wrong type", "fs.read", `{"path":"x","limit":"10"}`, abi.EINVAL, "/limit: want integer, got string"},
		{"negative offset", "fs.read", `{"path":"x","offset":-1}`, abi.EINVAL, "/offset: want >= 0"},
		{"zero limit", "fs.read", `{"path":"x","limit":0}`, abi.EINVAL, "/limit: want >= 1"},
		{"empty path", "fs.read", `{"path":""}`, abi.EINVAL, "/path: want at least 1 characters"},
		{"offset out of int64", "fs.read", `{"path":"x","offset":1e30}`, abi.EINVAL, "not an integer in range"},
		{"timeout too long", "shell.exec", `{"cmd":"true","timeout":3601}`, abi.EINVAL, "/timeout: want <= 3600"},
		{"timeout zero", "shell.exec", `{"cmd":"true","timeout":0}`, abi.EINVAL, "/timeout: want >= 1"},
		{"timeout fraction", "shell.exec", `{"cmd":"true","timeout":1.5}`, abi.EINVAL, "/timeout: want integer"},
		{"empty cmd", "shell.exec", `{"cmd":""}`, abi.EINVAL, "/cmd: want at least 1 characters"},
		{"create_dirs not bool", "fs.write", `{"path":"x","content":"","create_dirs":"yes"}`, abi.EINVAL, "/create_dirs: want boolean"},
		{"null optional", "fs.read", `{"path":"x","offset":null}`, abi.EINVAL, "/offset: want integer, got null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Call(context.Background(), tt.tool, Env{Cwd: t.TempDir()}, json.RawMessage(tt.args))
			if got != nil {
				t.Errorf("Call returned %s with an error", got)
			}
			wantErr(t, err, tt.code, tt.msg)
			if len(err.Error()) > 300 {
				t.Errorf("message of %d bytes", len(err.Error()))
			}
		})
	}
}

// TestRunValidatesItself: the runner may call Run directly after its own
// Validate; Run must be as strict as Call either way.
func TestRunValidatesItself(t *testing.T) {
	for _, b := range All() {
		_, err := b.Run(context.Background(), Env{Cwd: t.TempDir()}, json.RawMessage(`{"unknown":1}`))
		wantErr(t, err, abi.EINVAL, b.Name+": ")
	}
}

func TestCancelledBeforeRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	for name, args := range map[string]string{
		"fs.read":    `{"path":"x"}`,
		"fs.write":   `{"path":"x","content":"y"}`,
		"shell.exec": `{"cmd":"touch ran"}`,
	} {
		_, err := Call(ctx, name, Env{Cwd: dir}, json.RawMessage(args))
		wantErr(t, err, abi.ECANCELED, name)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a cancelled call touched the directory: %v", entries)
	}
}
