package agent

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model/creds"
)

// PassEnv are the caller's variables that reach a tool (and the agent
// runtime, once sandboxed) besides the seed's CTX_ROOT, CTX_HOME,
// CTX_PATH, HOME and .d/env: the executable search path, locale, terminal
// type and time zone. Nothing else of the caller's environment crosses —
// no provider key, no session bus address, no token of any kind.
var PassEnv = []string{"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
	"LC_NUMERIC", "LC_TIME", "LC_MONETARY", "TERM", "TZ"}

// DefaultExecPath is PATH when the caller has none.
const DefaultExecPath = "/usr/local/bin:/usr/bin:/bin"

// Environ is the exact environment of the agent's tool runs (seed "Agent
// startup" 2–3): PassEnv from the caller, then CTX_ROOT, CTX_HOME, HOME
// and CTX_PATH, then .d/env merged over them. It is built from nothing, so
// a credential in the runtime's own environment never reaches a tool.
func (a *Agent) Environ() []string {
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, k := range PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			set(k, v)
		}
	}
	if _, ok := env["PATH"]; !ok {
		set("PATH", DefaultExecPath)
	}
	set("CTX_ROOT", string(a.Root))
	set("CTX_HOME", a.Root.Home(a.Owner))
	set("HOME", a.Home())
	set("CTX_PATH", strings.Join(a.Path, ":"))
	for _, kv := range a.Env {
		set(kv.Key, kv.Value)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out
}

// checkEnvFile refuses a .d/env that would hand a tool a credential:
// secrets never live in control files (model-abi), and every provider key
// CortexFS reads is named *_API_KEY (creds.EnvName).
func checkEnvFile(kvs []abi.KV) error {
	for _, kv := range kvs {
		if creds.IsKeyName(kv.Key) {
			return abi.Errorf(abi.EINVAL, "env: %s is a credential name; credentials never go in .d/env", kv.Key)
		}
	}
	return nil
}

// sealRuntime keeps the runtime's own credentials from the tools it
// starts. Tools run as the agent's uid, and a process of the same uid may
// read another's /proc/PID/environ and /proc/PID/mem — where the provider
// key this runtime holds lives. PR_SET_DUMPABLE 0 makes the kernel refuse
// those reads (and ptrace) to anyone without CAP_SYS_PTRACE; execve resets
// it for the tools themselves, so their own /proc stays theirs. A runtime
// running as root with root tools is not protected by this (root has
// CAP_SYS_PTRACE): that takes the sandbox of ns/.
func sealRuntime() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
