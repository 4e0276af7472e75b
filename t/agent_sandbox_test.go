package t

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// An agent whose sandbox cannot be built does not run: a non-root user
// asking for iso=uid gets EPERM naming the profile, from a one-shot run
// and from ctx-agent start alike, and nothing ran (the model was never
// called). The control: the same user's iso=userns agent runs.
func TestAgentSandboxIsoUIDNeedsRoot(t *testing.T) {
	u := ensureUser(t, "ctxt11c")
	a := actor{u: &u, home: "/"}
	base := publicDir(t, a)
	root := filepath.Join(base, "ctx")
	mustOK(t, runAs(t, a, runOpts{}, applet("ctx"), "init", "--root", root, "--runner", applet("cortexfs-object-runner")))
	fake := newFakeChat(t, fakeStep{Text: "hello from userns"})
	home := filepath.Join(root, "home", strconv.Itoa(u.UID))
	writeModel(t, home, "fake/chat", map[string]string{"id": "fake-chat\n", "driver": "openai-chat\n", "session": "none\n",
		"status": "ready\n", "default": "base_url=" + fake.srv.URL + "/v1\nauth=none\n"})
	chownTree(t, home, a)
	for _, iso := range []string{"uid", "userns"} {
		mustOK(t, runAs(t, a, runOpts{}, applet("ctx"), "agent", "create", "a"+iso, "--root", root, "--model", "fake/chat", "--iso", iso))
	}
	r := runAs(t, a, runOpts{}, filepath.Join(root, "agent", "auid"), "hi")
	if r.code != 13 || !strings.Contains(r.stdout, `"code":"EPERM"`) || !strings.Contains(r.stdout, "iso=uid") {
		t.Errorf("one-shot iso=uid as uid %d: want exit 13 EPERM naming iso=uid, got:\n%s", u.UID, r)
	}
	r = runAs(t, a, runOpts{}, applet("ctx-agent"), "start", "--root", root, "auid")
	if r.code == 0 || !strings.Contains(r.stderr, "EPERM") || !strings.Contains(r.stderr, "iso=uid") {
		t.Errorf("ctx-agent start of iso=uid as uid %d: want a failure naming EPERM and iso=uid, got:\n%s", u.UID, r)
	}
	if n := len(fake.requests()); n != 0 {
		t.Fatalf("the model was called %d times by an agent that must not run", n)
	}
	r = mustOK(t, runAs(t, a, runOpts{}, applet("ctx"), "agent", "show", "--root", root, "auid"))
	if !strings.Contains(r.stdout, "cannot start: EPERM") {
		t.Errorf("ctx agent show does not say why iso=uid cannot start:\n%s", r)
	}
	r = mustOK(t, runAs(t, a, runOpts{}, filepath.Join(root, "agent", "auserns"), "hi"))
	if !strings.Contains(r.stdout, "hello from userns") {
		t.Errorf("control: the iso=userns agent of the same user did not run:\n%s", r)
	}
}

