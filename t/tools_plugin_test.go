package t

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const pluginSrc = "core/plughost/testdata/plugins"

// nativeManifest is the seed's native manifest for a plugin.
func nativeManifest(name, lib string, abi int) string {
	return fmt.Sprintf(`name = %q
version = "0.1.0"
description = "test plugin"
cortex_version = "1.6.4"
trust = "trusted_native"

[capabilities]
provides = ["tools"]
secrets = false

[sandbox]
level = "trusted_in_process"

[native]
library = %q
isolation = "trusted_in_process"
abi_version = %d
`, name, lib, abi)
}

// cPluginDir builds the C test plugin with gcc into a plugin directory.
func cPluginDir(t *testing.T, name, stats string, defines ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("gcc is required for the native plugin tests")
	}
	dir := filepath.Join(t.TempDir(), name)
	os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	args := []string{"-shared", "-fPIC", "-O2", "-o", filepath.Join(dir, "lib", "libhello.so"), filepath.Join(repoRoot, pluginSrc, "hello.c")}
	if stats != "" {
		args = append(args, fmt.Sprintf(`-DSTATS_PATH="%s"`, stats))
	}
	if out, err := exec.Command("gcc", append(args, defines...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "manifest.toml"), []byte(nativeManifest(name, "lib/libhello.so", 1)), 0o644)
	return dir
}

var rustBuild sync.Once
var rustLibPath, rustStats string
var rustErr error

// rustPluginDir builds the Rust cdylib test plugin with cargo --offline (no
// crates: it implements the ABI's shapes itself). Its buffer accounting
// goes to a stats file fixed at build time.
func rustPluginDir(t *testing.T, name string) (dir, stats string) {
	t.Helper()
	if _, err := exec.LookPath("cargo"); err != nil {
		t.Fatal("cargo is required for the Rust cdylib plugin test")
	}
	rustBuild.Do(func() {
		tmp, err := os.MkdirTemp("", "rust-plugin-")
		if err != nil {
			rustErr = err
			return
		}
		os.Chmod(tmp, 0o755)
		rustStats = filepath.Join(tmp, "stats")
		cmd := exec.Command("cargo", "build", "--offline", "--release", "--quiet", "--target-dir", filepath.Join(tmp, "target"))
		cmd.Dir = filepath.Join(repoRoot, pluginSrc, "rust-hello")
		cmd.Env = append(os.Environ(), "STATS_PATH="+rustStats)
		if out, err := cmd.CombinedOutput(); err != nil {
			rustErr = fmt.Errorf("%v\n%s", err, out)
			return
		}
		rustLibPath = filepath.Join(tmp, "target", "release", "libcortex_plugin_rust_hello.so")
	})
	if rustErr != nil {
		t.Fatalf("cargo build --offline: %v", rustErr)
	}
	os.Remove(rustStats)
	dir = filepath.Join(t.TempDir(), name)
	os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	b, err := os.ReadFile(rustLibPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "lib", "librust.so"), b, 0o755)
	os.WriteFile(filepath.Join(dir, "manifest.toml"), []byte(nativeManifest(name, "lib/librust.so", 1)), 0o644)
	return dir, rustStats
}

