package t

import (
	"encoding/json"
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
