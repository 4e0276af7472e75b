package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Builtin is one built-in tool: the data `ctx init` writes into
// /ctx/tool/<Name>.d/ and the function the object runner calls.
type Builtin struct {
	Name        string // "fs.read": the /ctx/tool file name and .d/name
	Description string // one line for .d/description and for models

	// Schema is the .d/schema document, compact JSON:
	// {"input": <JSON Schema>, "output": <JSON Schema>}. It describes the
	// tool; it grants nothing.
	Schema json.RawMessage

	// Caps are the .d/cap words ("read", "write", "exec"), one per line in
	// the file. Tool caps are descriptive only and grant nothing: execution
	// is decided by mode bits, uid/gid and policy v0 (`tool:<name> execute`).
	// They are not model capabilities, so abi.ParseCaps does not apply.
	Caps []string

	// Run executes the tool with the caller's own rights. args must be a
	// JSON object; Run validates it against the input schema itself, so a
	// direct Run is as strict as Call. The result is a compact JSON object
	// matching the output schema. Errors carry stable abi codes.
	Run func(ctx context.Context, env Env, args json.RawMessage) (json.RawMessage, error)
}

// builtins is the registry, keyed by name. It is built on first use, not
// before main: every applet links this package, few call a tool.
var builtins = sync.OnceValue(func() map[string]Builtin {
	m := register(fsRead(), fsWrite(), shellExec())
	agentOpsMu.RLock()
	defer agentOpsMu.RUnlock()
	if agentOps != nil {
		addAgentTools(m)
	}
	return m
})

// register builds the registry and panics on a duplicate name, which can
// only be a programming error.
func register(bs ...Builtin) map[string]Builtin {
	m := make(map[string]Builtin, len(bs))
	for _, b := range bs {
		if _, dup := m[b.Name]; dup {
			panic("tool: duplicate built-in " + b.Name)
		}
		m[b.Name] = b
	}
	return m
}

// Lookup returns the built-in tool called name. The returned value is a
// copy: changing its slices does not change the registry.
func Lookup(name string) (Builtin, bool) {
	b, ok := builtins()[name]
	if !ok {
		return Builtin{}, false
	}
	return clone(b), true
}

// All returns every built-in tool, sorted by name.
func All() []Builtin {
	out := make([]Builtin, 0, len(builtins()))
	for _, b := range builtins() {
		out = append(out, clone(b))
	}
	slices.SortFunc(out, func(a, b Builtin) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func clone(b Builtin) Builtin {
	b.Schema = bytes.Clone(b.Schema)
	b.Caps = slices.Clone(b.Caps)
	return b
}

// InputSchema returns the "input" member of b.Schema, or nil if there is
// none (Validate then fails with EINVAL).
func InputSchema(b Builtin) json.RawMessage { return schemaMember(b.Schema, "input") }

// OutputSchema returns the "output" member of b.Schema, or nil.
func OutputSchema(b Builtin) json.RawMessage { return schemaMember(b.Schema, "output") }

func schemaMember(doc json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return nil
	}
	return m[key]
}

// Call runs the built-in tool called name: Lookup, Validate against its
// input schema, Run. An unknown tool is ENOENT; invalid arguments are
// EINVAL. Policy is not checked here; it sits in front of Call.
func Call(ctx context.Context, name string, env Env, args json.RawMessage) (json.RawMessage, error) {
	b, ok := builtins()[name]
	if !ok {
		return nil, abi.Errorf(abi.ENOENT, "no such built-in tool %q", truncate(name, 64))
	}
	if err := Validate(InputSchema(b), args); err != nil {
		return nil, toolErr(name, err)
	}
	return b.Run(ctx, env, args)
}

// toolErr prefixes err with the tool name and keeps its stable code.
func toolErr(name string, err error) error {
	return abi.Errorf(abi.CodeOf(err), "%s: %w", name, err)
}

// ctxErr is the error of a run stopped by its context: ECANCELED for a
// cancel, ETIMEDOUT for the caller's own deadline.
func ctxErr(ctx context.Context, name string) error {
	return abi.Errorf(abi.CodeOf(ctx.Err()), "%s: %w", name, ctx.Err())
}

// truncate bounds hostile strings quoted in error messages, cutting at a
// rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
