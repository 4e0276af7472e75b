package t

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rootOwnedFile writes a root-owned 0644 file outside the tree: what a
// symlink planted by the user points a root process at.
func rootOwnedFile(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileIs(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != want {
		t.Errorf("%s is now %q (%v), want %q", p, b, err, want)
	}
}

// Issue 15, defect 2: root running another user's model object one-shot
// appended to its .d/log and rewrote its .d/native through that user's
// symlinks, and sent root's credential to that user's base_url. Root now
// refuses the object (EACCES, exit 13) before reading a key or writing a
// byte; the provider never hears from it.
func TestSecurityOneShotForeignModel(t *testing.T) {
	w := newRootWorld(t, "ctxt15a")
	fake, auths := recordingFake(t, fakeStep{Text: "stolen"})
	log := rootOwnedFile(t, w.base, "rootlog")
	native := rootOwnedFile(t, w.base, "rootnative")
	obj := writeModel(t, w.home, "evil/m", map[string]string{
		"id": "m\n", "driver": "openai-chat\n", "session": "none\n",
		"default": "base_url=" + fake.srv.URL + "/v1\nauth=required\n",
	})
	for name, target := range map[string]string{"log": log, "native": native} {
		if err := os.Symlink(target, filepath.Join(obj+".d", name)); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, w.home, w.a)
	r := run(t, runOpts{env: []string{"EVIL_API_KEY=sk-root-ctxt15"}}, obj, "hello")
	if r.code != 13 || !strings.Contains(r.stdout, `"EACCES"`) {
		t.Errorf("root ran the user's model: want EACCES exit 13, got\n%s", r)
	}
	if got := auths(); len(got) != 0 {
		t.Errorf("the user's endpoint got %d requests (Authorization %q)", len(got), got)
	}
	fileIs(t, log, "precious\n")
	fileIs(t, native, "precious\n")

	// The user running their own model is theirs to do: it runs, and the
	// .d/log symlink is still never written through (their process could
	// not write root's file anyway; the runner does not even try).
	r = runAs(t, w.a, runOpts{env: []string{"EVIL_API_KEY=sk-user-ctxt15"}}, obj, "hello")
	if r.code != 0 || len(auths()) != 1 {
		t.Errorf("the owner could not run their own model: %s (requests %d)", r, len(auths()))
	}
	fileIs(t, log, "precious\n")
	fileIs(t, native, "precious\n")

	// Control: root runs the system echo model, which is root's; its log
	// gets the line.
	mustOK(t, run(t, runOpts{}, filepath.Join(w.root, "model/debug/echo"), "hi"))
	if b, _ := os.ReadFile(filepath.Join(w.root, "model/debug/echo.d/log")); !strings.Contains(string(b), "status=ok") {
		t.Errorf("root's own run was not logged: %q", b)
	}
}

// Issue 15, defect 3: a .d/default that cannot be read (a directory, a
// FIFO, too large, unreadable) was silently ignored and the key went to the
// driver's public default endpoint. Any unreadable or invalid steering
// file is now an error before anything is sent, and a FIFO never blocks.
func TestSecurityUnreadableSteeringFile(t *testing.T) {
	cases := []struct {
		name  string
		plant func(p string) error
		root  bool // only meaningful as a non-root user
	}{
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, false},
		{"fifo", func(p string) error { return unix.Mkfifo(p, 0o644) }, false},
		{"too large", func(p string) error {
			return os.WriteFile(p, []byte("base_url=http://127.0.0.1:9/v1\n"+strings.Repeat("#\n", 40000)), 0o644)
		}, false},
		{"unreadable", func(p string) error {
			if err := os.WriteFile(p, []byte("base_url=http://127.0.0.1:9/v1\n"), 0o644); err != nil {
				return err
			}
			return os.Chmod(p, 0)
		}, true},
		{"dangling symlink", func(p string) error { return os.Symlink("/nonexistent/default", p) }, false},
	}
	for _, c := range cases {
		for _, file := range []string{"default", "cap"} {
			t.Run(c.name+" "+file, func(t *testing.T) {
				a := actor{home: os.Getenv("HOME")}
				if c.root && os.Geteuid() == 0 {
					a = attacker(t, "ctxt15a")
				}
				base := publicDir(t, a)
				root := filepath.Join(base, "ctx")
				mustOK(t, runAs(t, a, runOpts{}, applet("ctx"), "init", "--root", root, "--runner", applet("cortexfs-object-runner")))
				obj := writeModel(t, root, "openai/priv", map[string]string{"id": "priv\n", "driver": "openai-chat\n", "session": "none\n",
					"default": "auth=required\n", "cap": "chat\n"})
				os.Remove(filepath.Join(obj+".d", file))
				if err := c.plant(filepath.Join(obj+".d", file)); err != nil {
					t.Fatal(err)
				}
				chownTree(t, base, a)
				r := runAs(t, a, runOpts{env: []string{"OPENAI_API_KEY=sk-private-endpoint-key"}, timeout: 20 * time.Second}, obj, "hello")
				if r.code != 2 && r.code != 13 {
					t.Errorf("want EINVAL (2) or EACCES (13), got\n%s", r)
				}
				if strings.Contains(r.stdout, "EHOSTDOWN") || strings.Contains(r.stdout, "api.openai.com") {
					t.Errorf("the run went to the public endpoint:\n%s", r)
				}
			})
		}
	}
	_ = syscall.Getuid
}
