package t

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// chmod -x of an object, and an agent naming a model or tool that does
// not exist: ctx ls says broken with the reason, ctx status counts them,
// ctx doctor fails them.
func TestFirstHourLsShowsWhatDoctorKnows(t *testing.T) {
	root := newRoot(t)
	if n := brokenCount(t, root); n != 0 {
		t.Fatalf("a fresh tree has %d broken objects", n)
	}
	must(t, os.Chmod(filepath.Join(root, "tool/fs.read"), 0o644))
	if l := lsLine(t, root, "tool/fs.read"); !strings.Contains(l, "broken") || !strings.Contains(l, "not executable") {
		t.Errorf("ctx ls shows a chmod -x object as %q", l)
	}
	if n := brokenCount(t, root); n != 1 {
		t.Errorf("ctx status counts %d broken, want 1", n)
	}
	doc := sh(t, "ctx", "doctor", "--root", root)
	if doc.code != 1 || !strings.Contains(doc.stdout, "FAIL object") || !strings.Contains(doc.stdout, "fs.read") {
		t.Errorf("ctx doctor on a chmod -x object:\n%s", doc)
	}
	must(t, os.Chmod(filepath.Join(root, "tool/fs.read"), 0o755))

	mustOK(t, sh(t, "ctx", "agent", "create", "carl", "--root", root, "--model", "127.0.0.1/tiny-9", "--tool", "nosuch", "--allow-missing"))
	l := lsLine(t, root, "agent/carl")
	if !strings.Contains(l, "broken") || !strings.Contains(l, "127.0.0.1/tiny-9") || !strings.Contains(l, "nosuch") {
		t.Errorf("ctx ls shows an agent naming a missing model and tool as %q", l)
	}
	if n := brokenCount(t, root); n != 1 {
		t.Errorf("ctx status counts %d broken, want 1 (the agent)", n)
	}
	r := sh(t, "ctx", "agent", "ls", "--root", root)
	if !strings.Contains(r.stdout, "broken") || !strings.Contains(r.stdout, "nosuch") {
		t.Errorf("ctx agent ls:\n%s", r)
	}
	// Once what it names exists, the agent is fine.
	mustOK(t, sh(t, "ctx", "agent", "create", "dora", "--root", root, "--model", "debug/echo", "--tool", "fs.read"))
	if l := lsLine(t, root, "agent/dora"); strings.Contains(l, "broken") {
		t.Errorf("control: a sound agent is %q", l)
	}
}

// ctx agent create naming a model and a tool that do not exist is ENOENT
// naming both, with nothing written; --allow-missing creates it and ctx
// doctor fails it.
func TestFirstHourAgentCreateRefusesMissing(t *testing.T) {
	root := newRoot(t)
	before := treeFiles(t, root)
	r := sh(t, "ctx", "agent", "create", "carl", "--root", root, "--model", "127.0.0.1/tiny-9", "--tool", "nosuch")
	msg := oneError(t, r, "ctx", "ENOENT", 1)
	for _, want := range []string{"model 127.0.0.1/tiny-9", "tool nosuch", "--allow-missing"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not name %q: %s", want, msg)
		}
	}
	if after := treeFiles(t, root); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("a refused create wrote files")
	}
	r = sh(t, "ctx", "agent", "create", "carl", "--root", root, "--model", "debug/echo", "--tool", "nosuch")
	if msg := oneError(t, r, "ctx", "ENOENT", 1); !strings.Contains(msg, "tool nosuch") || strings.Contains(msg, "model debug/echo") {
		t.Errorf("refusal of a missing tool alone: %s", msg)
	}
	mustOK(t, sh(t, "ctx", "agent", "create", "carl", "--root", root, "--model", "127.0.0.1/tiny-9", "--tool", "nosuch", "--allow-missing"))
	doc := sh(t, "ctx", "doctor", "--root", root, "--json")
	var d struct {
		Failed int
		Checks []struct {
			Check, Path, Detail string
			OK                  bool
		}
	}
	if err := json.Unmarshal([]byte(doc.stdout), &d); err != nil || doc.code != 1 {
		t.Fatalf("ctx doctor --json: %v\n%s", err, doc)
	}
	found := false
	for _, c := range d.Checks {
		if c.Check == "agent-refs" && strings.HasSuffix(c.Path, "agent/carl") {
			found = true
			if c.OK || !strings.Contains(c.Detail, "127.0.0.1/tiny-9") || !strings.Contains(c.Detail, "nosuch") {
				t.Errorf("ctx doctor's agent-refs check: %+v", c)
			}
		}
	}
	if !found {
		t.Errorf("ctx doctor has no agent-refs check of carl:\n%s", doc.stdout)
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

// A new agent reads stopped, in its .d/status, ctx ls, ctx agent ls and
// ctx agent show; one whose status says it runs while no process does
// reads dead.
func TestFirstHourNewAgentIsStopped(t *testing.T) {
	root := newRoot(t)
	mustOK(t, sh(t, "ctx", "agent", "create", "coder", "--root", root, "--model", "debug/echo"))
	if s := ctlString(t, root, "coder", "status"); s != "stopped" {
		t.Errorf("a new agent's .d/status is %q, want stopped", s)
	}
	if l := lsLine(t, root, "agent/coder"); !strings.HasSuffix(strings.TrimSpace(l), "stopped") {
		t.Errorf("ctx ls: %q", l)
	}
	var show struct{ Status string }
	r := mustOK(t, sh(t, "ctx", "agent", "show", "--root", root, "coder", "--json"))
	if err := json.Unmarshal([]byte(r.stdout), &show); err != nil || show.Status != "stopped" {
		t.Errorf("ctx agent show --json status %q (%v)", show.Status, err)
	}
	// A process that vanished without walking its status: dead.
	gone := exec.Command("true")
	must(t, gone.Run())
	ctl := filepath.Join(root, "agent/coder.d")
	must(t, os.WriteFile(filepath.Join(ctl, "pid"), []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ctl, "status"), []byte("ready\n"), 0o644))
	if r := mustOK(t, sh(t, "ctx", "agent", "ls", "--root", root)); !strings.Contains(r.stdout, " dead ") {
		t.Errorf("ctx agent ls of an agent whose process vanished:\n%s", r.stdout)
	}
	if l := lsLine(t, root, "agent/coder"); !strings.HasSuffix(strings.TrimSpace(l), "dead") {
		t.Errorf("ctx ls of an agent whose process vanished: %q", l)
	}
}

