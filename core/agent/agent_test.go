package agent

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

func newAgent(t testing.TB, tools ...string) (*Agent, tree.Root) {
	t.Helper()
	r := tree.Root(t.TempDir())
	if _, err := tree.Init(tree.InitOptions{Root: r, Runner: "/bin/true", UID: os.Getuid()}); err != nil {
		t.Fatal(err)
	}
	a, err := Create(Spec{Name: "coder", Root: r, Model: []string{"debug/echo"}, Tools: tools, Owner: os.Getuid(), UID: os.Getuid(), AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	return a, r
}

func TestCreateWritesEveryControlFile(t *testing.T) {
	a, r := newAgent(t, "fs.read")
	for _, f := range ControlFiles {
		if _, err := os.Stat(a.Ctl(f)); err != nil {
			t.Errorf("control file %s: %v", f, err)
		}
	}
	if a.Type != "coder_t" || a.Iso != IsoShared || a.Life != LifeOwned || a.Status() != StatusStopped {
		t.Errorf("defaults: type %s iso %s life %s status %s", a.Type, a.Iso, a.Life, a.Status())
	}
	for _, d := range HomeDirs {
		if fi, err := os.Stat(filepath.Join(a.Home(), d)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("agent home %s/: %v %v", d, fi, err)
		}
	}
	if err := a.AuthorizeMounts(); err != nil {
		t.Errorf("a created agent may not use its own mounts: %v", err)
	}
	if len(a.Policy.Rules) != 4 || !a.Policy.Allowed("coder_t", "tool", "fs.read", "execute") || !a.Policy.Allowed("coder_t", "model", "debug/echo", "use") ||
		!a.Policy.Allowed("coder_t", "mount", "ctx", "read") || !a.Policy.Allowed("coder_t", "mount", "agent", "write") {
		t.Errorf("policy: %s", a.Policy.Format())
	}
	if _, err := Create(Spec{Name: "coder", Root: r, Model: []string{"debug/echo"}}); abi.CodeOf(err) != abi.EEXIST {
		t.Errorf("second create = %v, want EEXIST", err)
	}
	// What does not exist is ENOENT, and nothing is written.
	for _, s := range []Spec{{Model: []string{"nope/model"}}, {Model: []string{"debug/echo"}, Tools: []string{"nosuch"}}} {
		s.Name, s.Root = "carl", r
		if _, err := Create(s); abi.CodeOf(err) != abi.ENOENT || Exists(r, "carl") {
			t.Errorf("create naming %v %v = %v (exists %v), want ENOENT and nothing", s.Model, s.Tools, err, Exists(r, "carl"))
		}
		if _, err := os.Stat(r.Path(tree.AgentDir, "carl.d")); err == nil {
			t.Errorf("a refused create left carl.d")
		}
	}
	for _, name := range []string{"", "..", "a/b", "x.sock"} {
		if _, err := Create(Spec{Name: name, Root: r, Model: []string{"debug/echo"}}); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("create %q = %v, want EINVAL", name, err)
		}
	}
}

func TestLookupToolFirstExecutableWins(t *testing.T) {
	a, r := newAgent(t, "mytool")
	home := filepath.Join(r.Home(os.Getuid()), tree.ToolDir)
	sys := r.Path(tree.ToolDir)
	// System tier: a non-executable file is not a hit; the home tier's wins.
	os.WriteFile(filepath.Join(sys, "mytool"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(home, "mytool"), []byte("#!/bin/sh\n"), 0o755)
	os.MkdirAll(filepath.Join(home, "mytool.d"), 0o755)
	tl, err := a.LookupTool("mytool")
	if err != nil || tl.File != filepath.Join(home, "mytool") || tl.Ctl != filepath.Join(home, "mytool.d") {
		t.Fatalf("LookupTool = %+v, %v", tl, err)
	}
	os.Chmod(filepath.Join(home, "mytool"), 0o644)
	if _, err := a.LookupTool("mytool"); abi.CodeOf(err) != abi.EACCES && os.Getuid() != 0 {
		t.Errorf("only non-executable hits = %v, want EACCES", err)
	}
	if _, err := a.LookupTool("nosuch"); abi.CodeOf(err) != abi.ENOENT {
		t.Errorf("missing tool = %v, want ENOENT", err)
	}
}

func TestAuthorizeToolOrder(t *testing.T) {
	a, r := newAgent(t, "fs.read")
	if _, err := a.AuthorizeTool("fs.read"); err != nil {
		t.Fatalf("allowed tool refused: %v", err)
	}
	if _, err := a.AuthorizeTool("shell.exec"); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("tool without an allow line = %v, want EACCES", err)
	}
	pol := filepath.Join(r.Path(tree.ToolDir), "fs.read.d", "policy")
	os.WriteFile(pol, []byte("allow other_t tool:fs.read execute\n"), 0o644)
	if _, err := a.AuthorizeTool("fs.read"); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("tool's own policy excluding coder_t = %v, want EACCES", err)
	}
	os.WriteFile(pol, []byte("allow coder_t tool:fs.read execute\n"), 0o644)
	if _, err := a.AuthorizeTool("fs.read"); err != nil {
		t.Errorf("tool's own policy allowing coder_t = %v", err)
	}
	os.WriteFile(pol, []byte("allow coder_t tool:* execute\n"), 0o644)
	if _, err := a.AuthorizeTool("fs.read"); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("invalid tool policy = %v, want EACCES (refuse)", err)
	}
	specs := a.ToolSpecs()
	if len(specs) != 0 {
		t.Errorf("refused tools offered: %+v", specs)
	}
	if err := a.AuthorizeModel("debug/echo"); err != nil {
		t.Error(err)
	}
	if err := a.AuthorizeModel("openai/gpt-4o"); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("model without use = %v", err)
	}
}

func TestParseTask(t *testing.T) {
	for _, in := range []string{`{"task":"fix it"}`, `"fix it"`, "fix it\n", `{"messages":[{"role":"user","content":"fix it"}]}`} {
		ms, err := ParseTask([]byte(in))
		if err != nil || len(ms) != 1 || ms[0].Content != "fix it" || ms[0].Role != "user" {
			t.Errorf("ParseTask(%q) = %+v, %v", in, ms, err)
		}
	}
	for _, in := range []string{"", `{"task":""}`, `{"x":1}`, `{bad`} {
		if _, err := ParseTask([]byte(in)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("ParseTask(%q) = %v, want EINVAL", in, err)
		}
	}
}

// Concurrent creates of one name: exactly one wins, the rest are EEXIST and
// the winner's control files are whole.
func TestCreateConcurrentSameName(t *testing.T) {
	_, r := newAgent(t, "fs.read")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = Create(Spec{Name: "racer", Root: r, Model: []string{"debug/echo"}})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch abi.CodeOf(err) {
		case "":
			won++
		case abi.EEXIST:
		default:
			t.Errorf("concurrent create: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent creates succeeded, want exactly 1", won)
	}
	a, err := Open(r.Path(tree.AgentDir, "racer"))
	if err != nil {
		t.Fatalf("winner unreadable: %v", err)
	}
	for _, f := range ControlFiles {
		if _, err := os.Stat(a.Ctl(f)); err != nil {
			t.Errorf("control file %s: %v", f, err)
		}
	}
}
