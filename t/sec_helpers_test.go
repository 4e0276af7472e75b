package t

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// actor is who a security test runs a command as: a second local account
// when the test runs as root (the seeds' multi-user model), else the
// current user.
type actor struct {
	u    *testUser // nil: the current user
	home string    // HOME for the actor's processes
}

func (a actor) uid() int {
	if a.u == nil {
		return os.Getuid()
	}
	return a.u.UID
}

func (a actor) gid() int {
	if a.u == nil {
		return os.Getgid()
	}
	return a.u.GID
}

// attacker returns the second user (root runs) or the current user.
func attacker(t *testing.T, name string) actor {
	t.Helper()
	if os.Geteuid() != 0 {
		return actor{home: os.Getenv("HOME")}
	}
	u := ensureUser(t, name)
	return actor{u: &u, home: "/"}
}

// publicDir is a fresh directory everybody can traverse, owned by a (so
// the actor can build a tree in it).
func publicDir(t *testing.T, a actor) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cortexfs-sec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, a.uid(), a.gid()); err != nil {
		t.Fatal(err)
	}
	return d
}

// runAs is run as the actor, with an environment built from scratch: only
// PATH, LANG, TERM, HOME and o.env (nothing of the test process leaks in).
func runAs(t testing.TB, a actor, o runOpts, path string, args ...string) result {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TERM=dumb", "HOME=" + a.home}, o.env...)
	cmd.Dir = o.dir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Stdin = strings.NewReader(o.stdin)
	if a.u != nil {
		cmd.SysProcAttr = a.u.Cred()
	}
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
		t.Fatalf("run %s %q as uid %d: %v", path, args, a.uid(), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("run %s %q: timed out after %v\n%s", path, args, o.timeout, r)
	}
	return r
}

// recordingFake is a fakeChat whose server also records each request's
// Authorization header, to prove a credential was really in play.
func recordingFake(t testing.TB, steps ...fakeStep) (*fakeChat, func() []string) {
	f := &fakeChat{steps: steps}
	var mu sync.Mutex
	var auths []string
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		f.serve(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auths...)
	}
}

// writeModel writes model/<id> under tier with the given control files
// (mode 0644, the object 0755) and the installed runner as interpreter.
func writeModel(t testing.TB, tier, id string, ctl map[string]string) string {
	t.Helper()
	obj := filepath.Join(tier, "model", filepath.FromSlash(id))
	if err := os.MkdirAll(obj+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(obj, []byte("#!"+applet("cortexfs-object-runner")+"\ncortexfs.object=model\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range ctl {
		if err := os.WriteFile(filepath.Join(obj+".d", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return obj
}

// grepTree returns every file under dir whose content holds needle.
func grepTree(t *testing.T, dir, needle string) []string {
	t.Helper()
	var hits []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(needle)) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// chownTree gives everything under dir to the actor, as if they had made it.
func chownTree(t *testing.T, dir string, a actor) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, a.uid(), a.gid())
		}
		return nil
	})
}

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	return !zombie(pid)
}
