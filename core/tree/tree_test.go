package tree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func initRoot(t *testing.T) Root {
	t.Helper()
	r := Root(filepath.Join(t.TempDir(), "ctx"))
	if _, err := Init(InitOptions{Root: r, Runner: "/usr/bin/cortexfs-object-runner", UID: 1000}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseMeta(t *testing.T) {
	good := "#!/usr/bin/cortexfs-object-runner\ncortexfs.object=tool\nname=fs.read\n"
	m, err := ParseMeta([]byte(good))
	if err != nil || m.Class != abi.ClassTool || m.Get("name") != "fs.read" || m.Runner != "/usr/bin/cortexfs-object-runner" {
		t.Fatalf("ParseMeta(good) = %+v, %v", m, err)
	}
	back, err := m.Format()
	if err != nil || string(back) != good {
		t.Errorf("Format round trip = %q, %v", back, err)
	}
	for _, bad := range []string{
		"",
		"cortexfs.object=tool\n",
		"#!\ncortexfs.object=tool\n",
		"#!/bin/sh\necho pwned\n",
		"#!/usr/bin/cortexfs-object-runner\ncortexfs.object=script\n",
		"#!/usr/bin/cortexfs-object-runner\nname=x\n",
	} {
		if _, err := ParseMeta([]byte(bad)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("ParseMeta(%q): want EINVAL, got %v", bad, err)
		}
	}
	if _, err := (Meta{Runner: "relative/runner", Class: abi.ClassTool}).Format(); abi.CodeOf(err) != abi.EINVAL {
		t.Error("Format accepted a relative runner")
	}
}

func TestResolveClassesAndAliases(t *testing.T) {
	r := initRoot(t)
	o, err := Resolve(r.Path("model", "main"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Class != abi.ClassModel || o.Name != "debug/echo" || o.Path != r.ModelPath("debug/echo") || o.Root != r {
		t.Errorf("alias resolved to %+v", o)
	}
	if o.Called == o.Path {
		t.Error("Called should keep the alias path")
	}
	tl, err := Resolve(r.ToolPath("fs.read"))
	if err != nil || tl.Class != abi.ClassTool || tl.Name != "fs.read" {
		t.Fatalf("tool: %+v %v", tl, err)
	}
	// A home-tier tool keeps the system root as its root.
	home := filepath.Join(r.Home(1000), ToolDir, "mine")
	os.WriteFile(home, []byte("#!/r/cortexfs-object-runner\ncortexfs.object=tool\n"), 0o755)
	h, err := Resolve(home)
	if err != nil || h.Root != r || h.Tier != r.Home(1000) {
		t.Errorf("home tool: %+v %v", h, err)
	}
	// Class must agree with location; files outside tiers are EINVAL.
	os.WriteFile(r.ToolPath("liar"), []byte("#!/r/x\ncortexfs.object=model\n"), 0o755)
	if _, err := Resolve(r.ToolPath("liar")); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("class mismatch: %v", err)
	}
	os.WriteFile(r.Path("stray"), []byte("#!/r/x\ncortexfs.object=tool\n"), 0o755)
	if _, err := Resolve(r.Path("stray")); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("stray file: %v", err)
	}
	if _, err := Resolve(r.ToolPath("nope")); abi.CodeOf(err) != abi.ENOENT {
		t.Errorf("missing: %v", err)
	}
}

func TestInitIdempotentKeepsEdits(t *testing.T) {
	r := initRoot(t)
	def := filepath.Join(abi.CtlDir(r.ModelPath("debug/echo")), "default")
	os.WriteFile(def, []byte("repeat=3\n"), 0o644)
	os.Remove(r.Path("model", "helper"))
	os.Symlink("elsewhere/x", r.Path("model", "helper"))
	os.WriteFile(r.ToolPath("fs.read")+".d/log", []byte("old line\n"), 0o644)
	changes, err := Init(InitOptions{Root: r, Runner: "/usr/bin/cortexfs-object-runner", UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, c := range changes {
		if c.Action == "created" {
			t.Errorf("second init created %s", c.Path)
		}
		if c.Action == "left_alone" {
			left[c.Path] = true
		}
	}
	if !left[def] || !left[r.Path("model", "helper")] || len(left) != 2 {
		t.Errorf("left alone = %v", left)
	}
	if b, _ := os.ReadFile(def); string(b) != "repeat=3\n" {
		t.Error("edit lost")
	}
	if b, _ := os.ReadFile(r.ToolPath("fs.read") + ".d/log"); string(b) != "old line\n" {
		t.Error("runtime-owned log rewritten")
	}
	// A different runner: every object Init wrote is updated to it (it is
	// Init's own content but for the #! line); an edited one is kept.
	edited := r.ToolPath("fs.write")
	b, _ := os.ReadFile(edited)
	if err := os.WriteFile(edited, append(b, "note=mine\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	changes, _ = Init(InitOptions{Root: r, Runner: "/opt/other/cortexfs-object-runner", UID: 1000})
	n := 0
	for _, c := range changes {
		switch {
		case c.Action == "updated" && strings.Contains(c.Reason, "runner was"):
			n++
		case c.Path == edited && c.Action != "left_alone":
			t.Errorf("edited object: %+v", c)
		}
	}
	if n < 3 { // debug/echo, fs.read, shell.exec
		t.Errorf("runner change: only %d objects updated", n)
	}
	if o, err := Resolve(r.ToolPath("fs.read")); err != nil || o.Meta.Runner != "/opt/other/cortexfs-object-runner" {
		t.Errorf("fs.read after the runner change: %v %v", o.Meta.Runner, err)
	}
}

func TestAppendLogBounded(t *testing.T) {
	r := initRoot(t)
	o, err := Resolve(r.ModelPath("debug/echo"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		if err := o.AppendLog(LogLine{Run: "r1", Status: "ok", Extra: "driver=debug"}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(o.Ctl("log"))
	if len(b) > MaxLog || !strings.HasSuffix(string(b), "\n") || !strings.Contains(strings.SplitN(string(b), "\n", 2)[0], "run=r1") {
		t.Errorf("log not bounded to whole lines: %d bytes, first line %q", len(b), strings.SplitN(string(b), "\n", 2)[0])
	}
}

func FuzzParseMeta(f *testing.F) {
	f.Add([]byte("#!/usr/bin/cortexfs-object-runner\ncortexfs.object=model\nid=a/b\n"))
	f.Add([]byte("#!/bin/sh\nrm -rf /\n"))
	f.Add([]byte("#!/x y\ncortexfs.object=agent\n\n# c\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeta(b)
		if err != nil {
			if abi.CodeOf(err) != abi.EINVAL {
				t.Fatalf("code %s", abi.CodeOf(err))
			}
			return
		}
		out, err := m.Format()
		if err != nil {
			return // e.g. a runner with characters Format refuses
		}
		m2, err := ParseMeta(out)
		if err != nil || m2.Class != m.Class || len(m2.KV) != len(m.KV) {
			t.Fatalf("round trip: %+v vs %+v (%v)", m, m2, err)
		}
	})
}

func TestLocateTreeNames(t *testing.T) {
	root := Root(t.TempDir())
	if err := os.MkdirAll(root.Path("model", "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Path("model", "p", "m"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	t.Chdir(cwd)
	if err := os.MkdirAll("agent", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("agent/here", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want, errPart string }{
		{"model/p/m", root.Path("model", "p", "m"), ""},
		{"agent/here", "agent/here", ""},
		{"./model/p/m", "", "tried " + cwd + "/model/p/m"},
		{"model/p/nope", "", "tried " + string(root) + "/model/p/nope, " + cwd + "/model/p/nope"},
		{"other/x", "", "tried " + cwd + "/other/x"},
	} {
		got, err := root.Locate(c.name)
		if c.errPart == "" && (err != nil || got != c.want) || c.errPart != "" && (abi.CodeOf(err) != abi.ENOENT || !strings.Contains(err.Error(), c.errPart)) {
			t.Errorf("Locate(%q) = %q, %v; want %q / %q", c.name, got, err, c.want, c.errPart)
		}
	}
}