// ctx agent show and ctx doctor report the sandbox an agent would get
// (profile, mounts, network) and why it cannot start: a mount source that
// does not exist is ENOENT with its line, a bad mount line EINVAL with its
// line; running such an agent fails with the same reason.
func TestAgentSandboxShowAndDoctor(t *testing.T) {
	fake := newFakeChat(t)
	root, work := agentRoot(t, fake, "coder")
	r := mustOK(t, sh(t, "ctx", "agent", "show", "--root", root, "coder", "--json"))
	var v struct {
		Sandbox struct {
			CanStart bool   `json:"can_start"`
			Profile  string `json:"profile"`
			Network  bool   `json:"network"`
			Mounts   []struct {
				Kind, Target, Mode string
				Line               int
			} `json:"mounts"`
			CtxPath []string `json:"ctx_path"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("show --json: %v\n%s", err, r)
	}
	sb := v.Sandbox
	if !sb.CanStart || sb.Profile != "shared" || sb.Network || len(sb.Mounts) < 5 || sb.Mounts[0].Target != "/proc" ||
		sb.Mounts[3].Target != "/ctx" || sb.Mounts[3].Mode != "ro" || sb.Mounts[3].Line != 1 {
		t.Errorf("show --json sandbox: %+v", sb)
	}
	appendPolicy(t, root, "coder", "allow coder_t network:default connect")
	if r := mustOK(t, sh(t, "ctx", "agent", "show", "--root", root, "coder")); !strings.Contains(r.stdout, "network   yes") || !strings.Contains(r.stdout, "/home/agent") {
		t.Errorf("show does not report network yes and the mounts:\n%s", r.stdout)
	}
	mount := filepath.Join(root, "agent", "coder.d", "mount")
	orig, _ := os.ReadFile(mount)
	bad := append(append([]byte{}, orig...), []byte("/nonexistent/src\t/x\tro\tbind\n")...)
	must(t, os.WriteFile(mount, bad, 0o644))
	line := strconv.Itoa(strings.Count(string(bad), "\n"))
	for _, out := range []string{
		mustOK(t, sh(t, "ctx", "agent", "show", "--root", root, "coder")).stdout,
		sh(t, "ctx", "doctor", "--root", root).stdout,
		run(t, runOpts{dir: work}, filepath.Join(root, "agent", "coder"), "hi").stdout,
	} {
		if !strings.Contains(out, "ENOENT") || !strings.Contains(out, "mount line "+line) || !strings.Contains(out, "/nonexistent/src") {
			t.Errorf("a missing mount source is not reported as ENOENT on line %s:\n%s", line, out)
		}
	}
	must(t, os.WriteFile(mount, append(append([]byte{}, orig...), []byte("relative\t/x\tro\tbind\n")...), 0o644))
	line = strconv.Itoa(strings.Count(string(orig), "\n") + 1)
	if r := sh(t, "ctx", "doctor", "--root", root); r.code != 1 || !strings.Contains(r.stdout, "FAIL agent-sandbox") ||
		!strings.Contains(r.stdout, "EINVAL") || !strings.Contains(r.stdout, "mount line "+line) {
		t.Errorf("ctx doctor does not fail the agent with EINVAL on line %s:\n%s", line, r)
	}
	if r := run(t, runOpts{}, filepath.Join(root, "agent", "coder"), "hi"); r.code != 2 || !strings.Contains(r.stdout, "mount line "+line) {
		t.Errorf("running an agent with a bad mount line: want exit 2 naming the line, got:\n%s", r)
	}
	if len(fake.requests()) != 0 {
		t.Errorf("the model was called by an agent that cannot start")
	}
	must(t, os.WriteFile(mount, orig, 0o644))
	if r := sh(t, "ctx", "doctor", "--root", root, "--verbose"); !strings.Contains(r.stdout, "ok   agent-sandbox") || strings.Contains(r.stdout, "FAIL agent-sandbox") {
		t.Errorf("control: ctx doctor does not pass the repaired agent:\n%s", r)
	}
}

// A minimal image: .d/root is a directory holding only the installed
// binary and its hardlinks (cortexfs install ROOTFS/bin), plus the mounts
// the agent declares (the tree, its work directory); the agent runs its
// built-in tools there. A shell is not part of the image, so shell.exec
// finds no /bin/sh: nothing of the host leaks in to provide one.
func TestAgentMinimalImage(t *testing.T) {
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs.write", Args: `{"path":"answer.txt","content":"from the image"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"echo hi"}`}}},
		fakeStep{Text: "done"})
	root, work := agentRoot(t, fake, "coder", "--tool", "fs.read", "--tool", "fs.write", "--tool", "shell.exec")
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	mustOK(t, sh(t, "cortexfs", "install", filepath.Join(rootfs, "bin")))
	must(t, os.WriteFile(filepath.Join(root, "agent", "coder.d", "root"), []byte(rootfs+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "agent", "coder.d", "mount"), []byte(
		root+"\t/ctx\tro\trbind,nosuid,nodev\n"+work+"\t/work\trw\trbind,nosuid,nodev\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "agent", "coder.d", "cwd"), []byte("/work\n"), 0o644))
	allowMounts(t, root, "coder")
	must(t, os.WriteFile(filepath.Join(work, "notes.txt"), []byte("inside the image"), 0o644))
	r := mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent", "coder"), "use the tools"))
	res := toolResults(fake)
	if len(res) != 3 {
		t.Fatalf("tool results %q\n%s", res, r)
	}
	if !strings.Contains(res[0], "inside the image") || !strings.Contains(res[0], `"path":"/work/notes.txt"`) {
		t.Errorf("fs.read in the minimal image: %s", res[0])
	}
	if b, err := os.ReadFile(filepath.Join(work, "answer.txt")); err != nil || string(b) != "from the image" {
		t.Errorf("fs.write in the minimal image did not reach the work directory: %q %v (%s)", b, err, res[1])
	}
	if !strings.Contains(res[2], "/bin/sh") {
		t.Errorf("shell.exec found a shell the image does not have: %s", res[2])
	}
	es, _ := os.ReadDir(rootfs)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "bin ctx dev proc tmp work" {
		t.Errorf("the image holds %q: want the binary's bin/ and the mount points made for the sandbox", got)
	}
}

// iso=shared keeps the launcher's uid but still gives the agent its own
// pid and mount namespaces: a shell.exec inside reports the host uid, pid
// and mount namespace links that differ from the host's, and a /proc that
// lists only the sandbox's processes. The control is the same readings on
// the host.
func TestAgentSandboxIsoShared(t *testing.T) {
	cmd := `id -u; readlink /proc/self/ns/pid /proc/self/ns/mnt; ls /proc | grep -c '^[0-9]'`
	args, _ := json.Marshal(map[string]any{"cmd": cmd})
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: string(args)}}},
		fakeStep{Text: "looked"})
	root, _ := agentRoot(t, fake, "sharer", "--tool", "shell.exec", "--iso", "shared")
	sandboxBinds(t, root, "sharer")
	res := shellExecOf(t, root, "sharer", "who am I")
	got := strings.Fields(res.Stdout)
	if len(got) != 4 {
		t.Fatalf("inside iso=shared: %q", res.Stdout)
	}
	hostPid, _ := os.Readlink("/proc/self/ns/pid")
	hostMnt, _ := os.Readlink("/proc/self/ns/mnt")
	if got[0] != strconv.Itoa(os.Getuid()) {
		t.Errorf("iso=shared runs as uid %s, want the launcher's %d", got[0], os.Getuid())
	}
	if got[1] == hostPid || got[2] == hostMnt {
		t.Errorf("iso=shared shares a namespace with the host: pid %s (host %s), mnt %s (host %s)", got[1], hostPid, got[2], hostMnt)
	}
	if n, _ := strconv.Atoi(got[3]); n == 0 || n > 8 {
		t.Errorf("iso=shared /proc lists %s processes, want only the sandbox's few", got[3])
	}
}
