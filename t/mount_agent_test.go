package t

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// agentFixture is a tree with agent "coder" running as the test account
// ctxt12a, and tools that its view must show or hide.
type agentFixture struct {
	root, home string
	user       testUser
	as         actor
}

// newAgentFixture builds:
//
//	tool/fs.read       0755, allowed                → visible
//	tool/fs.write      0700 root's, allowed         → hidden by mode bits
//	tool/shell.exec    0755, not in the policy      → hidden by policy
//	tool/dup           0644 (not a hit), allowed    ┐ CTX_PATH order: the home
//	home/<uid>/tool/dup 0755                        ┘ tier's wins, .d/ follows it
//
// Each allowed tool's own .d/policy allows coder_t.
func newAgentFixture(t *testing.T) *agentFixture {
	t.Helper()
	needRoot(t)
	u := ensureUser(t, "ctxt12a")
	f := &agentFixture{root: publicRoot(t), user: u, as: actor{u: &u, home: "/"}}
	f.home = filepath.Join(f.root, "home", strconv.Itoa(u.UID))
	mustOK(t, sh(t, "ctx", "agent", "create", "coder", "--root", f.root, "--model", "debug/echo",
		"--tool", "fs.read", "--tool", "fs.write", "--tool", "dup", "--allow-missing")) // dup is written below
	ctl := filepath.Join(f.root, "agent", "coder.d")
	for file, v := range map[string]int{"owner": u.UID, "uid": u.UID, "gid": u.GID} {
		writeFile(t, filepath.Join(ctl, file), strconv.Itoa(v)+"\n", 0o644)
	}
	writeFile(t, filepath.Join(ctl, "path"), filepath.Join(f.root, "tool")+":"+filepath.Join(f.home, "tool")+"\n", 0o644)
	for _, d := range []string{f.home, filepath.Join(f.home, "tool")} {
		os.MkdirAll(d, 0o755)
		os.Chown(d, u.UID, u.GID)
	}
	obj := mustReadFile(t, filepath.Join(f.root, "tool", "fs.read"))
	allow := func(n string) string { return "allow coder_t tool:" + n + " execute\n" }
	for _, n := range []string{"fs.read", "fs.write", "shell.exec"} {
		writeFile(t, filepath.Join(f.root, "tool", n+".d", "policy"), allow(n), 0o644)
	}
	os.Chmod(filepath.Join(f.root, "tool", "fs.write"), 0o700)
	for dir, mode := range map[string]os.FileMode{filepath.Join(f.root, "tool"): 0o644, filepath.Join(f.home, "tool"): 0o755} {
		writeFile(t, filepath.Join(dir, "dup"), obj, mode)
		writeFile(t, filepath.Join(dir, "dup.d", "where"), dir+"\n", 0o644)
		writeFile(t, filepath.Join(dir, "dup.d", "policy"), allow("dup"), 0o644)
	}
	return f
}

