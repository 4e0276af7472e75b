package plughost

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// gccBuild compiles C sources; tests that need gcc skip loudly without it.
func gccBuild(t *testing.T, out string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("SKIP LOUDLY: gcc not found; native plugin tests need it")
	}
	if b, err := exec.Command("gcc", append(args, "-o", out)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return out
}

// hostProgram is the plugin host compiled from host/, with extra flags
// (the leak check builds it with AddressSanitizer).
func hostProgram(t *testing.T, flags ...string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "host")
	gccBuild(t, out, append([]string{"-O1", "-g", "-Wall", "-Werror", "host/cortexfs-plugin-host.c"}, flags...)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func cPlugin(t *testing.T, defines ...string) *os.File {
	t.Helper()
	out := filepath.Join(t.TempDir(), "libplugin.so")
	gccBuild(t, out, append([]string{"-shared", "-fPIC", "-O1", "-g", "testdata/plugins/hello.c"}, defines...)...)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

var rustOnce sync.Once
var rustLib string
var rustErr error

// rustPlugin builds the Rust cdylib with cargo --offline (no crates).
func rustPlugin(t *testing.T) *os.File {
	t.Helper()
	if _, err := exec.LookPath("cargo"); err != nil {
		t.Skip("SKIP LOUDLY: cargo not found; the Rust cdylib plugin test needs it")
	}
	rustOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rust-plugin-")
		if err != nil {
			rustErr = err
			return
		}
		cmd := exec.Command("cargo", "build", "--offline", "--release", "--quiet", "--target-dir", filepath.Join(dir, "target"))
		cmd.Dir = "testdata/plugins/rust-hello"
		if b, err := cmd.CombinedOutput(); err != nil {
			rustErr = err
			rustLib = string(b)
			return
		}
		rustLib = filepath.Join(dir, "target", "release", "libcortex_plugin_rust_hello.so")
	})
	if rustErr != nil {
		t.Fatalf("cargo build: %v\n%s", rustErr, rustLib)
	}
	f, err := os.Open(rustLib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func start(t *testing.T, prog []byte, lib *os.File) (*Host, *strings.Builder) {
	t.Helper()
	var stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := Start(ctx, Options{Program: prog, Library: lib, Stderr: &stderr})
	if err != nil {
		t.Fatalf("Start: %v\nstderr: %s", err, stderr.String())
	}
	return h, &stderr
}

func call(t *testing.T, h *Host, tool, input string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := h.Execute(ctx, tool, []byte(input), []byte(`{"tool_name":"`+tool+`","session_id":null,"actor":null,"source":"test","execution_scope":"foreground"}`))
	return string(out), err
}

// The C and the Rust plugin load, list their tools, answer calls and are
// dropped at Close; run under AddressSanitizer's leak check, every buffer
// the plugin returned was given back to its buffer_free and the host freed
// everything of its own (a leak makes the host exit non-zero, and Close
// reports it).
func TestPluginsUnderLeakCheck(t *testing.T) {
	prog := hostProgram(t, "-fsanitize=address")
	for _, c := range []struct {
		name  string
		lib   func(t *testing.T) *os.File
		tools int
	}{
		{"c", func(t *testing.T) *os.File { return cPlugin(t) }, 6},
		{"rust", rustPlugin, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, stderr := start(t, prog, c.lib(t))
			if len(h.Descriptors) != c.tools {
				t.Fatalf("%d descriptors, want %d", len(h.Descriptors), c.tools)
			}
			var info struct{ Name, Version string }
			if err := json.Unmarshal(h.Info, &info); err != nil || info.Version != "0.1.0" {
				t.Fatalf("plugin_info %s: %v", h.Info, err)
			}
			for i := 0; i < 200; i++ {
				out, err := call(t, h, "word_count", `{"text":"one two three"}`)
				if err != nil || !strings.Contains(out, `"3 words"`) {
					t.Fatalf("call %d: %q %v", i, out, err)
				}
			}
			if err := h.Close(20 * time.Second); err != nil {
				t.Fatalf("Close: %v\nhost stderr:\n%s", err, stderr.String())
			}
			if strings.Contains(stderr.String(), "LeakSanitizer") {
				t.Fatalf("leaks:\n%s", stderr.String())
			}
		})
	}
}

// The leak check can fail: a host that never frees what the plugin hands
// back is caught. (A plugin leaking on purpose stands in for it.)
func TestLeakCheckCatchesALeak(t *testing.T) {
	prog := hostProgram(t, "-fsanitize=address")
	src := filepath.Join(t.TempDir(), "leaky.c")
	b, _ := os.ReadFile("testdata/plugins/hello.c")
	leaky := strings.Replace(string(b), "\tfree(b.ptr);\n\tif (global)", "\tif (global)", 1)
	if leaky == string(b) {
		t.Fatal("could not make the leaky variant")
	}
	os.WriteFile(src, []byte(leaky), 0o644)
	out := filepath.Join(t.TempDir(), "libleaky.so")
	gccBuild(t, out, "-shared", "-fPIC", "-O1", "-g", src)
	lib, _ := os.Open(out)
	defer lib.Close()
	h, stderr := start(t, prog, lib)
	if _, err := call(t, h, "word_count", `{"text":"a"}`); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(20 * time.Second); err == nil || !strings.Contains(stderr.String(), "LeakSanitizer") {
		t.Fatalf("a leaking plugin passed the leak check: %v\n%s", err, stderr.String())
	}
}

// Rust std threads work in the host: the call is answered by the worker
// thread the plugin started at init.
func TestRustPluginThreads(t *testing.T) {
	h, _ := start(t, hostProgram(t), rustPlugin(t))
	defer h.Close(10 * time.Second)
	out, err := call(t, h, "threads", `{}`)
	if err != nil || !strings.Contains(out, "plugin-worker") {
		t.Fatalf("threads: %q %v", out, err)
	}
}

func TestWrongABIRefused(t *testing.T) {
	prog := hostProgram(t)
	for _, c := range []struct {
		name   string
		define string
		want   string
	}{
		{"plugin answers ABI 2", "-DABI=2", "speaks native ABI version 2"},
		{"plugin refuses host ABI 1", "-DREFUSE", "refused native ABI version 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Start(context.Background(), Options{Program: prog, Library: cPlugin(t, c.define)})
			if abi.CodeOf(err) != abi.ENOTSUP || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Start = %v, want ENOTSUP %q", err, c.want)
			}
		})
	}
	t.Run("not a plugin", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "libnot.so")
		src := filepath.Join(t.TempDir(), "not.c")
		os.WriteFile(src, []byte("int nothing(void) { return 0; }\n"), 0o644)
		gccBuild(t, out, "-shared", "-fPIC", src)
		lib, _ := os.Open(out)
		defer lib.Close()
		_, err := Start(context.Background(), Options{Program: prog, Library: lib})
		if abi.CodeOf(err) != abi.EINVAL || !strings.Contains(err.Error(), "cortex_plugin_init") {
			t.Fatalf("Start = %v", err)
		}
	})
}

