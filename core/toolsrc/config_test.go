package toolsrc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestProjectedName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		prefix, source, tool string
		want                 string
		code                 abi.Code
	}{
		{PrefixMCP, "everything", "echo", "mcp.everything.echo", ""},
		{PrefixMCP, "everything", "get-sum", "mcp.everything.get-sum", ""},
		{PrefixPlugin, "native-hello", "word_count", "plugin.native-hello.word_count", ""},
		{PrefixMCP, "gh", "search/issues", "mcp.gh.search-issues", ""},
		{PrefixMCP, "gh", "repo:list files", "mcp.gh.repo-list-files", ""},
		{PrefixMCP, "gh", "github.search", "mcp.gh.github.search", ""},
		{PrefixMCP, "s", "conf.d", "mcp.s.conf-d", ""},
		{PrefixMCP, "s", "x.sock", "mcp.s.x-sock", ""},
		{PrefixMCP, "s", "naïve", "mcp.s.na-ve", ""},
		{PrefixMCP, "s", "_private", "mcp.s._private", ""},
		{PrefixMCP, "s", long, "mcp.s." + strings.Repeat("x", 51) + "-", ""}, // + hash, checked below
		{PrefixMCP, "s", "", "", abi.EINVAL},
		{PrefixMCP, "bad.name", "t", "", abi.EINVAL},
		{PrefixMCP, "", "t", "", abi.EINVAL},
		{PrefixMCP, "-x", "t", "", abi.EINVAL},
		{PrefixMCP, "s", strings.Repeat("y", MaxOriginalName+1), "", abi.EINVAL},
	}
	for _, tt := range tests {
		got, err := ProjectedName(tt.prefix, tt.source, tt.tool)
		if abi.CodeOf(err) != tt.code {
			t.Errorf("ProjectedName(%q, %q) error %v, want %q", tt.source, tt.tool, err, tt.code)
			continue
		}
		if err != nil {
			continue
		}
		if abi.ValidName(got) != nil {
			t.Errorf("ProjectedName(%q, %q) = %q is not a valid name", tt.source, tt.tool, got)
		}
		if !strings.HasPrefix(got, tt.want) || (len(tt.tool) < 50 && got != tt.want) {
			t.Errorf("ProjectedName(%q, %q) = %q, want %q", tt.source, tt.tool, got, tt.want)
		}
	}
	// Long names stay distinct after truncation.
	a, _ := ProjectedName(PrefixMCP, "s", long+"a")
	b, _ := ProjectedName(PrefixMCP, "s", long+"b")
	if a == b || len(a) != abi.MaxNameLen {
		t.Errorf("truncated names %q and %q", a, b)
	}
}

