package t

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The system projection is the tree unchanged: the same names, object
// files that read as metadata, .d/ files that read live, aliases that stay
// symlinks, and objects that execute through the kernel's shebang.
func TestMountListReadExec(t *testing.T) {
	root := publicRoot(t)
	m := startMount(t, root)
	for _, dir := range []string{"", "model", "model/debug", "model/debug/echo.d", "tool", "tool/fs.read.d", "agent", "home", "shared"} {
		want, err := lsNames(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		got, err := lsNames(m.path(dir))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ls %q through the mount = %v, %v; durable %v", dir, got, err, want)
		}
	}
	for _, f := range []string{"model/debug/echo", "model/debug/echo.d/cap", "tool/fs.read", "tool/fs.read.d/schema"} {
		if got, want := mustReadFile(t, m.path(f)), mustReadFile(t, filepath.Join(root, f)); got != want {
			t.Errorf("%s reads %q through the mount, %q durably", f, got, want)
		}
	}
	if !strings.Contains(mustReadFile(t, m.path("model/debug/echo")), "cortexfs.object=model") {
		t.Error("the model object does not read as metadata")
	}
	if l, err := os.Readlink(m.path("model/main")); err != nil || l != "debug/echo" {
		t.Errorf("model/main through the mount: %q, %v; want the alias debug/echo", l, err)
	}
	// .d/status reads the live value.
	status := filepath.Join(root, "model/debug/echo.d/status")
	for _, v := range []string{"busy", "ready"} {
		if err := os.WriteFile(status, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		eventually(t, ".d/status = "+v, func() bool {
			b, _ := os.ReadFile(m.path("model/debug/echo.d/status"))
			return string(b) == v+"\n"
		})
	}
	// Exec: the kernel runs the shebang on the mount path; the runner
	// resolves the object through the mount.
	checkEcho(t, runShell(t, m.path("model/debug/echo")+" 'hello mount'"), "hello mount")
	checkEcho(t, runShell(t, m.path("model/main")+" via-alias"), "via-alias")
	r := run(t, runOpts{stdin: `{"path":"` + filepath.Join(root, "model/debug/echo.d/id") + `"}`}, "/bin/sh", "-c", m.path("tool/fs.read"))
	if r.code != 0 || !strings.Contains(r.stdout, "debug/echo") {
		t.Errorf("tool/fs.read through the mount:\n%s", r)
	}
}

// A socket entry is a symlink to where the socket is reached: ctx send on
// the mount path and a plain connect(2) both reach cortexfsd, and the
// daemon still sees the real caller (SO_PEERCRED is not a proxy's).
func TestMountSockets(t *testing.T) {
	root := publicRoot(t)
	startDaemon(t, root)
	m := startMount(t, root)
	sock := m.path("model/debug/echo.sock")
	eventually(t, "echo.sock through the mount", func() bool { _, err := os.Stat(sock); return err == nil })
	if l, err := os.Readlink(sock); err != nil || l != filepath.Join(root, "model/debug/echo.sock") {
		t.Errorf("echo.sock is %q, %v; want a symlink to the durable socket", l, err)
	}
	checkEcho(t, sh(t, "ctx", "send", "--session", "t12", sock, "through the mount"), "through the mount")
	checkEcho(t, sh(t, "ctx", "send", "--session", "t12", m.path("model/main"), "by alias"), "by alias")
	pingThrough(t, sock)
}

// pingThrough connects to path with a plain connect(2) and pings.
func pingThrough(t *testing.T, path string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("connect %s: %v", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(`{"op":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	var f frame
	if err != nil || json.Unmarshal([]byte(line), &f) != nil || f.Type != "pong" {
		t.Fatalf("ping through %s: %q, %v", path, line, err)
	}
}

// A change of the durable tree shows without a remount: a new tool, a
// removed one, a model added by `ctx model add`.
func TestMountLiveUpdate(t *testing.T) {
	root := publicRoot(t)
	m := startMount(t, root)
	if _, err := os.Stat(m.path("tool/fresh")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("tool/fresh before it exists: %v", err) // a negative entry is now cached
	}
	names, _ := lsNames(m.path("tool")) // and so is the listing
	if slices.Contains(names, "fresh") {
		t.Fatal("listing shows fresh before it exists")
	}
	data, _ := os.ReadFile(filepath.Join(root, "tool/fs.read"))
	if err := os.WriteFile(filepath.Join(root, "tool/fresh"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	d := eventually(t, "new tool by lookup", func() bool { _, err := os.Stat(m.path("tool/fresh")); return err == nil })
	t.Logf("new tool visible by lookup after %v", d)
	eventually(t, "new tool in the listing", func() bool { n, _ := lsNames(m.path("tool")); return slices.Contains(n, "fresh") })
	os.Remove(filepath.Join(root, "tool/fresh"))
	d = eventually(t, "removed tool gone", func() bool { _, err := os.Stat(m.path("tool/fresh")); return errors.Is(err, os.ErrNotExist) })
	t.Logf("removed tool gone after %v", d)

	if _, err := os.Stat(m.path("model/acme")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("model/acme before ctx model add: %v", err)
	}
	mustOK(t, sh(t, "ctx", "model", "add", "--root", root, "acme/m1", "--driver", "openai-chat", "--base-url", "http://127.0.0.1:9/v1"))
	d = eventually(t, "model added by ctx model add", func() bool {
		b, err := os.ReadFile(m.path("model/acme/m1"))
		return err == nil && strings.Contains(string(b), "cortexfs.object=model")
	})
	t.Logf("model added by ctx model add visible after %v", d)
}

// Callers are checked per request: another user's 0700 home is EACCES
// through the projection as on the durable tree, even after its owner
// warmed the kernel's caches; every write is EROFS.
func TestMountCallerChecks(t *testing.T) {
	needRoot(t)
	a, b := ensureUser(t, "ctxt12a"), ensureUser(t, "ctxt12b")
	root := publicRoot(t)
	home := filepath.Join(root, "home", strconv.Itoa(a.UID))
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(home, "notes"), []byte("a's notes\n"), 0o644)
	os.Chown(home, a.UID, a.GID)
	os.Chown(filepath.Join(home, "notes"), a.UID, a.GID)
	m := startMount(t, root)
	asA, asB := actor{u: &a, home: "/"}, actor{u: &b, home: "/"}
	notes := m.path("home", strconv.Itoa(a.UID), "notes")
	for i := 0; i < 2; i++ { // the second round runs on warm caches
		if r := runAs(t, asA, runOpts{}, "/bin/cat", notes); r.code != 0 || r.stdout != "a's notes\n" {
			t.Fatalf("the owner cannot read its notes through the mount:\n%s", r)
		}
		for _, args := range [][]string{{"/bin/cat", notes}, {"/bin/ls", m.path("home", strconv.Itoa(a.UID))}, {"/usr/bin/stat", notes}} {
			r := runAs(t, asB, runOpts{}, args[0], args[1:]...)
			if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
				t.Errorf("%s as another user through the mount (round %d): want EACCES\n%s", args, i, r)
			}
			// The same as on the durable tree.
			dr := runAs(t, asB, runOpts{}, args[0], strings.Replace(args[1], m.mp, root, 1))
			if dr.code == 0 {
				t.Errorf("%s as another user on the durable tree succeeded: the fixture is wrong", args)
			}
		}
	}
	// Writes are EROFS, for root too, and change nothing.
	status := m.path("model/debug/echo.d/status")
	for what, op := range map[string]func() error{
		"write":  func() error { return os.WriteFile(status, []byte("x\n"), 0o644) },
		"create": func() error { return os.WriteFile(m.path("tool/new"), nil, 0o755) },
		"mkdir":  func() error { return os.Mkdir(m.path("shared/x"), 0o755) },
		"remove": func() error { return os.Remove(m.path("tool/fs.read")) },
		"rename": func() error { return os.Rename(m.path("tool/fs.read"), m.path("tool/y")) },
		"chmod":  func() error { return os.Chmod(m.path("tool/fs.read"), 0o700) },
		"symlink": func() error {
			return os.Symlink("x", m.path("model/alias"))
		},
		"truncate": func() error { return os.Truncate(status, 0) },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s through the mount: %v, want EROFS", what, err)
		}
	}
	if got := mustReadFile(t, filepath.Join(root, "model/debug/echo.d/status")); got != "ready\n" {
		t.Errorf("durable status changed to %q", got)
	}
	if r := runAs(t, asA, runOpts{}, "/bin/sh", "-c", "echo x >> "+notes); r.code == 0 || !strings.Contains(r.stderr, "Read-only") {
		t.Errorf("the owner appending to its own file through the mount: want EROFS\n%s", r)
	}
}

// A busy mount refuses a plain unmount (EBUSY, still serving) and is
// detached with --lazy; the server exits once its last user lets go.
func TestMountUnmountBusy(t *testing.T) {
	root := publicRoot(t)
	m := startMount(t, root)
	reader := exec.Command("/bin/sleep", "300")
	reader.Dir = m.path("tool") // a current directory inside keeps it busy
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	defer reader.Process.Kill()
	r := sh(t, "ctx-mount", "-u", m.mp)
	if r.code != 69 || !strings.Contains(r.stderr, "EBUSY") || !strings.Contains(r.stderr, "--lazy") {
		t.Fatalf("unmount of a busy mount: want EBUSY (69) naming --lazy\n%s", r)
	}
	if !isMounted(m.mp) {
		t.Fatal("the busy mount is gone after a refused unmount")
	}
	if _, err := os.ReadFile(m.path("model/debug/echo.d/id")); err != nil {
		t.Fatalf("the mount stopped serving after a refused unmount: %v", err)
	}
	mustOK(t, sh(t, "ctx-mount", "-u", "--lazy", m.mp))
	if isMounted(m.mp) {
		t.Fatal("still mounted after -u --lazy")
	}
	reader.Process.Kill()
	reader.Wait()
	select {
	case err := <-m.done:
		if err != nil {
			t.Errorf("server exit after lazy unmount: %v\n%s", err, m.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("server still running after its last user left\n%s", m.stderr)
	}
}

// A server killed with SIGKILL leaves a dead mount; ctx doctor reports it
// with the command that clears it, and that command does.
func TestMountServerKilledDoctor(t *testing.T) {
	root := publicRoot(t)
	m := startMount(t, root)
	m.cmd.Process.Kill()
	<-m.done
	if _, err := os.Stat(m.path("tool")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}
	r := sh(t, "ctx", "doctor", "--root", root, "--json")
	var rep struct {
		Checks []struct {
			Check, Path, Detail string
			OK                  bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	var found bool
	for _, c := range rep.Checks {
		if c.Check == "mount" && c.Path == m.mp {
			found = true
			if c.OK || !strings.Contains(c.Detail, "dead") || !strings.Contains(c.Detail, "ctx-mount -u "+m.mp) {
				t.Errorf("doctor on the dead mount: %+v", c)
			}
		}
	}
	if !found || r.code != 1 {
		t.Fatalf("doctor does not fail on the dead mount:\n%s", r)
	}
	mustOK(t, sh(t, "ctx-mount", "-u", m.mp))
	if isMounted(m.mp) {
		t.Fatal("the dead mount is still there after ctx-mount -u")
	}
	if r := sh(t, "ctx", "doctor", "--root", root); strings.Contains(r.stdout, m.mp) {
		t.Errorf("doctor still reports the cleared mount:\n%s", r)
	}
}

// -d serves in the background: it returns once mounted, prints the pid and
// writes it to the pid file; -u makes the server exit and remove it.
func TestMountDaemonPidFile(t *testing.T) {
	needFuse(t)
	root := publicRoot(t)
	mp := publicTemp(t, "cortexfs-t12-mnt-")
	pidFile := filepath.Join(t.TempDir(), "m.pid")
	r := mustOK(t, sh(t, "ctx-mount", "-d", "--pid-file", pidFile, "--root", root, mp))
	pid, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if err != nil {
		t.Fatalf("-d printed %q", r.stdout)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); run(t, runOpts{}, applet("ctx-mount"), "-u", "--lazy", mp) })
	if !isMounted(mp) {
		t.Fatal("-d returned before the mount was up")
	}
	if got := strings.TrimSpace(mustReadFile(t, pidFile)); got != strconv.Itoa(pid) {
		t.Errorf("pid file holds %q, want %d", got, pid)
	}
	if _, err := os.ReadFile(filepath.Join(mp, "model/debug/echo")); err != nil {
		t.Fatal(err)
	}
	mustOK(t, sh(t, "ctx-mount", "-u", mp))
	eventually(t, "background server exits", func() bool { return syscall.Kill(pid, 0) != nil })
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file left behind: %v", err)
	}
	// A failure to mount is reported by -d itself.
	r = sh(t, "ctx-mount", "-d", "--pid-file", pidFile, "--root", root, filepath.Join(mp, "missing"))
	if r.code == 0 || !strings.Contains(r.stderr, "ENOENT") {
		t.Errorf("-d on a missing mountpoint:\n%s", r)
	}
}

// ctx-mount --uid UID, run by root, is a projection for one user: that
// user (and root) may use it; any other user gets EACCES on every entry,
// even one the durable tree would show them — also right after the user's
// own reads, which used to warm the kernel's caches so that it answered
// the other user's stat and read itself, never asking the server.
func TestMountForOneUID(t *testing.T) {
	needRoot(t)
	a, b := ensureUser(t, "ctxt12a"), ensureUser(t, "ctxt12b")
	root := publicRoot(t)
	m := startMount(t, root, "--uid", strconv.Itoa(a.UID))
	asA, asB := actor{u: &a, home: "/"}, actor{u: &b, home: "/"}
	echo := m.path("model/debug/echo")
	if r := runAs(t, asA, runOpts{}, "/bin/cat", echo); r.code != 0 || !strings.Contains(r.stdout, "cortexfs.object=model") {
		t.Fatalf("the mount's own uid cannot read an object:\n%s", r)
	}
	for _, args := range [][]string{{"/bin/cat", echo}, {"/bin/ls", m.path("tool")}, {"/usr/bin/stat", echo}} {
		if r := runAs(t, asB, runOpts{}, args[0], args[1:]...); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("%s as another uid through a --uid %d mount: want EACCES\n%s", args, a.UID, r)
		}
		// The control: the durable tree shows it to that user.
		if r := runAs(t, asB, runOpts{}, args[0], strings.Replace(args[1], m.mp, root, 1)); r.code != 0 {
			t.Errorf("%s as uid %d on the durable tree failed: the fixture is wrong\n%s", args, b.UID, r)
		}
	}
	if _, err := os.ReadFile(echo); err != nil {
		t.Errorf("root through a --uid mount: %v", err)
	}
	// Uncached is still whole: the user executes an object through it.
	if r := runAs(t, asA, runOpts{}, echo, "hi"); r.code != 0 || !strings.Contains(r.stdout, `"type":"done"`) {
		t.Errorf("the mount's own uid executing model/debug/echo through it:\n%s", r)
	}
}