// ctx init and ctx doctor print a summary and what needs attention;
// --verbose prints every line, --json everything as before.
func TestFirstHourQuietInitAndDoctor(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	r := mustOK(t, sh(t, "ctx", "init", "--root", root))
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "created") {
		t.Errorf("ctx init on a fresh root printed %d lines, want the summary:\n%s", len(lines), r.stdout)
	}
	def := filepath.Join(root, "model/debug/echo.d/default")
	must(t, os.WriteFile(def, []byte("repeat=2\n"), 0o644))
	r = mustOK(t, sh(t, "ctx", "init", "--root", root))
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 || !strings.Contains(lines[0], def) || !strings.Contains(lines[0], "left_alone") {
		t.Errorf("ctx init over an edit: want the kept edit and the summary:\n%s", r.stdout)
	}
	if r := mustOK(t, sh(t, "ctx", "init", "--root", root, "--verbose")); strings.Count(r.stdout, "\n") < 50 || !strings.Contains(r.stdout, "unchanged") {
		t.Errorf("ctx init --verbose does not list every path:\n%s", r.stdout)
	}
	var ji struct{ Changes []json.RawMessage }
	if r := mustOK(t, sh(t, "ctx", "init", "--root", root, "--json")); json.Unmarshal([]byte(r.stdout), &ji) != nil || len(ji.Changes) < 50 {
		t.Errorf("ctx init --json lost its changes:\n%s", r.stdout)
	}

	// No cortexfsd: the echo model's socket check fails, the rest pass.
	doc := sh(t, "ctx", "doctor", "--root", root)
	if doc.code != 1 || strings.Contains(doc.stdout, "ok   ") || !strings.Contains(doc.stdout, "FAIL socket") {
		t.Errorf("ctx doctor: want only the failures and the summary:\n%s", doc)
	}
	lines := strings.Split(strings.TrimSpace(doc.stdout), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "checks, 1 failed") {
		t.Errorf("ctx doctor summary: %q", last)
	}
	verbose := sh(t, "ctx", "doctor", "--root", root, "--verbose")
	if verbose.code != 1 || strings.Count(verbose.stdout, "ok   ") < 20 {
		t.Errorf("ctx doctor --verbose does not list the passing checks:\n%s", verbose)
	}
	var jd struct {
		Checks []json.RawMessage
		Failed int
	}
	if r := sh(t, "ctx", "doctor", "--root", root, "--json"); json.Unmarshal([]byte(r.stdout), &jd) != nil || len(jd.Checks) != strings.Count(verbose.stdout, "\n")-1 || jd.Failed != 1 {
		t.Errorf("ctx doctor --json: %d checks, %d failed; --verbose printed %d lines", len(jd.Checks), jd.Failed, strings.Count(verbose.stdout, "\n"))
	}
}