func TestParseMCPConfig(t *testing.T) {
	cfg, err := ParseMCPConfig([]byte(`{"mcpServers":{
		"everything":{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"],"env":{"TOKEN":"secret-1"}},
		"remote":{"type":"http","url":"https://example.net/mcp","headers":{"Authorization":"Bearer secret-2"}},
		"implicit":{"url":"http://127.0.0.1:3001/mcp"},
		"bad.name":{"command":"x"},
		"nocmd":{"args":["x"]},
		"both":{"command":"x","url":"http://h/"},
		"sse":{"type":"sse","url":"http://h/sse"},
		"relcwd":{"command":"x","cwd":"rel"},
		"typo":{"command":"x","evn":{"A":"b"}}
	},"other":"kept"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]abi.Code{"everything": "", "remote": "", "implicit": "", "bad.name": abi.EINVAL, "nocmd": abi.EINVAL,
		"both": abi.EINVAL, "sse": abi.ENOTSUP, "relcwd": abi.EINVAL, "typo": ""}
	if len(cfg.Servers) != len(want) {
		t.Fatalf("%d servers, want %d", len(cfg.Servers), len(want))
	}
	for _, s := range cfg.Servers {
		if abi.CodeOf(s.Err) != want[s.Name] {
			t.Errorf("server %s: err %v, want %q", s.Name, s.Err, want[s.Name])
		}
		switch s.Name {
		case "implicit":
			if s.Transport != TransportHTTP {
				t.Errorf("implicit: transport %q", s.Transport)
			}
		case "typo":
			if len(s.Unknown) != 1 || s.Unknown[0] != "evn" {
				t.Errorf("typo: unknown keys %v", s.Unknown)
			}
		case "everything":
			if s.Transport != TransportStdio || s.EnvKeys()[0] != "TOKEN" {
				t.Errorf("everything: %+v", s)
			}
			b, _ := json.Marshal(s)
			if strings.Contains(string(b), "secret-1") {
				t.Errorf("a server config marshals its env values: %s", b)
			}
		}
	}
	for _, bad := range []string{
		`{"mcpServers":{"a":{"command":"x"},"a":{"command":"y"}}}`, // duplicate key: which one runs?
		`{"mcpServers":[]}`,
		`[1]`,
		`{"mcpServers":{"a":{"command":"x"}}} trailing`,
	} {
		if _, err := ParseMCPConfig([]byte(bad)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("ParseMCPConfig(%s) = %v, want EINVAL", bad, err)
		}
	}
}

func TestAddRemoveServer(t *testing.T) {
	b, err := AddServer(nil, ServerConfig{Name: "a", Command: "cmd", Args: []string{"-y"}, Env: map[string]string{"K": "v"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err = AddServer(b, ServerConfig{Name: "b", Transport: TransportHTTP, URL: "http://h/mcp"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddServer(b, ServerConfig{Name: "a", Command: "other"}, false); abi.CodeOf(err) != abi.EEXIST {
		t.Errorf("adding an existing name: %v, want EEXIST", err)
	}
	if _, err := AddServer(b, ServerConfig{Name: "c"}, false); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("adding a server without command: %v, want EINVAL", err)
	}
	cfg, err := ParseMCPConfig(b)
	if err != nil || len(cfg.Servers) != 2 || cfg.Servers[0].Env["K"] != "v" || cfg.Servers[1].URL != "http://h/mcp" {
		t.Fatalf("round trip: %+v %v\n%s", cfg, err, b)
	}
	withOther := strings.Replace(string(b), "{", `{"other": {"x": 1},`, 1)
	b, err = RemoveServer([]byte(withOther), "a")
	if err != nil || !strings.Contains(string(b), `"other"`) || strings.Contains(string(b), `"cmd"`) {
		t.Fatalf("remove: %v\n%s", err, b)
	}
	if _, err := RemoveServer(b, "zzz"); abi.CodeOf(err) != abi.ENOENT {
		t.Errorf("removing a missing server: %v", err)
	}
}

const nativeManifest = `
name = "native-hello"
version = "0.1.0"
description = "Example trusted native Cortex plugin"
cortex_version = "1.6.4"
trust = "trusted_native"

[capabilities]
provides = ["tools"]
secrets = false

[sandbox]
level = "trusted_in_process"

[native]
library = "lib/libcortex_plugin_native_hello.so"
isolation = "trusted_in_process"
abi_version = 1
`

const processManifest = `
name = "wc"
version = "1.0.0"
description = "word counts"

[process]
command = "bin/wc.js"
timeout_secs = 5

[[tools]]
name = "word_count"
description = "Count words."
input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }

[[tools]]
name = "delete"
input_schema = '{"type":"object"}'
timeout_secs = 2
[[tools.effects]]
kind = "delete_file"
dry_run = "required_before_execute"
`

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(nativeManifest))
	if err != nil || m.Kind() != KindNative || m.Native.ABIVersion != 1 || len(m.Unknown) != 0 {
		t.Fatalf("the seed's manifest: %+v %v", m, err)
	}
	m, err = ParseManifest([]byte(processManifest))
	if err != nil || m.Kind() != KindProcess || len(m.Tools) != 2 {
		t.Fatalf("process manifest: %+v %v", m, err)
	}
	e := m.Tools[1].Effects[0]
	if e.Reversibility != "irreversible" || e.Confirmation != "always" || e.DryRun != "required_before_execute" {
		t.Errorf("delete_file defaults not applied: %+v", e)
	}
	if s, _ := m.Tools[0].Schema(); !strings.Contains(string(s), `"required":["text"]`) {
		t.Errorf("schema from a TOML table: %s", s)
	}
	bad := []struct {
		name, edit string
		code       abi.Code
	}{
		{"abi 2", strings.Replace(nativeManifest, "abi_version = 1", "abi_version = 2", 1), abi.ENOTSUP},
		{"no trust", strings.Replace(nativeManifest, `trust = "trusted_native"`, "", 1), abi.EINVAL},
		{"secrets", strings.Replace(nativeManifest, "secrets = false", "secrets = true", 1), abi.ENOTSUP},
		{"isolation", strings.Replace(nativeManifest, `isolation = "trusted_in_process"`, `isolation = "wasm"`, 1), abi.ENOTSUP},
		{"library outside", strings.Replace(nativeManifest, `lib/libcortex`, `../../libcortex`, 1), abi.EINVAL},
		{"absolute library", strings.Replace(nativeManifest, `"lib/libcortex`, `"/lib/libcortex`, 1), abi.EINVAL},
		{"bad name", strings.Replace(nativeManifest, `"native-hello"`, `"a.b"`, 1), abi.EINVAL},
		{"no version", strings.Replace(processManifest, `version = "1.0.0"`, "", 1), abi.EINVAL},
		{"duplicate tool", strings.Replace(processManifest, `name = "delete"`, `name = "word_count"`, 1), abi.EINVAL},
		{"bad effect", strings.Replace(processManifest, `kind = "delete_file"`, `kind = "delete_everything"`, 1), abi.EINVAL},
		{"bad schema", strings.Replace(processManifest, `'{"type":"object"}'`, `'{"type":"objekt"}'`, 1), abi.EINVAL},
		{"both kinds", nativeManifest + "\n[process]\ncommand = \"x\"\n", abi.EINVAL},
		{"neither", "name = \"x\"\nversion = \"1\"\n", abi.EINVAL},
		{"not toml", "name = ", abi.EINVAL},
	}
	for _, b := range bad {
		if _, err := ParseManifest([]byte(b.edit)); abi.CodeOf(err) != b.code {
			t.Errorf("%s: %v, want %s", b.name, err, b.code)
		}
	}
	m, err = ParseManifest([]byte(nativeManifest + "\nsignature = \"x\"\n"))
	if err != nil || len(m.Unknown) != 1 {
		t.Errorf("an unknown key is reported, not fatal: %v %v", m.Unknown, err)
	}
}

func TestDecodeDescriptor(t *testing.T) {
	spec, err := DecodeDescriptor("p", []byte(`{"name":"word_count","description":"Count.","input_schema":{"type":"object"},
		"timeout_secs":7,"capabilities":{"emits_progress":true,"emits_observer_text":false,"background_safe":false,
		"effects":[{"kind":"write_file","reversibility":"partially_reversible","confirmation":"always","dry_run":"supported"}]}}`))
	if err != nil || spec.TimeoutSecs != 7 || len(spec.Effects) != 1 || spec.Caps[0] != "emits_progress" {
		t.Fatalf("%+v %v", spec, err)
	}
	for _, bad := range []string{
		``, `{}`, `{"name":""}`, `{"name":"x","input_schema":{"type":1}}`,
		`{"name":"x","name":"y"}`, `{"name":"x","timeout_secs":-1}`,
		`{"name":"x","effects":[{"kind":"nope"}]}`, `{"name":"x"} {}`,
	} {
		if _, err := DecodeDescriptor("p", []byte(bad)); err == nil {
			t.Errorf("DecodeDescriptor(%s) accepted", bad)
		}
	}
	r, err := DecodeToolResult([]byte(`{"output":"3 words","media":[],"is_error":false}`))
	if err != nil || r.Output != "3 words" || string(r.Encode()) != `{"output":"3 words","media":[],"is_error":false}` {
		t.Fatalf("%+v %v %s", r, err, r.Encode())
	}
	for _, bad := range []string{``, `{"output":1}`, `{"output":"x","media":{}}`, `{"output":"\ud800"}`, `{"output":"a","output":"b"}`} {
		if _, err := DecodeToolResult([]byte(bad)); abi.CodeOf(err) != abi.EPROTO {
			t.Errorf("DecodeToolResult(%s) = %v, want EPROTO", bad, err)
		}
	}
}
