package t

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// treeSnapshot is every entry below dir (dir included) with its type,
// owner, mode, inode and, for a file, content: a victim is unchanged only
// if this is.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			out[p] = "error: " + err.Error()
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		v := fmt.Sprintf("%v uid=%d gid=%d ino=%d", fi.Mode(), st.Uid, st.Gid, st.Ino)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			v += fmt.Sprintf(" %q", b)
		}
		out[p] = v
		return nil
	})
	return out
}

// raceFor runs body until d is over or n iterations are done, and returns
// how many ran.
func raceFor(d time.Duration, n int, body func(i int)) int {
	i := 0
	for end := time.Now().Add(d); i < n && time.Now().Before(end); i++ {
		body(i)
	}
	return i
}

// untilDoneOrRefused reads one send's frames: up to its done, or the lone
// error frame (no run) of a send refused before its run started. It
// returns that last frame.
func untilDoneOrRefused(c *conn) frame {
	for {
		f := c.next()
		if f.Type == "done" || f.Type == "error" && f.Run == "" {
			return f
		}
	}
}

// plantSwap makes name.swap beside the real entry name, a symlink of the
// actor's to target, and starts exchanging the two (swapLoop).
func plantSwap(t *testing.T, w *rootWorld, name, target string) func() {
	t.Helper()
	mustOK(t, w.as(t, "/bin/ln", "-sfn", target, name+".swap"))
	return swapLoop(t, w.a, name, name+".swap", 200*time.Microsecond)
}

