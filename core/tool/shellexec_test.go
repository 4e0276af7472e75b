package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestShellExec(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		max       int
		args      map[string]any
		exit      float64
		stdout    string
		stderr    string
		truncated bool
	}{
		{"stdout", 0, map[string]any{"cmd": "echo hello"}, 0, "hello\n", "", false},
		{"stderr apart", 0, map[string]any{"cmd": "echo out; echo err >&2"}, 0, "out\n", "err\n", false},
		{"exit code", 0, map[string]any{"cmd": "echo partial; exit 3"}, 3, "partial\n", "", false},
		{"false", 0, map[string]any{"cmd": "false"}, 1, "", "", false},
		{"exit 255", 0, map[string]any{"cmd": "exit 255"}, 255, "", "", false},
		{"killed by SIGKILL", 0, map[string]any{"cmd": "kill -KILL $$"}, 128 + 9, "", "", false},
		{"killed by SIGTERM", 0, map[string]any{"cmd": "kill -TERM $$"}, 128 + 15, "", "", false},
		{"command not found", 0, map[string]any{"cmd": "no-such-command-xyz 2>/dev/null"}, 127, "", "", false},
		{"cwd default", 0, map[string]any{"cmd": "pwd"}, 0, dir + "\n", "", false},
		{"cwd relative", 0, map[string]any{"cmd": "pwd", "cwd": "sub"}, 0, filepath.Join(dir, "sub") + "\n", "", false},
		{"cwd absolute", 0, map[string]any{"cmd": "pwd", "cwd": "/"}, 0, "/\n", "", false},
		{"stdin", 0, map[string]any{"cmd": "cat; echo", "stdin": "fed"}, 0, "fed\n", "", false},
		{"no stdin is empty", 0, map[string]any{"cmd": "cat"}, 0, "", "", false},
		{"stdin not read", 0, map[string]any{"cmd": "true", "stdin": strings.Repeat("x", 1<<20)}, 0, "", "", false},
		{"stdin larger than a pipe", 0, map[string]any{"cmd": "wc -c", "stdin": strings.Repeat("x", 1<<20)}, 0, "1048576\n", "", false},
		{"invalid UTF-8 output", 0, map[string]any{"cmd": `printf 'a\377b'`}, 0, "a\uFFFDb", "", false},
		{"truncated stdout", 10, map[string]any{"cmd": "printf 0123456789abcdef"}, 0, "0123456789", "", true},
		{"truncated stderr", 4, map[string]any{"cmd": "printf ok; printf 0123456789 >&2"}, 0, "ok", "0123", true},
		{"exactly the limit", 4, map[string]any{"cmd": "printf 0123"}, 0, "0123", "", false},
		{"cut inside a character", 2, map[string]any{"cmd": "printf 'a\\303\\251'"}, 0, "a", "", true},
		{"background job does not hold the call", 0, map[string]any{"cmd": "sleep 30 & echo started"}, 0, "started\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			got := mustCall(t, "shell.exec", Env{Cwd: dir, MaxOutput: tt.max}, jsonArgs(t, tt.args))
			want := map[string]any{"exit_code": tt.exit, "stdout": tt.stdout, "stderr": tt.stderr,
				"truncated": tt.truncated, "timed_out": false}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v", el)
			}
			if ms := got["duration_ms"].(float64); ms < 0 || ms > float64(time.Since(start).Milliseconds()+1) {
				t.Errorf("duration_ms = %v", ms)
			}
		})
	}
}

func TestShellExecErrors(t *testing.T) {
	dir := t.TempDir()
	mkfile(t, dir, "file", "", 0o644)
	tests := []struct {
		name string
		args string
		code abi.Code
		msg  string
	}{
		{"cwd missing", `{"cmd":"pwd","cwd":"nope"}`, abi.ENOENT, "no such file or directory"},
		{"cwd is a file", `{"cmd":"pwd","cwd":"file"}`, abi.EINVAL, "is not a directory"},
		{"cwd empty", `{"cmd":"pwd","cwd":""}`, abi.EINVAL, "/cwd: want at least 1 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, context.Background(), "shell.exec", Env{Cwd: dir}, tt.args)
			wantErr(t, err, tt.code, "shell.exec: ", tt.msg)
		})
	}
	_, err := call(t, context.Background(), "shell.exec", Env{Cwd: filepath.Join(dir, "gone")}, `{"cmd":"pwd"}`)
	wantErr(t, err, abi.ENOENT, "shell.exec: ")
}

