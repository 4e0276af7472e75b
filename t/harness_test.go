// Package t holds the end-to-end tests: the binary is built once, installed
// with hardlinks into a temp prefix, and driven through its applet names.
package t

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	repoRoot string // the checkout
	binPath  string // the built binary (make build, or $CORTEXFS_BIN)
	prefix   string // temp install prefix; applets live in prefix/bin
)

func TestMain(m *testing.M) {
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "t: getwd:", err)
		return 1
	}
	repoRoot = filepath.Dir(wd)
	binPath = os.Getenv("CORTEXFS_BIN")
	if binPath == "" {
		cmd := exec.Command("make", "-s", "-C", repoRoot, "build")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "t: make build failed:", err)
			return 1
		}
		binPath = filepath.Join(repoRoot, "build", "cortexfs")
	}
	prefix, err = os.MkdirTemp("", "cortexfs-t-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "t:", err)
		return 1
	}
	defer os.RemoveAll(prefix)
	if err := os.Chmod(prefix, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "t:", err)
		return 1
	}
	out, err := exec.Command(binPath, "install", filepath.Join(prefix, "bin")).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "t: install into temp prefix failed: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// applet is the installed path of an applet name.
func applet(name string) string { return filepath.Join(prefix, "bin", name) }

// result is what one process run produced.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runOpts tunes one process run.
type runOpts struct {
	env     []string // added to the environment
	stdin   string
	dir     string
	timeout time.Duration
}

// run executes path with args and returns its output and exit code; a
// failure to start at all fails the test.
func run(t testing.TB, o runOpts, path string, args ...string) result {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Dir = o.dir
	cmd.Stdin = strings.NewReader(o.stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run %s %q: %v", path, args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("run %s %q: timed out after %v\n%s", path, args, o.timeout, r)
	}
	return r
}

// sh runs an applet by name with default options.
func sh(t testing.TB, name string, args ...string) result {
	t.Helper()
	return run(t, runOpts{}, applet(name), args...)
}

// mustOK fails the test unless r exited 0.
func mustOK(t testing.TB, r result) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("want exit 0, got:\n%s", r)
	}
	return r
}

// runShell runs a command line through /bin/sh, for kernel-level behaviour
// (shebangs, exec permission) that only a real shell exec shows.
func runShell(t testing.TB, line string) result {
	t.Helper()
	return run(t, runOpts{}, "/bin/sh", "-c", line)
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
