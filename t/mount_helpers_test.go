package t

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needFuse skips loudly where no FUSE mount can be made: CI is root with
// /dev/fuse; an unprivileged developer needs fusermount3.
func needFuse(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("SKIP (loud): no /dev/fuse; ctx-mount tests need FUSE (CI has it)")
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skip("SKIP (loud): not root and no fusermount3; ctx-mount tests need one of them")
		}
	}
}

// mounted is a ctx-mount serving in the foreground.
type mounted struct {
	t      *testing.T
	mp     string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan error
}

// publicTemp is a fresh directory every user may traverse.
func publicTemp(t testing.TB, pattern string) string {
	t.Helper()
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// publicRoot is `ctx init` into a root every user may traverse.
func publicRoot(t testing.TB) string {
	t.Helper()
	root := filepath.Join(publicTemp(t, "cortexfs-t12-root-"), "ctx")
	mustOK(t, sh(t, "ctx", "init", "--root", root, "--runner", applet("cortexfs-object-runner")))
	return root
}

// startMount runs `ctx-mount --root ROOT ARGS… MOUNTPOINT` in the
// foreground on a fresh mountpoint and waits until the kernel lists it.
func startMount(t *testing.T, root string, args ...string) *mounted {
	t.Helper()
	needFuse(t)
	m := &mounted{t: t, mp: publicTemp(t, "cortexfs-t12-mnt-"), stderr: &lockedBuffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(applet("ctx-mount"), append(append([]string{"--root", root}, args...), m.mp)...)
	m.cmd.Stderr = m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(m.mp) {
		select {
		case err := <-m.done:
			t.Fatalf("ctx-mount exited before mounting: %v\n%s", err, m.stderr)
		default:
		}
		if time.Now().After(deadline) {
			m.cmd.Process.Kill()
			t.Fatalf("ctx-mount did not mount %s\n%s", m.mp, m.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(m.stop)
	return m
}

// path is a path inside the mount.
func (m *mounted) path(elem ...string) string {
	return filepath.Join(append([]string{m.mp}, elem...)...)
}

// stop sends SIGTERM and expects a clean exit and no mount left behind.
func (m *mounted) stop() {
	if m.cmd.ProcessState == nil {
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-m.done:
			if err != nil {
				m.t.Errorf("ctx-mount exited uncleanly after SIGTERM: %v\n%s", err, m.stderr)
			}
		case <-time.After(20 * time.Second):
			m.cmd.Process.Kill()
			m.t.Errorf("ctx-mount ignored SIGTERM\n%s", m.stderr)
		}
	}
	if isMounted(m.mp) {
		run(m.t, runOpts{}, applet("ctx-mount"), "-u", "--lazy", m.mp)
	}
}

// isMounted reports whether a cortexfs projection is mounted at mp.
func isMounted(mp string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		for i := 6; i+1 < len(f); i++ {
			if f[i] == "-" {
				if f[4] == mp && f[i+1] == "fuse.cortexfs" {
					return true
				}
				break
			}
		}
	}
	return false
}

// eventually polls cond until it holds or a generous deadline passes, and
// returns how long it took; load must not fail a test, only a real miss.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s: not seen within 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

// lsNames is the sorted names of a directory, or nil with the error.
func lsNames(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out, nil
}
