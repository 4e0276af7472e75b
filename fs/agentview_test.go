package fs

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/tree"
)

// agentUID is the uid the test agent runs as: not root, so mode bits bite.
const agentUID = 4242

// viewFixture is a tree with an agent "coder" (uid 4242, owner 4242) and
// tools, models, agents and shared spaces around it that the view must
// show or hide.
type viewFixture struct {
	root string
	m    *mount
}

func write(t *testing.T, p string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// tool writes an object file and its .d/ with a marker file naming where
// it lives, and an own policy allowing coder_t.
func tool(t *testing.T, dir, name string, mode os.FileMode, ownPolicy string) {
	t.Helper()
	write(t, filepath.Join(dir, name), "#!/bin/true\ncortexfs.object=tool\nname="+name+"\n", mode)
	write(t, filepath.Join(dir, name+".d", "where"), dir+"\n", 0o644)
	write(t, filepath.Join(dir, name+".d", "policy"), ownPolicy, 0o644)
}

func newViewFixture(t *testing.T) *viewFixture {
	t.Helper()
	root := t.TempDir()
	os.Chmod(root, 0o755)
	r := tree.Root(root)
	if _, err := tree.Init(tree.InitOptions{Root: r, Runner: "/bin/true", UID: agentUID}); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse([]byte(strings.Join([]string{
		"allow coder_t model:debug/echo use",
		"allow coder_t tool:mine execute",
		"allow coder_t tool:dup execute",
		"allow coder_t tool:first execute",
		"allow coder_t tool:rootonly execute",
		"allow coder_t tool:owned execute",
		"allow coder_t agent:reviewer read",
		"allow coder_t shared:open read",
		"allow coder_t shared:closed read",
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Create(agent.Spec{Name: "coder", Root: r, Model: []string{"debug/echo"}, Owner: agentUID, UID: agentUID, GID: agentUID, Policy: p}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"reviewer", "stranger"} {
		if _, err := agent.Create(agent.Spec{Name: n, Root: r, Model: []string{"debug/echo"}, Owner: agentUID, UID: agentUID}); err != nil {
			t.Fatal(err)
		}
	}
	sys, home := r.Path(tree.ToolDir), filepath.Join(r.Home(agentUID), tree.ToolDir)
	allow := func(n string) string { return "allow coder_t tool:" + n + " execute\n" }
	tool(t, sys, "mine", 0o755, allow("mine"))
	tool(t, sys, "dup", 0o644, allow("dup")) // not executable: not a hit
	tool(t, home, "dup", 0o755, allow("dup"))
	tool(t, sys, "first", 0o755, allow("first"))
	tool(t, home, "first", 0o755, allow("first"))
	tool(t, sys, "rootonly", 0o700, allow("rootonly")) // root's, 0700: not the agent's to run
	tool(t, sys, "owned", 0o755, "allow admin_t tool:owned execute\n")
	tool(t, sys, "unlisted", 0o755, allow("unlisted")) // not in the agent's policy
	write(t, filepath.Join(root, "model", "openai", "gpt-4o"), "#!/bin/true\ncortexfs.object=model\n", 0o755)
	os.Symlink("../openai/gpt-4o", filepath.Join(root, "model", "debug", "gpt"))
	os.Symlink("openai/gpt-4o", filepath.Join(root, "model", "big"))
	os.MkdirAll(filepath.Join(root, "shared", "open", "data"), 0o755)
	os.MkdirAll(filepath.Join(root, "shared", "closed"), 0o700)
	os.MkdirAll(filepath.Join(root, "shared", "nopolicy"), 0o755)
	os.MkdirAll(filepath.Join(root, "home", "1", "secret"), 0o755)
	write(t, filepath.Join(root, "home", fmt.Sprint(agentUID), "notes"), "mine\n", 0o644)
	m, err := newMount(Options{Source: root, Agent: filepath.Join(root, "agent", "coder")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.close)
	return &viewFixture{root: root, m: m}
}

func (f *viewFixture) names(t *testing.T, vpath string) []string {
	t.Helper()
	e, err := f.m.view.resolve(vpath)
	if err != nil {
		t.Fatalf("resolve %q: %v", vpath, err)
	}
	es, err := f.m.view.list(vpath, e)
	if err != nil {
		t.Fatalf("list %q: %v", vpath, err)
	}
	var out []string
	for _, d := range es {
		out = append(out, d.Name)
	}
	slices.Sort(out)
	return out
}

func TestAgentViewListings(t *testing.T) {
	f := newViewFixture(t)
	owner := fmt.Sprint(agentUID)
	tests := []struct {
		vpath string
		want  []string
	}{
		{"", []string{"agent", "home", "model", "shared", "tool"}},
		{"tool", []string{"dup", "dup.d", "first", "first.d", "mine", "mine.d"}},
		{"model", []string{"debug", "helper", "main"}},
		{"model/debug", []string{"echo", "echo.d"}},
		{"agent", []string{"coder", "coder.d", "reviewer", "reviewer.d"}},
		{"home", []string{owner}},
		{"home/" + owner + "/tool", []string{"dup", "dup.d"}},
		{"home/" + owner + "/agent", []string{"coder", "reviewer"}},
		{"shared", []string{"open"}},
		{"shared/open", []string{"data"}},
	}
	for _, tt := range tests {
		if got := f.names(t, tt.vpath); !slices.Equal(got, tt.want) {
			t.Errorf("ls %q = %v, want %v", tt.vpath, got, tt.want)
		}
	}
}

func TestAgentViewHidesWhatItMayNotUse(t *testing.T) {
	f := newViewFixture(t)
	hidden := []string{
		"tool/unlisted",         // no allow coder_t tool:unlisted execute
		"tool/unlisted.d",       // .d/ follows its object
		"tool/rootonly",         // mode bits: 0700 root's
		"tool/owned",            // the tool's own .d/policy allows only admin_t
		"tool/shell.exec",       // built-in, not in the policy
		"model/openai",          // no model:openai/gpt-4o use
		"model/big",             // an alias to a model it may not use
		"model/debug/gpt",       // the same, inside a provider directory
		"agent/stranger",        // no agent:stranger read
		"agent/stranger.d",      // and not its control files
		"home/1",                // another uid's home
		"shared/nopolicy",       // no shared:nopolicy read
		"shared/closed",         // allowed by policy, but 0700 root's
		"bin",                   // not a tier
		"tool/mine/x",           // an object file is not a directory
		"model/debug/echo.sock", // no socket served
	}
	for _, vp := range hidden {
		if _, err := f.m.view.resolve(vp); err == nil {
			t.Errorf("%s is visible in the agent's view", vp)
		} else if en := errno(err); en != syscall.ENOENT && en != syscall.ENOTDIR {
			t.Errorf("%s: %v, want ENOENT (hidden, not refused)", vp, err)
		}
	}
}

// CTX_PATH order: the first executable file wins and its .d/ follows the
// directory it was found in.
func TestAgentViewCtxPathOrder(t *testing.T) {
	f := newViewFixture(t)
	sys := filepath.Join(f.root, "tool")
	home := filepath.Join(f.root, "home", fmt.Sprint(agentUID), "tool")
	for vp, want := range map[string]string{
		"tool/dup.d/where":   home, // the system dup is not executable
		"tool/first.d/where": sys,  // both executable: the system tier is first
	} {
		e, err := f.m.view.resolve(vp)
		if err != nil {
			t.Fatalf("%s: %v", vp, err)
		}
		b, err := e.back.b.dir.ReadFile(e.back.rel, 1<<10)
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s reads %q (%v), want %q", vp, b, err, want)
		}
	}
	// The home tier's own first is not the winner: not shown there either.
	if _, err := f.m.view.resolve("home/" + fmt.Sprint(agentUID) + "/tool/first"); err == nil {
		t.Error("home/<uid>/tool/first is shown although the system tier's first wins")
	}
}

// Building the view and reading all of it leaves the durable tree exactly
// as it was: no placeholder, no symlink copy, no mode or owner change.
func TestAgentViewWritesNothing(t *testing.T) {
	f := newViewFixture(t)
	before := treeDigest(t, f.root)
	var walk func(vp string)
	walk = func(vp string) {
		e, err := f.m.view.resolve(vp)
		if err != nil {
			t.Fatalf("resolve %q: %v", vp, err)
		}
		if !e.isDir() {
			return
		}
		es, err := f.m.view.list(vp, e)
		if err != nil {
			t.Fatalf("list %q: %v", vp, err)
		}
		for _, d := range es {
			walk(joinV(vp, d.Name))
		}
	}
	walk("")
	f.m.view.(*agentView).recompute()
	if after := treeDigest(t, f.root); after != before {
		t.Errorf("durable tree changed:\n%s\n---\n%s", before, after)
	}
}

// treeDigest lists every path with its type, mode, owner, size and content
// hash (link target for symlinks).
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d %d", strings.TrimPrefix(p, root), fi.Mode(), st.Uid, st.Gid, fi.Size())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", l)
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String()
}
