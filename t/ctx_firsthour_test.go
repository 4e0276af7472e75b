package t

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 16, "the first hour", ctx side: no silent traps. A tree made
// without --runner runs; what ctx doctor knows, ctx ls and ctx status show;
// an agent naming what does not exist is refused; cortexfsd refuses a
// wrong root; a new agent is stopped, not dead; init and doctor are quiet.

// firstLine is the #! line of an object file.
func firstLine(t *testing.T, p string) string {
	t.Helper()
	line, _, _ := strings.Cut(mustReadFile(t, p), "\n")
	return line
}

// lsLine is the line of ctx ls naming rel, "" when there is none.
func lsLine(t *testing.T, root, rel string) string {
	t.Helper()
	out := mustOK(t, sh(t, "ctx", "ls", "--root", root)).stdout
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == rel {
			return l
		}
	}
	t.Fatalf("ctx ls does not list %s:\n%s", rel, out)
	return ""
}

// brokenCount is ctx status --json's "broken".
func brokenCount(t *testing.T, root string) int {
	t.Helper()
	r := mustOK(t, sh(t, "ctx", "status", "--root", root, "--json"))
	var st struct{ Broken int }
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("ctx status --json: %v\n%s", err, r)
	}
	return st.Broken
}

// ctx init without --runner points shebangs at the cortexfs-object-runner
// beside the running binary, and objects run; a binary with no runner
// beside it (and none in /usr/bin) refuses and writes nothing.
func TestFirstHourInitRunnerBesideBinary(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	mustOK(t, sh(t, "ctx", "init", "--root", root))
	if got, want := firstLine(t, filepath.Join(root, "tool/fs.read")), "#!"+applet("cortexfs-object-runner"); got != want {
		t.Errorf("ctx init without --runner wrote %q, want %q", got, want)
	}
	checkEcho(t, run(t, runOpts{}, filepath.Join(root, "model/debug/echo"), "hello"), "hello")

	if _, err := os.Stat("/usr/bin/cortexfs-object-runner"); err == nil {
		t.Skip("/usr/bin/cortexfs-object-runner exists here: the refusal cannot be shown")
	}
	lone := filepath.Join(t.TempDir(), "ctx")
	if err := os.Link(binPath, lone); err != nil {
		b, rerr := os.ReadFile(binPath)
		must(t, rerr)
		must(t, os.WriteFile(lone, b, 0o755))
	}
	other := filepath.Join(t.TempDir(), "ctx")
	r := run(t, runOpts{}, lone, "init", "--root", other)
	msg := oneError(t, r, "ctx", "ENOENT", 1)
	for _, want := range []string{filepath.Join(filepath.Dir(lone), "cortexfs-object-runner"), "cortexfs install DIR", "--runner PATH"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not say %q: %s", want, msg)
		}
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("a refused ctx init created %s", other)
	}
}

// A tree made with a runner that does not exist is broken in ctx ls and
// ctx status; ctx init (with --runner, or without it from an installed
// binary) updates the shebangs init wrote and keeps an edited object.
func TestFirstHourInitFixesItsOwnShebangs(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	bad := "/nonexistent/bin/cortexfs-object-runner"
	mustOK(t, sh(t, "ctx", "init", "--root", root, "--runner", bad))
	if l := lsLine(t, root, "tool/fs.read"); !strings.Contains(l, "broken") || !strings.Contains(l, bad) {
		t.Errorf("ctx ls shows an object whose runner is missing as %q", l)
	}
	if n := brokenCount(t, root); n == 0 {
		t.Errorf("ctx status counts 0 broken with every runner missing")
	}
	// A user edit of one object: kept, runner and all.
	edited := filepath.Join(root, "tool/fs.write")
	must(t, os.WriteFile(edited, append([]byte(mustReadFile(t, edited)), "note=mine\n"...), 0o755))
	good := applet("cortexfs-object-runner")
	r := mustOK(t, sh(t, "ctx", "init", "--root", root, "--runner", good, "--json"))
	var out struct {
		Counts  map[string]int
		Changes []struct{ Path, Action, Reason string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("ctx init --json: %v\n%s", err, r)
	}
	if out.Counts["updated"] < 6 || out.Counts["left_alone"] != 1 {
		t.Errorf("ctx init --runner over a tree init made: counts %v, want the objects updated and the edited one left alone", out.Counts)
	}
	if got := firstLine(t, filepath.Join(root, "tool/fs.read")); got != "#!"+good {
		t.Errorf("fs.read still starts %q", got)
	}
	if got := firstLine(t, edited); got != "#!"+bad {
		t.Errorf("the edited fs.write was rewritten: %q", got)
	}
	checkEcho(t, run(t, runOpts{}, filepath.Join(root, "model/main"), "fixed"), "fixed")
	if n := brokenCount(t, root); n != 1 {
		t.Errorf("ctx status counts %d broken, want 1 (the edited fs.write)", n)
	}

	// Without --runner: a tree whose runner is gone gets the one beside ctx.
	root2 := filepath.Join(t.TempDir(), "ctx")
	mustOK(t, sh(t, "ctx", "init", "--root", root2, "--runner", bad))
	mustOK(t, sh(t, "ctx", "init", "--root", root2))
	if got := firstLine(t, filepath.Join(root2, "model/debug/echo")); got != "#!"+good {
		t.Errorf("ctx init without --runner left a missing runner: %q", got)
	}
	// And a tree whose runner works keeps it.
	before := mustReadFile(t, filepath.Join(root, "tool/fs.read"))
	mustOK(t, sh(t, "ctx", "init", "--root", root))
	if mustReadFile(t, filepath.Join(root, "tool/fs.read")) != before {
		t.Errorf("a second ctx init changed a working runner")
	}
}

// cortexfsd refuses a root that does not exist and a directory that is no
// CortexFS root, at once, with the ctx init that makes one.
func TestFirstHourCortexfsdRefusesWrongRoot(t *testing.T) {
	for _, root := range []string{filepath.Join(t.TempDir(), "nonexistent"), t.TempDir()} {
		start := time.Now()
		r := run(t, runOpts{timeout: 10 * time.Second}, applet("cortexfsd"), "--root", root)
		msg := oneError(t, r, "cortexfsd", "ENOENT", 1)
		if !strings.Contains(msg, "ctx init --root "+root) {
			t.Errorf("cortexfsd --root %s: no ctx init hint: %s", root, msg)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cortexfsd took %v to refuse", d)
		}
	}
}
