// Package creds finds a provider's API key: the environment first, then the
// system keychain (Secret Service), else the provider is unconfigured
// (ENOKEY). A key is only ever returned to the caller that sends it; it is
// never written, logged or put in an error message.
package creds

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Source says where a key was found.
type Source string

const (
	FromEnv      Source = "env"
	FromKeychain Source = "keychain"
	None         Source = "none"
)

// standard env names of native providers.
var standard = map[string]string{
	"openai":    "OPENAI_API_KEY",
	"anthropic": "ANTHROPIC_API_KEY",
	"google":    "GEMINI_API_KEY",
	"gemini":    "GEMINI_API_KEY",
	"ollama":    "OLLAMA_API_KEY",
}

// ShortName is the provider's key name: a native provider keeps its name;
// a host-named provider (a normalized host like api.lmm.best) drops a
// leading "api."/"www." and its top-level domain ("lmm").
func ShortName(provider string) string {
	p := strings.ToLower(provider)
	if net.ParseIP(p) != nil || !strings.Contains(p, ".") {
		return p
	}
	labels := strings.Split(p, ".")
	if len(labels) > 2 && (labels[0] == "api" || labels[0] == "www") {
		labels = labels[1:]
	}
	if len(labels) > 1 {
		labels = labels[:len(labels)-1]
	}
	return strings.Join(labels, ".")
}

// EnvName is the environment variable holding a provider's key:
// OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY for native providers,
// else the short name upper-cased with non-alphanumerics as "_" plus
// "_API_KEY" (api.lmm.best → LMM_API_KEY, 127.0.0.1 → HOST_127_0_0_1_API_KEY).
func EnvName(provider string) string {
	if n, ok := standard[strings.ToLower(provider)]; ok {
		return n
	}
	short := ShortName(provider)
	var b strings.Builder
	for _, c := range strings.ToUpper(short) {
		if c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		name = "HOST_" + name
	}
	return name + keySuffix
}

// keySuffix ends every credential variable EnvName produces.
const keySuffix = "_API_KEY"

// IsKeyName reports whether an environment variable name is one CortexFS
// reads provider keys from (every EnvName ends in _API_KEY), so places
// that must never carry a credential can refuse it.
func IsKeyName(name string) bool { return strings.HasSuffix(strings.ToUpper(name), keySuffix) }

// KeychainServices are the Secret Service items consulted, account
// "default": cortexfs:<provider>, then cortexfs:<short name> when it differs
// (the seed's example stores api.lmm.best's key as cortexfs:lmm).
func KeychainServices(provider string) []string {
	out := []string{"cortexfs:" + provider}
	if s := ShortName(provider); s != provider {
		out = append(out, "cortexfs:"+s)
	}
	return out
}

// Account is the keychain account name of every item.
const Account = "default"

// Lookup returns the key of a provider and where it came from. An absent
// key is ENOKEY naming where to put one, never anything about a value.
func Lookup(ctx context.Context, provider string) (string, Source, error) {
	env := EnvName(provider)
	if v := strings.TrimSpace(os.Getenv(env)); v != "" {
		return v, FromEnv, nil
	}
	for _, svc := range KeychainServices(provider) {
		if v := keychainGet(ctx, svc); v != "" {
			return v, FromKeychain, nil
		}
	}
	return "", None, abi.Errorf(abi.ENOKEY, "provider %s is not configured: set %s or add the keychain item service=%s account=%s; "+
		"a server that needs no key (llama.cpp, vLLM, Ollama) needs the line auth=none in the model's .d/default "+
		"(ctx model add --auth none, ctx model refresh %s --auth none)",
		provider, env, KeychainServices(provider)[0], Account, provider)
}

// keychainTimeout bounds one keychain query: a hung bus is an absent key.
const keychainTimeout = 3 * time.Second

// keychainGet reads one Secret Service item; any failure (no session bus,
// no Secret Service, locked, not found) counts as absent.
func keychainGet(ctx context.Context, service string) string {
	if !sessionBusAvailable() {
		return ""
	}
	type res struct {
		v   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		v, err := keyring.Get(service, Account)
		ch <- res{v, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && !errors.Is(r.err, keyring.ErrNotFound) {
			return ""
		}
		return strings.TrimSpace(r.v)
	case <-time.After(keychainTimeout):
		return ""
	case <-ctx.Done():
		return ""
	}
}

// sessionBusAvailable says whether a D-Bus session bus can be reached
// without starting one: the D-Bus library would otherwise run dbus-launch.
func sessionBusAvailable() bool {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" && a != "autolaunch:" {
		return true
	}
	for _, dir := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/run/user/" + strconv.Itoa(os.Getuid())} {
		if dir == "" {
			continue
		}
		if fi, err := os.Stat(dir + "/bus"); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return true
		}
	}
	return false
}
