package agent

import (
	"os"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestEnvironIsBuiltFromNothing(t *testing.T) {
	a, r := newAgent(t)
	t.Setenv("OPENAI_API_KEY", "sk-leak")
	t.Setenv("SOME_TOKEN", "tok-leak")
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/leak")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TERM", "xterm")
	t.Setenv("PATH", "/opt/bin:/usr/bin")
	a.Env = []abi.KV{{Key: "PROJECT", Value: "x"}, {Key: "TERM", Value: "dumb"}}
	got := map[string]string{}
	for _, kv := range a.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s set twice", k)
		}
		got[k] = v
	}
	want := map[string]string{
		"CTX_ROOT": string(r), "CTX_HOME": r.Home(a.Owner), "HOME": a.Home(),
		"CTX_PATH": strings.Join(a.Path, ":"), "LANG": "C.UTF-8", "TERM": "dumb", "PATH": "/opt/bin:/usr/bin", "PROJECT": "x",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected variable %s reached the tool environment", k)
		}
	}
	os.Unsetenv("PATH")
	for _, kv := range a.Environ() {
		if strings.HasPrefix(kv, "PATH=") && kv != "PATH="+DefaultExecPath {
			t.Errorf("without a caller PATH: %s, want %s", kv, DefaultExecPath)
		}
	}
}

func TestEnvFileRefusesCredentials(t *testing.T) {
	for _, name := range []string{"OPENAI_API_KEY", "LMM_API_KEY", "lmm_api_key"} {
		a, _ := newAgent(t)
		if err := os.WriteFile(a.Ctl("env"), []byte(name+"=sk-x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(a.Object.Path); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf(".d/env with %s: Open = %v, want EINVAL", name, err)
		}
	}
	a, _ := newAgent(t)
	os.WriteFile(a.Ctl("env"), []byte("API_BASE=https://x\n"), 0o644)
	if _, err := Open(a.Object.Path); err != nil {
		t.Errorf(".d/env with an ordinary variable: %v", err)
	}
}
