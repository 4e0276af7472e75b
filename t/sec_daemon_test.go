package t

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// rootWorld is a tree served by a root cortexfsd, with a second user who
// owns home/<uid> (their tier, as the seeds intend) and plays the attacker.
type rootWorld struct {
	base, root, home string
	a                actor
	d                *daemon
}

func newRootWorld(t *testing.T, user string) *rootWorld {
	t.Helper()
	needRoot(t)
	w := &rootWorld{a: attacker(t, user)}
	w.base = publicDir(t, actor{})
	w.root = filepath.Join(w.base, "ctx")
	mustOK(t, sh(t, "ctx", "init", "--root", w.root, "--runner", applet("cortexfs-object-runner")))
	w.home = filepath.Join(w.root, "home", strconv.Itoa(w.a.uid()))
	if err := os.MkdirAll(w.home, 0o755); err != nil {
		t.Fatal(err)
	}
	chownTree(t, w.home, w.a)
	return w
}

func (w *rootWorld) start(t *testing.T) { w.d = startDaemon(t, w.root) }

// as runs a command as the attacker.
func (w *rootWorld) as(t *testing.T, path string, args ...string) result {
	t.Helper()
	return runAs(t, w.a, runOpts{}, path, args...)
}

// send is `ctx send --session S model/debug/echo TEXT` as the attacker.
func (w *rootWorld) send(t *testing.T, session string, text ...string) result {
	t.Helper()
	args := append([]string{"send", "--session", session, filepath.Join(w.root, "model/debug/echo")}, text...)
	return w.as(t, applet("ctx"), args...)
}

// victimDir is a root-owned 0755 directory outside the tree with one
// root-owned 0755 subdirectory "sub": what a confused deputy must not hand
// to the attacker.
func victimDir(t *testing.T, base string) string {
	t.Helper()
	v := filepath.Join(base, "victim")
	for _, d := range []string{v, filepath.Join(v, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// victimIntact fails unless the victim directory still holds only sub/,
// both root-owned 0755.
func victimIntact(t *testing.T, v string) {
	t.Helper()
	var names []string
	es, _ := os.ReadDir(v)
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "sub" {
		t.Errorf("victim directory now holds %v", names)
	}
	for _, d := range []string{v, filepath.Join(v, "sub")} {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 || st.Gid != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s is now %v owned by %d:%d (want 0755 root:root)", d, fi.Mode(), st.Uid, st.Gid)
		}
	}
}

// Issue 15, defect 1: root cortexfsd followed the user's symlink when it
// created a session directory, then chmod 0700 and chowned whatever it
// landed on to the user. A symlink anywhere on the way is now refused
// (ELOOP) and nothing outside the user's tier changes; without it the same
// send works and the session is the user's.
func TestSecurityDaemonSessionDirSymlink(t *testing.T) {
	w := newRootWorld(t, "ctxt15a")
	w.start(t)
	victim := victimDir(t, w.base)
	links := []struct{ at, to string }{
		{"session/model/debug/echo", victim},                  // the model level
		{"session/model/debug", filepath.Join(w.base)},        // a level up: <base>/echo/… would be created
		{"session", filepath.Join(victim, "sub", "..", "..")}, // the top of the user's sessions
	}
	for _, l := range links {
		p := filepath.Join(w.home, l.at)
		mustOK(t, w.as(t, "/bin/rm", "-rf", filepath.Join(w.home, "session")))
		mustOK(t, w.as(t, "/bin/mkdir", "-p", filepath.Dir(p)))
		mustOK(t, w.as(t, "/bin/ln", "-sfn", l.to, p))
		for _, session := range []string{"sub", "victim", "fresh"} {
			r := w.send(t, session, "hi")
			if r.code == 0 || !strings.Contains(r.stdout, `"ELOOP"`) {
				t.Errorf("symlink at %s, session %s: want ELOOP refusal, got\n%s", l.at, session, r)
			}
		}
		victimIntact(t, victim)
		if _, err := os.Lstat(filepath.Join(w.base, "echo")); err == nil {
			t.Errorf("symlink at %s: the daemon created %s/echo", l.at, w.base)
		}
		mustOK(t, w.as(t, "/bin/rm", "-f", p))
	}
	// Control: without the symlink the same send works and the session
	// directory and files are the user's, 0700/0600.
	r := w.send(t, "sub", "hello")
	if r.code != 0 || !strings.Contains(r.stdout, "hello") {
		t.Fatalf("send without a symlink: %s", r)
	}
	dir := filepath.Join(w.home, "session/model/debug/echo/sub")
	for _, p := range []string{dir, filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "sends.jsonl")} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if int(st.Uid) != w.a.uid() || fi.Mode().Perm() != want {
			t.Errorf("%s: %v owned by %d, want %v owned by %d", p, fi.Mode(), st.Uid, want, w.a.uid())
		}
	}
}
