package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/t/fake"
)

const testKey = "sk-test-SENTINEL-0123456789abcdef"

// runFake streams one request of scenario (the native model id) through
// driver route against srv and returns the canonical JSONL of the body
// frames, the error and the attempts.
func runFake(t *testing.T, srv *fake.Server, route []string, scenario string, in model.Input, defaults map[string]string) (string, error, []model.Attempt) {
	t.Helper()
	t.Setenv("FAKE_API_KEY", testKey)
	if defaults == nil {
		defaults = map[string]string{}
	}
	if _, ok := defaults[KeyBaseURL]; !ok {
		defaults[KeyBaseURL] = srv.BaseURL(fake.Kind(route[0]))
	}
	id := "fake/" + strings.ReplaceAll(scenario, ":", "-")
	m := &model.Model{Object: tree.Object{Class: abi.ClassModel, Name: id}, ID: id, NativeID: scenario,
		Routes: abi.Routes{abi.RouteDefault: route}, Defaults: defaults, Session: model.SessionNone}
	var buf bytes.Buffer
	tried, err := m.Stream(context.Background(), abi.RouteExec, m.Request(in), func(e abi.Event) error {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("event %+v does not marshal: %v", e, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
		return nil
	})
	return buf.String(), err, tried
}

func hello() model.Input { return model.TextInput("hello") }

// toolInput offers two tools whose canonical names need encoding.
func toolInput() model.Input {
	in := model.TextInput("read the readme")
	in.Tools = []model.ToolSpec{
		{Name: "fs.read", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "fs.list", Description: "list a directory"},
	}
	return in
}

// golden is one expected outcome: the body frames byte for byte and the
// error code (empty for success).
type golden struct {
	scenario string
	in       model.Input
	want     string
	code     abi.Code
}

func checkGolden(t *testing.T, srv *fake.Server, route []string, cases []golden) {
	t.Helper()
	for _, c := range cases {
		in := c.in
		if in.Messages == nil {
			in = hello()
		}
		got, err, _ := runFake(t, srv, route, c.scenario, in, nil)
		want := strings.TrimLeft(c.want, "\n")
		if got != want {
			t.Errorf("%s %s: frames\n got: %s\nwant: %s", route[0], c.scenario, got, want)
		}
		if abi.CodeOf(err) != c.code {
			t.Errorf("%s %s: error %v (code %q), want code %q", route[0], c.scenario, err, abi.CodeOf(err), c.code)
		}
		if err != nil && strings.Contains(err.Error(), testKey[8:20]) {
			t.Errorf("%s %s: error message leaks the key: %v", route[0], c.scenario, err)
		}
	}
}

// lastBody decodes the last request the fake saw.
func lastBody(t *testing.T, srv *fake.Server) map[string]any {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("the fake saw no request")
	}
	var v map[string]any
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &v); err != nil {
		t.Fatalf("request body is not JSON: %v", err)
	}
	return v
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