// TestShellExecTimeoutKillsGroup: the timeout kills sh and what it
// started, returns within a bounded time, and is a result, not an error.
func TestShellExecTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	start := time.Now()
	got := mustCall(t, "shell.exec", Env{Cwd: t.TempDir()},
		`{"cmd":"sleep 30 & echo $!; echo before >&2; sleep 30","timeout":1}`)
	el := time.Since(start)
	if got["timed_out"] != true || got["exit_code"] != float64(-1) {
		t.Errorf("result = %v, want timed_out and exit_code -1", got)
	}
	if el < time.Second || el > 3*time.Second {
		t.Errorf("took %v, want about 1s", el)
	}
	if got["stderr"] != "before\n" {
		t.Errorf("output before the timeout lost: stderr = %q", got["stderr"])
	}
	waitGone(t, pidFrom(t, got["stdout"].(string)))
}

// TestShellExecEndKillsGroup: when sh exits, what it left in its group is
// killed too, so nothing a call starts outlives it.
func TestShellExecEndKillsGroup(t *testing.T) {
	t.Parallel()
	got := mustCall(t, "shell.exec", Env{Cwd: t.TempDir()}, `{"cmd":"sleep 30 >/dev/null 2>&1 & echo $!"}`)
	if got["timed_out"] != false || got["exit_code"] != float64(0) {
		t.Errorf("result = %v", got)
	}
	waitGone(t, pidFrom(t, got["stdout"].(string)))
}

// TestShellExecEscapedHolderBounded: a process that leaves the group with
// setsid and keeps stdout open cannot stall the call past pipeGrace.
func TestShellExecEscapedHolderBounded(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("SKIP: no /usr/bin/setsid on this machine")
	}
	start := time.Now()
	got := mustCall(t, "shell.exec", Env{Cwd: t.TempDir()}, `{"cmd":"setsid sleep 30 & echo $!"}`)
	if el := time.Since(start); el > pipeGrace+2*time.Second {
		t.Errorf("took %v with an escaped process holding stdout", el)
	}
	pid := pidFrom(t, got["stdout"].(string))
	syscall.Kill(pid, syscall.SIGKILL) // it escaped us by design; clean up
	if got["exit_code"] != float64(0) || got["timed_out"] != false {
		t.Errorf("result = %v", got)
	}
}

func TestShellExecCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		code abi.Code
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}, abi.ECANCELED},
		{"caller deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, abi.ETIMEDOUT},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pidfile := filepath.Join(dir, tt.name+".pid")
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := call(t, ctx, "shell.exec", Env{Cwd: dir},
				jsonArgs(t, map[string]any{"cmd": "sleep 30 & echo $! > '" + pidfile + "'; sleep 30"}))
			wantErr(t, err, tt.code, "shell.exec: ")
			if el := time.Since(start); el > 3*time.Second {
				t.Errorf("took %v after cancel", el)
			}
			data, rerr := os.ReadFile(pidfile)
			if rerr != nil {
				t.Fatal(rerr)
			}
			waitGone(t, pidFrom(t, string(data)))
		})
	}
}

// TestShellExecHugeOutput: 10 MiB on each stream must finish, keep the
// head and cost memory bounded by MaxOutput, not by the output.
func TestShellExecHugeOutput(t *testing.T) {
	// Not parallel: the allocation figure must be this test's own.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	const max = 64 << 10
	raw, err := Call(context.Background(), "shell.exec", Env{Cwd: t.TempDir(), MaxOutput: max}, json.RawMessage(
		`{"cmd":"head -c 10485760 /dev/zero; head -c 10485760 /dev/zero | tr '\\0' e >&2; echo done >&2","timeout":30}`))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v", el)
	}
	out, errOut := got["stdout"].(string), got["stderr"].(string)
	if len(out) != max || strings.Trim(out, "\x00") != "" {
		t.Errorf("stdout: %d bytes, want %d NULs", len(out), max)
	}
	if len(errOut) != max || strings.Trim(errOut, "e") != "" {
		t.Errorf("stderr: %d bytes, want the first %d", len(errOut), max)
	}
	if got["truncated"] != true || got["exit_code"] != float64(0) {
		t.Errorf("truncated = %v, exit_code = %v", got["truncated"], got["exit_code"])
	}
	// 20 MiB went through; keeping it would allocate at least that. What
	// is allocated grows with max only: the kept heads, copy buffers and
	// the JSON result, where a NUL escapes to 6 bytes and the encoder's
	// buffers grow by doubling (about 4 MiB here).
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MiB", float64(alloc)/(1<<20))
	if alloc > 10<<20 {
		t.Errorf("allocated %d MiB for 20 MiB of output", alloc>>20)
	}
}

func pidFrom(t *testing.T, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || pid <= 1 {
		t.Fatalf("no pid in %q", s)
	}
	return pid
}

// waitGone waits until pid is dead. A zombie counts as dead: once sh is
// killed its orphans belong to pid 1, which in a container may never reap
// them.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		s := string(data)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X') {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("pid %d still alive: %s", pid, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