// A crash inside tool_execute kills the host, not the caller: the call is
// EHOSTDOWN naming the signal.
func TestCrashKillsOnlyTheHost(t *testing.T) {
	h, _ := start(t, hostProgram(t), cPlugin(t))
	_, err := call(t, h, "crash", `{}`)
	if abi.CodeOf(err) != abi.EHOSTDOWN || !strings.Contains(err.Error(), "SIGSEGV") && !strings.Contains(err.Error(), "segmentation") {
		t.Fatalf("crash call = %v", err)
	}
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("host still running after the crash")
	}
	if _, err := call(t, h, "word_count", `{"text":"x"}`); abi.CodeOf(err) != abi.EHOSTDOWN {
		t.Fatalf("call on a dead host = %v", err)
	}
}

// A call past its deadline kills the host (the plugin cannot be
// interrupted) and is ETIMEDOUT.
func TestCallTimeoutKillsHost(t *testing.T) {
	h, _ := start(t, hostProgram(t), cPlugin(t))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := h.Execute(ctx, "slow", []byte(`{"secs":30}`), []byte(`{}`))
	if abi.CodeOf(err) != abi.ETIMEDOUT {
		t.Fatalf("slow call = %v", err)
	}
	<-h.Done()
}

// The plugin's own stdout cannot corrupt the protocol.
func TestPluginStdoutIsNotTheProtocol(t *testing.T) {
	src := filepath.Join(t.TempDir(), "chatty.c")
	b, _ := os.ReadFile("testdata/plugins/hello.c")
	chatty := strings.Replace(string(b), "\tstruct state *s = p;\n\tchar *tool", "\tstruct state *s = p;\n\tprintf(\"garbage on stdout\\n\"); fflush(stdout);\n\tchar *tool", 1)
	os.WriteFile(src, []byte(chatty), 0o644)
	out := filepath.Join(t.TempDir(), "libchatty.so")
	gccBuild(t, out, "-shared", "-fPIC", src)
	lib, _ := os.Open(out)
	defer lib.Close()
	h, stderr := start(t, hostProgram(t), lib)
	if out, err := call(t, h, "word_count", `{"text":"a b"}`); err != nil || !strings.Contains(out, "2 words") {
		t.Fatalf("call = %q %v", out, err)
	}
	h.Close(10 * time.Second)
	if !strings.Contains(stderr.String(), "garbage on stdout") {
		t.Errorf("plugin stdout did not go to stderr: %q", stderr.String())
	}
}