// Issue 15, beyond the list: symlink races on the paths privileged
// processes touch, looped while they work. A second user exchanges a
// directory of their own on the path with a symlink to a root-owned victim
// (renameat2 RENAME_EXCHANGE, so every state is a real one) while root
// cortexfsd creates session directories for their sends, a root one-shot
// run of their model logs to its .d/, and root's ctx init rebuilds a tree
// they own. Each victim is unchanged afterwards: owner, mode, inode,
// content, and no new entries.
func TestSecuritySymlinkRaces(t *testing.T) {
	t.Run("daemon session directories", func(t *testing.T) {
		w := newRootWorld(t, "ctxt15d")
		w.start(t)
		victim := victimDir(t, w.base)
		before := treeSnapshot(t, w.base+"/victim")
		sessions := filepath.Join(w.home, "session/model/debug")
		mustOK(t, w.as(t, "/bin/mkdir", "-p", filepath.Join(sessions, "echo")))
		cs := dialAs(t, w.a, w.d.sock, 1)
		if len(cs) != 1 {
			t.Fatal("the second user cannot connect to the daemon")
		}
		c := &conn{t: t, c: cs[0], rd: bufio.NewReaderSize(cs[0], 64<<10)}
		t.Cleanup(func() { cs[0].Close() })
		// Two phases, one swap each (a swap below another would act
		// inside the victim): echo/ against the victim itself, so that a
		// session would be created (and handed over) in the victim, and
		// session "sub" is victim/sub; then debug/ against the base, so
		// that debug/echo/… would be created as <base>/echo/….
		for phase, sw := range []struct{ at, to string }{{filepath.Join(sessions, "echo"), victim}, {sessions, w.base}} {
			stop := plantSwap(t, w, sw.at, sw.to)
			ok, refused := 0, 0
			n := raceFor(2*time.Second, 200, func(i int) {
				// A fresh name each time: the daemon keeps a session it
				// opened, so only a new one walks the path again.
				session := fmt.Sprintf("s%d-%d", phase, i)
				if i == 0 {
					session = "sub" // the victim's own subdirectory, once
				}
				c.send(sendReq(fmt.Sprintf("m%d-%d", phase, i), session, "hi"))
				if f := untilDoneOrRefused(c); f.Status == "ok" {
					ok++
				} else {
					refused++
				}
			})
			stop()
			t.Logf("swapping %s: %d sends, %d ok, %d refused", filepath.Base(sw.at), n, ok, refused)
		}
		victimIntact(t, victim)
		sameSnapshot(t, "victim", before, treeSnapshot(t, w.base+"/victim"))
		if _, err := os.Lstat(filepath.Join(w.base, "echo")); err == nil {
			t.Errorf("the daemon created %s/echo", w.base)
		}
	})

	t.Run("one-shot model log", func(t *testing.T) {
		w := newRootWorld(t, "ctxt15d")
		vdir := filepath.Join(w.base, "rootctl")
		if err := os.Mkdir(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"log", "native", "status"} {
			rootOwnedFile(t, vdir, f)
		}
		obj := writeModel(t, w.home, "evil/m", map[string]string{"id": "m\n", "driver": "debug\n", "session": "none\n", "log": "", "native": ""})
		chownTree(t, w.home, w.a)
		before := treeSnapshot(t, vdir)
		stop := plantSwap(t, w, obj+".d", vdir)
		ran := 0
		n := raceFor(4*time.Second, 150, func(int) {
			if r := run(t, runOpts{timeout: 10 * time.Second}, obj, "hello"); r.code == 0 {
				ran++
			}
		})
		stop()
		t.Logf("%d root runs of the user's model, %d ran", n, ran)
		if ran > 0 {
			t.Errorf("root ran the user's model %d times", ran)
		}
		sameSnapshot(t, "root's control files", before, treeSnapshot(t, vdir))
	})

	t.Run("ctx init", func(t *testing.T) {
		w := newRootWorld(t, "ctxt15d")
		tree := filepath.Join(publicDir(t, w.a), "ctx") // a tree the user owns, which root initialises
		mustOK(t, w.as(t, applet("ctx"), "init", "--root", tree, "--runner", applet("cortexfs-object-runner")))
		vdir := filepath.Join(w.base, "rootdir")
		if err := os.Mkdir(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		rootOwnedFile(t, vdir, "keep")
		before := treeSnapshot(t, vdir)
		stops := []func(){ // not nested: a swap below another would act inside vdir
			plantSwap(t, w, filepath.Join(tree, "tool"), vdir),
			plantSwap(t, w, filepath.Join(tree, "model/debug/echo.d"), vdir),
		}
		n := raceFor(4*time.Second, 150, func(int) {
			run(t, runOpts{timeout: 10 * time.Second}, applet("ctx"), "init", "--root", tree, "--runner", applet("cortexfs-object-runner"))
		})
		for _, stop := range stops {
			stop()
		}
		t.Logf("%d root ctx init runs", n)
		sameSnapshot(t, "the root-owned directory", before, treeSnapshot(t, vdir))
	})

	// Root installs a plugin from a directory the user owns into the
	// system tier (ctx plugin install): the user exchanges a file of it,
	// then the directory itself, with symlinks to what only root may read.
	// Nothing of root's may land in the tier, where every user reads it.
	t.Run("plugin install", func(t *testing.T) {
		w := newRootWorld(t, "ctxt15d")
		secret := "ROOT-ONLY-" + fmt.Sprint(time.Now().UnixNano())
		rootDir := filepath.Join(w.base, "rootplugin") // root's own plugin, 0700
		if err := os.MkdirAll(filepath.Join(rootDir, "bin"), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(rootDir, "manifest.toml"), processManifest(`"plain"`, ""), 0o600)
		writeFile(t, filepath.Join(rootDir, "bin", "data.txt"), secret, 0o600)
		writeFile(t, filepath.Join(w.base, "shadow"), secret, 0o600)

		src := filepath.Join(publicDir(t, w.a), "plug")
		if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(src, "manifest.toml"), processManifest(`"plain"`, ""), 0o644)
		writeFile(t, filepath.Join(src, "bin", "data.txt"), "mine\n", 0o644)
		chownTree(t, src, w.a)
		installed := filepath.Join(w.root, "plugins", "wc")
		leaked := func() string {
			var hit string
			filepath.Walk(installed, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
						hit = p
					}
				}
				return nil
			})
			return hit
		}
		// The control: without a swap, root installs the user's plugin.
		mustOK(t, run(t, runOpts{timeout: 10 * time.Second}, applet("ctx"), "plugin", "install", "--replace", "--root", w.root, src))
		if b, err := os.ReadFile(filepath.Join(installed, "bin", "data.txt")); err != nil || string(b) != "mine\n" {
			t.Fatalf("the control install: data.txt %q, %v", b, err)
		}
		// The file's partner lives outside the plugin directory, so that
		// the directory holds no symlink whenever the file is in place.
		outside := filepath.Join(publicDir(t, w.a), "link")
		mustOK(t, w.as(t, "/bin/ln", "-s", filepath.Join(w.base, "shadow"), outside))
		for i, sw := range []struct{ at, to string }{
			{filepath.Join(src, "bin", "data.txt"), outside},
			{src, rootDir},
		} {
			var stop func()
			if i == 0 {
				stop = swapLoop(t, w.a, sw.at, sw.to, 200*time.Microsecond)
			} else {
				stop = plantSwap(t, w, sw.at, sw.to)
			}
			ok := 0
			n := raceFor(3*time.Second, 150, func(int) {
				if r := run(t, runOpts{timeout: 10 * time.Second}, applet("ctx"), "plugin", "install", "--replace",
					"--root", w.root, src); r.code == 0 {
					ok++
				}
			})
			stop()
			t.Logf("swapping %s: %d root installs, %d ok", filepath.Base(sw.at), n, ok)
			if p := leaked(); p != "" {
				t.Fatalf("root's install copied a root-only file into the system tier: %s", p)
			}
		}
	})
}