// A C plugin (gcc) and a Rust cdylib with std threads (cargo --offline)
// are installed from their manifest.toml, listed, executed with the
// invocation context, and at shutdown every buffer they returned has been
// freed with their buffer_free and plugin_drop was called (their own
// accounting, written at plugin_drop). The unit tests of core/plughost run
// the same plugins under AddressSanitizer's leak check.
func TestNativePluginsCAndRust(t *testing.T) {
	root := newRoot(t)
	statsDir := t.TempDir()
	os.Chmod(statsDir, 0o777)
	cStats := filepath.Join(statsDir, "c-stats")
	d := toolDaemon(t, root)
	r := mustOK(t, sh(t, "ctx", "plugin", "install", cPluginDir(t, "hello-c", cStats), "--root", root))
	if !strings.Contains(r.stdout, "tool/plugin.hello-c.word_count  (ready)") {
		t.Fatalf("install of the C plugin: %s", r)
	}
	rdir, rStats := rustPluginDir(t, "hello-rust")
	mustOK(t, sh(t, "ctx", "plugin", "install", rdir, "--root", root))
	waitSource(t, root, "hello-rust", "ready")

	ls := mustOK(t, sh(t, "ctx", "plugin", "ls", "--root", root, "--json"))
	var pl struct {
		Plugins []struct {
			Name, Kind, State string
			Tools             int
		}
	}
	fromEnvelope([]byte(ls.stdout), &pl.Plugins)
	if len(pl.Plugins) != 2 || pl.Plugins[0].State != "ready" || pl.Plugins[1].Kind != "native" || pl.Plugins[0].Tools != 6 || pl.Plugins[1].Tools != 2 {
		t.Fatalf("ctx plugin ls --json: %s", ls.stdout)
	}

	for _, p := range []string{"plugin.hello-c.word_count", "plugin.hello-rust.word_count"} {
		for i := 0; i < 20; i++ {
			r := mustOK(t, run(t, runOpts{stdin: `{"text":"one two three four"}`}, filepath.Join(root, "tool", p)))
			if text, _ := toolResult(t, r); !strings.Contains(text, `"output":"4 words"`) {
				t.Fatalf("%s: %s", p, r)
			}
		}
	}
	r = mustOK(t, run(t, runOpts{}, filepath.Join(root, "tool", "plugin.hello-rust.threads"), `{}`))
	if text, _ := toolResult(t, r); !strings.Contains(text, "plugin-worker") {
		t.Fatalf("the Rust plugin's worker thread did not answer: %s", r)
	}
	r = mustOK(t, run(t, runOpts{}, filepath.Join(root, "tool", "plugin.hello-c.whoami"), `{}`))
	text, _ := toolResult(t, r)
	for _, want := range []string{`\"tool_name\":\"whoami\"`, `\"source\":\"exec\"`, `\"actor\":\"uid:`, `\"execution_scope\":\"foreground\"`, `\"session_id\":null`} {
		if !strings.Contains(text, want) {
			t.Errorf("invocation context lacks %s: %s", want, text)
		}
	}
	// The descriptor's name is kept in .d/origin; word_count needs no mapping.
	origin, _ := os.ReadFile(filepath.Join(root, "tool", "plugin.hello-c.word_count.d", "origin"))
	if !strings.Contains(string(origin), "tool=word_count") || !strings.Contains(string(origin), "kind=native") {
		t.Errorf(".d/origin: %s", origin)
	}

	d.stop(t)
	for name, stats := range map[string]string{"C": cStats, "Rust": rStats} {
		b, err := os.ReadFile(stats)
		if err != nil {
			t.Fatalf("%s plugin: no accounting written at plugin_drop: %v", name, err)
		}
		if line := strings.TrimSpace(string(b)); !strings.Contains(line, "live=0 drops=1") {
			t.Errorf("%s plugin at shutdown: %s (want every buffer freed and one plugin_drop)", name, line)
		}
	}
}

// A plugin built for another ABI version is refused with a clear error:
// one that answers ABI 2 at load, and a manifest that asks for ABI 2 at
// install.
func TestNativePluginWrongABI(t *testing.T) {
	root := newRoot(t)
	toolDaemon(t, root)
	mustOK(t, sh(t, "ctx", "plugin", "install", cPluginDir(t, "abi-two", "", "-DABI=2"), "--root", root))
	s := waitSource(t, root, "abi-two", "failed")
	if !strings.Contains(s.Error, "speaks native ABI version 2") || len(s.Tools) != 0 {
		t.Fatalf("a plugin answering ABI 2: %+v", s)
	}
	if _, err := os.Stat(filepath.Join(root, "tool", "plugin.abi-two.word_count")); err == nil {
		t.Errorf("a refused plugin's tools were projected")
	}
	dir := cPluginDir(t, "asks-two", "")
	os.WriteFile(filepath.Join(dir, "manifest.toml"), []byte(nativeManifest("asks-two", "lib/libhello.so", 2)), 0o644)
	r := sh(t, "ctx", "plugin", "install", dir, "--root", root, "--json")
	if r.code == 0 || !strings.Contains(r.stdout, `"code":"ENOTSUP"`) || !strings.Contains(r.stdout, "native ABI version 1 only") {
		t.Fatalf("installing a manifest with abi_version 2: %s", r)
	}
}

// A plugin that crashes (SIGSEGV in tool_execute) takes its host down, not
// cortexfsd: the call is EHOSTDOWN (exit 69), the daemon keeps serving
// (its model socket answers), the host is restarted and the plugin's
// tools work again.
func TestNativePluginCrash(t *testing.T) {
	root := newRoot(t)
	d := toolDaemon(t, root)
	mustOK(t, sh(t, "ctx", "plugin", "install", cPluginDir(t, "hello-c", ""), "--root", root))
	before := waitSource(t, root, "hello-c", "ready")
	r := run(t, runOpts{}, filepath.Join(root, "tool", "plugin.hello-c.crash"), `{}`)
	if _, code := toolResult(t, r); r.code != 69 || code != "EHOSTDOWN" || !strings.Contains(r.stdout, "segmentation") {
		t.Fatalf("crash: %s", r)
	}
	if d.cmd.ProcessState != nil {
		t.Fatal("cortexfsd died with the plugin")
	}
	mustOK(t, sh(t, "ctx", "send", filepath.Join(root, "model/debug/echo"), "still", "here"))
	var after *srcReport
	waitLong(t, "the plugin host to come back", func() bool {
		after = findSrc(toolSources(t, root), "system", "hello-c")
		return after.State == "ready" && after.PID != before.PID
	})
	if after.Restarts < 1 {
		t.Errorf("restart not counted: %+v", after)
	}
	r = mustOK(t, run(t, runOpts{}, filepath.Join(root, "tool", "plugin.hello-c.word_count"), `{"text":"a b"}`))
	if text, _ := toolResult(t, r); !strings.Contains(text, "2 words") {
		t.Fatalf("after the crash: %s", r)
	}
	// A call that overruns the tool's timeout_secs (2) is ETIMEDOUT and
	// kills the host; the default (120 s) does not apply.
	start := time.Now()
	r = run(t, runOpts{}, filepath.Join(root, "tool", "plugin.hello-c.slow"), `{"secs":60}`)
	if _, code := toolResult(t, r); code != "ETIMEDOUT" || time.Since(start) > 30*time.Second {
		t.Fatalf("slow call past timeout_secs=2: %v %s", time.Since(start), r)
	}
}

