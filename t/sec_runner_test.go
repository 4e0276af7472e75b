package t

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startRunner starts an object with stdin a pipe the test holds open and
// never writes (so a runner that reads it blocks), collecting output.
func startRunner(t *testing.T, obj string, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer, chan error) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.Close() })
	cmd := exec.Command(obj, args...)
	var so, se lockedBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, &so, &se, done
}

func waitExit(t *testing.T, what string, done chan error, d time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: the runner did not exit within %v", what, d)
	}
}

// Issue 15, defect 8: a FIFO control file blocked the runner (and SIGTERM
// did not help); it is now refused at once (EINVAL). A runner blocked on
// its input, or interrupted by SIGTERM, SIGINT or SIGHUP, ends with a done
// frame instead of dying without one.
func TestSecurityRunnerSignalsAndFIFOs(t *testing.T) {
	root := newRoot(t)
	echo := filepath.Join(root, "model/debug/echo")
	drv := filepath.Join(root, "model/debug/echo.d/driver")
	os.Rename(drv, drv+".real")
	if err := unix.Mkfifo(drv, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, runOpts{timeout: 20 * time.Second}, echo, "hi")
	if r.code != 2 || !strings.Contains(r.stdout, `"EINVAL"`) {
		t.Errorf("FIFO .d/driver: want EINVAL exit 2, got\n%s", r)
	}
	os.Remove(drv)
	os.Rename(drv+".real", drv)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		// Blocked reading stdin (no arguments, stdin never written).
		cmd, so, _, done := startRunner(t, echo)
		time.Sleep(300 * time.Millisecond)
		cmd.Process.Signal(sig)
		waitExit(t, sig.String()+" while reading stdin", done, 10*time.Second)
		if !strings.Contains(so.String(), `"type":"done"`) {
			t.Errorf("%v while reading stdin: no done frame:\n%s", sig, so)
		}
		// In the middle of a slow run.
		cmd, so, _, done = startRunner(t, echo, `{"messages":[{"role":"user","content":"a b c d"}],"params":{"delay_ms":"2000"}}`)
		time.Sleep(300 * time.Millisecond)
		cmd.Process.Signal(sig)
		waitExit(t, sig.String()+" during a run", done, 10*time.Second)
		if !strings.Contains(so.String(), `"status":"cancelled"`) {
			t.Errorf("%v during a run: no done cancelled frame:\n%s", sig, so)
		}
	}
}

// Issue 15, defect 8: a full disk or /dev/full on stdout exited 70 with
// nothing on stderr; it is now ENOSPC (exit 69) said on stderr.
func TestSecurityRunnerStdoutFull(t *testing.T) {
	root := newRoot(t)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("SKIP (loud): no /dev/full")
	}
	defer full.Close()
	cmd := exec.Command(filepath.Join(root, "model/debug/echo"), "hello")
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = full, &se
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 69 || !strings.Contains(se.String(), "ENOSPC") {
		t.Errorf("stdout on /dev/full: exit %d, stderr %q; want 69 and ENOSPC on stderr", code, se.String())
	}
}

// Issue 15, defect 8: ctx send to a symlink loop was EIO/70; it is ELOOP
// (exit 2). A relative CTX_PATH entry is refused (EINVAL) instead of being
// looked up in one directory and run from another.
func TestSecuritySymlinkLoopAndRelativePath(t *testing.T) {
	root := newRoot(t)
	a, b := filepath.Join(root, "model", "debug", "loopa"), filepath.Join(root, "model", "debug", "loopb")
	os.Symlink(b, a)
	os.Symlink(a, b)
	for _, c := range [][]string{{"ctx", "send", a, "hi"}, {"cortexfs-object-runner", a, "hi"}} {
		r := sh(t, c[0], c[1:]...)
		if r.code != 2 || !strings.Contains(r.stdout+r.stderr, "ELOOP") {
			t.Errorf("%s on a symlink loop: want ELOOP exit 2, got\n%s", c[0], r)
		}
	}
	fake := newFakeChat(t, fakeStep{Text: "hi"})
	root2, _ := agentRoot(t, fake, "coder", "--tool", "fs.read")
	os.WriteFile(filepath.Join(root2, "agent/coder.d/path"), []byte("tool:"+filepath.Join(root2, "tool")+"\n"), 0o644)
	r := run(t, runOpts{dir: root2}, filepath.Join(root2, "agent/coder"), "hi")
	if r.code != 2 || !strings.Contains(r.stdout+r.stderr, "EINVAL") {
		t.Errorf("relative CTX_PATH entry: want EINVAL exit 2, got\n%s", r)
	}
}