func writeFile(t testing.TB, p, data string, mode os.FileMode) {
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

// The view shows exactly what the agent may use, leaves the durable tree
// byte for byte as it was, and what it shows works.
func TestMountAgentView(t *testing.T) {
	f := newAgentFixture(t)
	before := digestTree(t, f.root)
	m := startMount(t, f.root, "--agent", "coder")
	uid := strconv.Itoa(f.user.UID)
	for dir, want := range map[string][]string{
		"":                      {"agent", "home", "model", "shared", "tool"},
		"tool":                  {"dup", "dup.d", "fs.read", "fs.read.d"},
		"model":                 {"debug", "helper", "main"},
		"model/debug":           {"echo", "echo.d"},
		"agent":                 {"coder", "coder.d"},
		"home":                  {uid},
		"home/" + uid + "/tool": {"dup", "dup.d"},
	} {
		// Listed as the agent's own uid, as the sandbox's processes do.
		r := runAs(t, f.as, runOpts{}, "/bin/ls", "-A", m.path(dir))
		if got := strings.Fields(r.stdout); r.code != 0 || !slices.Equal(got, want) {
			t.Errorf("ls %q in coder's view = %v (exit %d %s), want %v", dir, got, r.code, r.stderr, want)
		}
	}
	for _, hidden := range []string{"tool/fs.write", "tool/fs.write.d", "tool/shell.exec", "tool/shell.exec.d/policy", "bin"} {
		if _, err := os.Lstat(m.path(hidden)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s in coder's view: %v, want ENOENT (not even an entry that fails on open)", hidden, err)
		}
	}
	if got := mustReadFile(t, m.path("tool/dup.d/where")); got != filepath.Join(f.home, "tool")+"\n" {
		t.Errorf("tool/dup.d follows %q, want the home tier whose dup won", got)
	}
	r := runAs(t, f.as, runOpts{stdin: `{"path":"` + filepath.Join(f.root, "model/debug/echo.d/id") + `"}`}, "/bin/sh", "-c", m.path("tool/fs.read"))
	if r.code != 0 || !strings.Contains(r.stdout, "debug/echo") {
		t.Errorf("coder running tool/fs.read from its view:\n%s", r)
	}
	checkEcho(t, runAs(t, f.as, runOpts{}, "/bin/sh", "-c", m.path("model/main")+" from-the-view"), "from-the-view")
	m.stop()
	if after := digestTree(t, f.root); after != before {
		t.Errorf("mounting and using the view changed the durable tree:\n%s", diffLines(before, after))
	}
}

// The view follows the durable tree and the agent's authority live: a
// removed policy line hides a tool, a chmod shows one, a new model the
// policy allows appears.
func TestMountAgentViewLive(t *testing.T) {
	f := newAgentFixture(t)
	m := startMount(t, f.root, "--agent", "coder")
	has := func(name string) bool {
		_, err := os.Lstat(m.path("tool", name))
		n, _ := lsNames(m.path("tool"))
		return err == nil && slices.Contains(n, name)
	}
	if !has("fs.read") || has("fs.write") {
		t.Fatal("fixture view is wrong")
	}
	policy := filepath.Join(f.root, "agent/coder.d/policy")
	p := mustReadFile(t, policy)
	writeFile(t, policy, strings.Replace(p, "allow coder_t tool:fs.read execute\n", "", 1), 0o644)
	d := eventually(t, "tool gone after its policy line was removed", func() bool { return !has("fs.read") })
	t.Logf("policy line removed: tool/fs.read gone after %v", d)
	os.Chmod(filepath.Join(f.root, "tool/fs.write"), 0o755)
	d = eventually(t, "tool shown after chmod +x", func() bool { return has("fs.write") })
	t.Logf("chmod 0755: tool/fs.write shown after %v", d)
	writeFile(t, policy, p+"allow coder_t model:acme/m1 use\n", 0o644)
	mustOK(t, sh(t, "ctx", "model", "add", "--root", f.root, "acme/m1", "--driver", "openai-chat", "--base-url", "http://127.0.0.1:9/v1"))
	eventually(t, "allowed model added by ctx model add", func() bool { _, err := os.Stat(m.path("model/acme/m1")); return err == nil })
	if !has("fs.read") {
		t.Error("fs.read not back after its policy line was restored")
	}
}

// The agent reaches its model's socket through the entry it sees, with
// its own credentials.
func TestMountAgentViewSocket(t *testing.T) {
	f := newAgentFixture(t)
	startDaemon(t, f.root)
	m := startMount(t, f.root, "--agent", "coder")
	sock := m.path("model/debug/echo.sock")
	eventually(t, "echo.sock in the view", func() bool { _, err := os.Lstat(sock); return err == nil })
	pingThrough(t, sock)
	r := runAs(t, f.as, runOpts{}, applet("ctx"), "send", "--session", "t12", sock, "agent turn")
	checkEcho(t, r, "agent turn")
	if _, err := os.Stat(filepath.Join(f.home, "session", "model", "debug", "echo", "t12")); err != nil {
		t.Errorf("the session is not the agent uid's: %v", err)
	}
}

// digestTree is every path's type, mode, owner, size and content hash
// (link target for symlinks), sorted.
func digestTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v %d:%d %d %d", strings.TrimPrefix(p, root), fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			line += " -> " + l
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		lines = append(lines, line)
		return nil
	})
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func diffLines(a, b string) string {
	as, bs := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range as {
		if !slices.Contains(bs, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bs {
		if !slices.Contains(as, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// The agent sandbox mounts the agent's view at /ctx: inside, `ls
// /ctx/tool` is the list of tools that agent may run, and what it may
// not use does not exist there.
func TestMountAgentSandboxSeesItsView(t *testing.T) {
	needFuse(t)
	needRoot(t)
	cmd := "ls /ctx/tool; echo ---; ls /ctx; echo ---; ls /ctx/model/debug; echo ---; ls /ctx/tool/fs.write 2>&1; { echo x > /ctx/tool/fs.read.d/status; } 2>&1; true"
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"` + cmd + `"}`}}},
		fakeStep{Text: "done looking"})
	root, _ := agentRoot(t, fake, "coder", "--tool", "fs.read", "--tool", "shell.exec")
	sandboxBinds(t, root, "coder")
	before, _ := lsNames(filepath.Join(root, "tool"))
	if !slices.Contains(before, "fs.write") {
		t.Fatalf("fixture: the durable tool/ lacks fs.write: %v", before)
	}
	res := shellExecOf(t, root, "coder", "look at /ctx")
	parts := strings.Split(res.Stdout, "---")
	if len(parts) != 4 {
		t.Fatalf("shell.exec inside the sandbox said:\n%s", res.Stdout)
	}
	if got, want := strings.Fields(parts[0]), []string{"fs.read", "fs.read.d", "shell.exec", "shell.exec.d"}; !slices.Equal(got, want) {
		t.Errorf("ls /ctx/tool inside the sandbox = %v, want the agent's tools %v", got, want)
	}
	if got, want := strings.Fields(parts[1]), []string{"agent", "home", "model", "shared", "tool"}; !slices.Equal(got, want) {
		t.Errorf("ls /ctx inside the sandbox = %v, want %v (no bin/)", got, want)
	}
	if got := strings.Fields(parts[2]); slices.Contains(got, "echo") {
		t.Errorf("ls /ctx/model/debug = %v: debug/echo is not a model this agent may use", got)
	}
	if !strings.Contains(parts[3], "No such file") || !strings.Contains(parts[3], "Read-only") {
		t.Errorf("a hidden tool and a write inside the sandbox: %q, want ENOENT and EROFS", parts[3])
	}
	// The view is gone with the sandbox.
	if ms, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(ms), "fuse.cortexfs "+root+" ") {
		t.Errorf("a view of %s is still mounted after the run", root)
	}
}

// Inside a real ctx-agent sandbox, a model socket the agent may use is
// reachable through the path its /ctx shows: a plain connect(2) on
// /ctx/model/debug/echo.sock reaches cortexfsd and gets its pong. The
// view's .sock entry points into the sandbox's own /tmp, where the
// launcher binds each socket the view lists.
func TestMountAgentSandboxConnectsThroughItsView(t *testing.T) {
	needFuse(t)
	needRoot(t)
	py := `import socket,sys,json; s=socket.socket(socket.AF_UNIX); s.connect("/ctx/model/debug/echo.sock"); ` +
		`s.sendall(json.dumps({"op":"ping"}).encode()+bytes([10])); sys.stdout.write(s.makefile().readline())`
	args, _ := json.Marshal(map[string]any{"cmd": "/usr/bin/python3 -c '" + py + "' 2>&1; ls -l /ctx/model/debug/"})
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: string(args)}}},
		fakeStep{Text: "connected"})
	root, _ := agentRoot(t, fake, "dialer", "--tool", "shell.exec")
	sandboxBinds(t, root, "dialer")
	p, err := os.OpenFile(filepath.Join(root, "agent", "dialer.d", "policy"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.WriteString("allow " + agentType(t, root, "dialer") + " model:debug/echo use\n")
	p.Close()
	startDaemon(t, root)
	res := shellExecOf(t, root, "dialer", "dial the echo model")
	if !strings.Contains(res.Stdout, `"type":"pong"`) {
		t.Fatalf("connect(2) on /ctx/model/debug/echo.sock inside the sandbox:\n%s", res.Stdout)
	}
}
