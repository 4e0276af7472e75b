package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// wantErr fails unless err is non-nil, carries the stable code, and its
// message mentions every fragment.
func wantErr(t *testing.T, err error, code abi.Code, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want %s", code)
	}
	if got := abi.CodeOf(err); got != code {
		t.Errorf("CodeOf(%q) = %q, want %q", err, got, code)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

// call runs a built-in through Call, checks that a result matches the
// tool's output schema, and decodes it.
func call(t *testing.T, ctx context.Context, name string, env Env, args string) (map[string]any, error) {
	t.Helper()
	raw, err := Call(ctx, name, env, json.RawMessage(args))
	if err != nil {
		if raw != nil {
			t.Errorf("Call returned %s with error %v", raw, err)
		}
		return nil, err
	}
	b, _ := Lookup(name)
	if err := Validate(OutputSchema(b), raw); err != nil {
		t.Fatalf("result %s does not match the output schema: %v", raw, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return m, nil
}

// mustCall is call for runs that must succeed.
func mustCall(t *testing.T, name string, env Env, args string) map[string]any {
	t.Helper()
	m, err := call(t, context.Background(), name, env, args)
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	return m
}

// jsonArgs marshals a Go map into tool arguments.
func jsonArgs(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