const processPluginScript = `#!/usr/bin/env node
// A process plugin: one JSON request on stdin, one ToolResult on stdout.
let data = "";
process.stdin.on("data", (c) => (data += c));
process.stdin.on("end", () => {
  const req = JSON.parse(data);
  const mode = process.argv[2] || "plain";
  let out;
  if (req.tool_name === "word_count") {
    const n = (req.input.text || "").split(/\s+/).filter(Boolean).length;
    out = { output: mode + ": " + n + " words", media: [], is_error: false };
  } else if (req.tool_name === "shout") {
    out = { output: String(req.input.text || "").toUpperCase(), media: [], is_error: false };
  } else {
    out = { output: "unknown tool " + req.tool_name, media: [], is_error: true };
  }
  process.stdout.write(JSON.stringify(out));
});
`

func processManifest(args, extra string) string {
	return `name = "wc"
version = "1.0.0"
description = "word counts in node"

[process]
command = "bin/wc.js"
args = [` + args + `]
timeout_secs = 20

[[tools]]
name = "word_count"
description = "Count words."
input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
` + extra
}

// A process plugin (node, JSON over stdin/stdout) runs as a child of its
// caller, with or without a daemon; an edit of the installed manifest
// hot-applies: the next call uses it at once, and the running daemon
// re-projects it (a new tool appears) without a restart.
func TestProcessPluginHotApply(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required (npm is)")
	}
	root := newRoot(t)
	src := filepath.Join(t.TempDir(), "wc")
	os.MkdirAll(filepath.Join(src, "bin"), 0o755)
	os.WriteFile(filepath.Join(src, "bin", "wc.js"), []byte(processPluginScript), 0o755)
	os.WriteFile(filepath.Join(src, "manifest.toml"), []byte(processManifest(`"plain"`, "")), 0o644)
	r := mustOK(t, sh(t, "ctx", "plugin", "install", src, "--root", root))
	if !strings.Contains(r.stdout, "tool/plugin.wc.word_count  (ready)") {
		t.Fatalf("install (no daemon: a process plugin needs none): %s", r)
	}
	wc := filepath.Join(root, "tool", "plugin.wc.word_count")
	r = mustOK(t, run(t, runOpts{stdin: `{"text":"a b c"}`}, wc))
	if text, _ := toolResult(t, r); !strings.Contains(text, "plain: 3 words") {
		t.Fatalf("process plugin call: %s", r)
	}
	if r := run(t, runOpts{stdin: `{"txt":"a"}`}, wc); r.code != 2 {
		t.Errorf("input not matching the manifest's schema: %s", r)
	}
	log, _ := os.ReadFile(wc + ".d/log")
	if strings.Count(string(log), "\n") != 2 {
		t.Errorf(".d/log after 2 calls:\n%s", log)
	}

	d := toolDaemon(t, root)
	installed := filepath.Join(root, "plugins", "wc", "manifest.toml")
	shout := "\n[[tools]]\nname = \"shout\"\ndescription = \"Upper-case.\"\n"
	if err := os.WriteFile(installed, []byte(processManifest(`"edited"`, shout)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustOK(t, run(t, runOpts{stdin: `{"text":"a b"}`}, wc))
	if text, _ := toolResult(t, r); !strings.Contains(text, "edited: 2 words") {
		t.Fatalf("the edited args did not apply to the next call: %s", r)
	}
	shoutTool := filepath.Join(root, "tool", "plugin.wc.shout")
	waitLong(t, "the daemon to project the new tool", func() bool { _, err := os.Stat(shoutTool); return err == nil })
	r = mustOK(t, run(t, runOpts{}, shoutTool, `{"text":"hot"}`))
	if text, _ := toolResult(t, r); !strings.Contains(text, "HOT") {
		t.Fatalf("the new tool: %s", r)
	}
	if d.cmd.ProcessState != nil || strings.Count(daemonLog(d), "serving tool sources") != 1 {
		t.Errorf("the daemon restarted:\n%s", daemonLog(d))
	}
	// Removing the tool from the manifest removes its object.
	os.WriteFile(installed, []byte(processManifest(`"edited"`, "")), 0o644)
	waitLong(t, "the removed tool to go", func() bool { _, err := os.Stat(shoutTool); return err != nil })
	mustOK(t, sh(t, "ctx", "plugin", "rm", "wc", "--root", root))
	if _, err := os.Stat(wc); err == nil {
		t.Errorf("ctx plugin rm left the tool")
	}
}
