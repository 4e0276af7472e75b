package creds

import (
	"context"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestEnvNames(t *testing.T) {
	for prov, want := range map[string]string{
		"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google": "GEMINI_API_KEY",
		"api.lmm.best": "LMM_API_KEY", "localhost": "LOCALHOST_API_KEY", "my-proxy": "MY_PROXY_API_KEY",
		"llm.corp.example.com": "LLM_CORP_EXAMPLE_API_KEY", "127.0.0.1": "HOST_127_0_0_1_API_KEY",
	} {
		if got := EnvName(prov); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", prov, got, want)
		}
	}
	if got := KeychainServices("api.lmm.best"); strings.Join(got, ",") != "cortexfs:api.lmm.best,cortexfs:lmm" {
		t.Errorf("keychain services %v", got)
	}
}

// Environment first; without it and without a session bus (a keychain that
// is unavailable counts as absent) the provider is unconfigured.
func TestLookup(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("LMM_API_KEY", "  sk-lmm  ")
	if k, src, err := Lookup(context.Background(), "api.lmm.best"); err != nil || k != "sk-lmm" || src != FromEnv {
		t.Fatalf("env lookup: %q %s %v", k, src, err)
	}
	t.Setenv("LMM_API_KEY", "")
	k, src, err := Lookup(context.Background(), "api.lmm.best")
	if abi.CodeOf(err) != abi.ENOKEY || k != "" || src != None || !strings.Contains(err.Error(), "LMM_API_KEY") ||
		!strings.Contains(err.Error(), "auth=none") {
		t.Fatalf("absent key: %q %s %v", k, src, err)
	}
	// An unreachable bus address is an absent keychain, not a failure.
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
	if _, _, err := Lookup(context.Background(), "api.lmm.best"); abi.CodeOf(err) != abi.ENOKEY {
		t.Fatalf("broken bus: %v", err)
	}
}
