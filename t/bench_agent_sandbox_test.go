package t

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func init() { addBench("agent-sandbox-overhead", benchAgentSandboxOverhead) }

// baselineSubject names the commit that put agents in their sandbox: its
// parent is "iso=shared today" for the overhead figure.
const baselineSubject = "agents run in their sandbox"

// baselineBinary builds the tree as it was before agents ran in a sandbox
// (the parent of that commit, from this checkout's history) and installs it
// into a prefix of its own; "" and the reason when it cannot (no git, no
// history, a build failure).
func baselineBinary(t *testing.T) (string, string) {
	out, err := exec.Command("git", "-C", repoRoot, "log", "--format=%H", "-1", "--grep=^"+baselineSubject).Output()
	sha := strings.TrimSpace(string(out))
	if err != nil || sha == "" {
		return "", "no commit \"" + baselineSubject + "\" in this checkout's history"
	}
	dir := t.TempDir()
	arch := exec.Command("sh", "-c", "git -C \"$1\" archive \"$2^\" | tar -x -C \"$3\"", "sh", repoRoot, sha, dir)
	if b, err := arch.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("git archive %s^: %v: %s", sha[:12], err, b)
	}
	build := exec.Command("make", "-s", "-C", dir, "build", "VERSION=baseline")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("build of %s^: %v: %.300s", sha[:12], err, b)
	}
	bin := filepath.Join(dir, "prefix", "bin")
	if b, err := exec.Command(filepath.Join(dir, "build", "cortexfs"), "install", bin).CombinedOutput(); err != nil {
		return "", fmt.Sprintf("install of the baseline: %v: %s", err, b)
	}
	return bin, sha[:12] + "^"
}

// benchAgentSandboxOverhead: a one-shot agent run with one fs.read round
// trip, sandboxed (iso=shared, as every agent runs now) against the same
// run by the binary of the commit before agents ran in a sandbox (iso=shared
// then: the loop in the runner's own process, no namespaces), in the same
// run, alternating; median of 15 each. The difference is what the sandbox
// costs a run: building it, the runtime's start, the agent's view and the
// launcher round trips.
func benchAgentSandboxOverhead(t *testing.T, _ floors) {
	const n = 15
	oldBin, why := baselineBinary(t)
	if oldBin == "" {
		figure("agent run, 1 tool round trip, sandboxed", "skipped", "no pre-sandbox baseline: "+why)
		return
	}
	type setup struct {
		obj  string
		fake *fakeChat
	}
	prepare := func(bin string) setup {
		fake := newFakeChat(t)
		root, work := filepath.Join(t.TempDir(), "ctx"), t.TempDir()
		mustOK(t, run(t, runOpts{}, filepath.Join(bin, "ctx"), "init", "--root", root, "--runner", filepath.Join(bin, "cortexfs-object-runner")))
		addFakeModel(t, root, fake)
		must(t, os.WriteFile(filepath.Join(root, "model", "fake", "chat"),
			[]byte("#!"+filepath.Join(bin, "cortexfs-object-runner")+"\ncortexfs.object=model\nid=fake-chat\n"), 0o755))
		mustOK(t, run(t, runOpts{}, filepath.Join(bin, "ctx"), "agent", "create", "bencher", "--root", root, "--model", "fake/chat",
			"--cwd", work, "--tool", "fs.read"))
		must(t, os.WriteFile(filepath.Join(work, "notes.txt"), []byte("bench"), 0o644))
		return setup{filepath.Join(root, "agent", "bencher"), fake}
	}
	now, before := prepare(filepath.Join(prefix, "bin")), prepare(oldBin)
	runOnce := func(s setup, i int) time.Duration {
		s.fake.script(fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}}, fakeStep{Text: "ok"})
		start := time.Now()
		r := mustOK(t, run(t, runOpts{}, s.obj, "--session", fmt.Sprintf("b%d", i), "read"))
		d := time.Since(start)
		if !strings.Contains(r.stdout, `"status":"ok"`) {
			t.Fatalf("bench run did not end ok:\n%s", r)
		}
		return d
	}
	runOnce(now, -1)
	runOnce(before, -1)
	var a, b []time.Duration
	for i := 0; i < n; i++ {
		a = append(a, runOnce(now, i))
		b = append(b, runOnce(before, i))
	}
	slices.Sort(a)
	slices.Sort(b)
	addRow(row{figure: "agent run, 1 tool round trip, sandboxed", ours: ms(a[n/2]), floor: ms(b[n/2]),
		note: fmt.Sprintf("floor: the same one-shot run by the binary of %s (iso=shared before the sandbox: no namespaces); overhead %v; median of %d, alternating",
			why, (a[n/2] - b[n/2]).Round(10*time.Microsecond), n)})
}
