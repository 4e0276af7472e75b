package t

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The escape suite: an agent tries, through real tool calls the scripted
// model asks for, what its sandbox must stop; each case has a control run
// that shows the same action succeeds where it is allowed. It runs for
// iso=uid launched by root and for iso=userns launched by an unprivileged
// user.
func TestAgentEscape(t *testing.T) {
	for _, prof := range escapeProfiles {
		t.Run(prof.name, func(t *testing.T) {
			b := newEscapeBox(t, prof)
			t.Run("hidden-host-file", b.hiddenHostFile)
			t.Run("read-only-mount", b.readOnlyMount)
			t.Run("no-privileges", b.noPrivileges)
			t.Run("setuid-binary", b.setuidBinary)
			t.Run("network", b.network)
			t.Run("own-processes-only", b.ownProcesses)
			t.Run("stop-and-kill-leave-nothing", b.stopAndKill)
			t.Run("no-credential-inside", b.noCredential)
			t.Run("child-sees-less", b.childSeesLess)
			t.Run("ctx-view", b.ctxView)
		})
	}
}

// A host file no mount exposes is not there; bound in, the same read works.
func (b *escapeBox) hiddenHostFile(t *testing.T) {
	hid := filepath.Join(b.base, "hidden")
	b.mkdir(hid, b.agent)
	must(t, os.WriteFile(filepath.Join(hid, "secret.txt"), []byte("TOPSECRET-HOST"), 0o644))
	args := `{"path":"` + hid + `/secret.txt"}`
	b.setMounts()
	if res := b.tool("fs.read", args); !strings.Contains(res, "ENOENT") || strings.Contains(res, "TOPSECRET") {
		t.Errorf("read of an unmounted host file: %s, want ENOENT", res)
	}
	b.setMounts(mountLine(hid, hid, "ro", "bind"))
	if res := b.tool("fs.read", args); !strings.Contains(res, "TOPSECRET-HOST") {
		t.Errorf("control: the bound file did not read: %s", res)
	}
}

// A write into a ro mount is EROFS, though the agent's identity owns the
// directory; bound rw, the same write lands on the host.
func (b *escapeBox) readOnlyMount(t *testing.T) {
	d := filepath.Join(b.base, "data")
	b.mkdir(d, b.agent)
	args := `{"path":"/data/out.txt","content":"written"}`
	b.setMounts(mountLine(d, "/data", "ro", "rbind,nosuid,nodev"))
	if res := b.tool("fs.write", args); !strings.Contains(res, "EROFS") {
		t.Errorf("write into a ro mount: %s, want EROFS", res)
	}
	if _, err := os.Stat(filepath.Join(d, "out.txt")); err == nil {
		t.Fatalf("the write reached the host through a ro mount")
	}
	b.setMounts(mountLine(d, "/data", "rw", "rbind,nosuid,nodev"))
	if res := b.tool("fs.write", args); strings.Contains(res, "error") {
		t.Errorf("control: write into a rw mount: %s", res)
	}
	if got, err := os.ReadFile(filepath.Join(d, "out.txt")); err != nil || string(got) != "written" {
		t.Errorf("control: the rw write is not on the host: %q %v", got, err)
	}
}

// Inside, a tool has no capability, no_new_privs and the seccomp filter;
// the same read outside any agent shows none of that.
func (b *escapeBox) noPrivileges(t *testing.T) {
	b.setMounts()
	in := field(t, b.tool("fs.read", `{"path":"/proc/self/status"}`), "content")
	for k, want := range map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"} {
		if got := statusField(in, k); got != want {
			t.Errorf("inside: %s = %q, want %q", k, got, want)
		}
	}
	out := field(t, b.direct("fs.read", `{"path":"/proc/self/status"}`), "content")
	if statusField(out, "Seccomp") != "0" || statusField(out, "NoNewPrivs") != "0" {
		t.Errorf("control: outside the sandbox the same read shows Seccomp %q NoNewPrivs %q", statusField(out, "Seccomp"), statusField(out, "NoNewPrivs"))
	}
	if !b.prof.asUser && statusField(out, "CapEff") == "0000000000000000" {
		t.Errorf("control: root outside the sandbox shows no capabilities")
	}
}

// A setuid-root binary in a mount without nosuid does not raise the
// agent's privileges; run by the same user outside, it does.
func (b *escapeBox) setuidBinary(t *testing.T) {
	d := filepath.Join(b.base, "suid")
	b.mkdir(d, testUser{})
	bin := filepath.Join(d, "id-suid")
	data, err := os.ReadFile("/usr/bin/id")
	must(t, err)
	must(t, os.WriteFile(bin, data, 0o755))
	must(t, os.Chown(bin, 0, 0))
	must(t, os.Chmod(bin, 0o755|os.ModeSetuid))
	b.setMounts(mountLine(d, "/suid", "rw", "rbind"))
	res := b.tool("shell.exec", `{"cmd":"/suid/id-suid"}`)
	out := field(t, res, "stdout")
	if !strings.Contains(out, "uid="+strconv.Itoa(b.agent.UID)) || strings.Contains(out, "euid=0") {
		t.Errorf("setuid-root id inside: %s, want uid=%d and no euid=0", res, b.agent.UID)
	}
	ctl := runAs(t, actor{u: &b.agent, home: "/"}, runOpts{}, bin)
	if !strings.Contains(ctl.stdout, "euid=0") {
		t.Errorf("control: the setuid binary run by uid %d outside did not get euid 0:\n%s", b.agent.UID, ctl)
	}
}

// Without allow <type> network:default connect only loopback exists: the
// host's 127.0.0.1 listener is out of reach; with it, it is reached.
func (b *escapeBox) network(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	args := `{"cmd":"bash -c 'exec 3<>/dev/tcp/127.0.0.1/` + port + ` && echo CONNECTED'"}`
	b.setMounts()
	b.setPolicy()
	if res := b.tool("shell.exec", args); strings.Contains(field(t, res, "stdout"), "CONNECTED") {
		t.Errorf("connected to the host's listener without network:default connect: %s", res)
	}
	b.setPolicy("allow coder_t network:default connect\n")
	defer b.setPolicy()
	if res := b.tool("shell.exec", args); !strings.Contains(field(t, res, "stdout"), "CONNECTED") {
		t.Errorf("control: with network:default connect the listener was not reached: %s", res)
	}
}

// The agent's /proc lists only its own processes; outside, the same
// listing shows the host's (this test's process among them).
func (b *escapeBox) ownProcesses(t *testing.T) {
	b.setMounts()
	self := strconv.Itoa(os.Getpid())
	numeric := func(s string) []string {
		var out []string
		for _, f := range strings.Fields(s) {
			if _, err := strconv.Atoi(f); err == nil {
				out = append(out, f)
			}
		}
		return out
	}
	in := numeric(field(t, b.tool("shell.exec", `{"cmd":"ls /proc"}`), "stdout"))
	if len(in) == 0 || len(in) > 8 || slices.Contains(in, self) {
		t.Errorf("/proc inside lists %v (this test is pid %s)", in, self)
	}
	if out := numeric(field(t, b.direct("shell.exec", `{"cmd":"ls /proc"}`), "stdout")); !slices.Contains(out, self) {
		t.Errorf("control: /proc outside does not list this test's pid %s: %v", self, out)
	}
}

// startWithSleeper starts the agent process and has it leave a process
// that escaped its tool's process group; it returns the sandbox's pid
// namespace, which holds that process.
func (b *escapeBox) startWithSleeper(t *testing.T, tag string) string {
	t.Helper()
	mustOK(t, b.as(runOpts{}, applet("ctx-agent"), "start", "--root", b.root, "coder"))
	b.fake.script(fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"setsid sleep ` + tag + ` </dev/null >/dev/null 2>&1 & sleep 1"}`}}},
		fakeStep{Text: "left it running"})
	r := mustOK(t, b.as(runOpts{}, applet("ctx"), "send", filepath.Join(b.root, "agent", "coder"), "leave a process"))
	var pids []int
	for i := 0; i < 200 && len(pids) == 0; i++ {
		pids = procsWith("sleep " + tag)
		time.Sleep(50 * time.Millisecond)
	}
	if len(pids) == 0 {
		t.Fatalf("no sleeper inside the sandbox after:\n%s", r)
	}
	ns := pidNS(pids[0])
	if ns == pidNS(os.Getpid()) {
		t.Fatalf("the tool's process is in the host's pid namespace")
	}
	return ns
}

// After ctx-agent stop, and after SIGKILL of the launcher, no process of
// the agent — init, runtime, or a process a tool left behind — remains.
func (b *escapeBox) stopAndKill(t *testing.T) {
	b.setMounts()
	b.setPolicy()
	t.Cleanup(func() { b.as(runOpts{}, applet("ctx-agent"), "stop", "--root", b.root, "coder") })
	ns := b.startWithSleeper(t, "7101")
	if n := len(inNS(ns)); n < 3 {
		t.Errorf("the sandbox holds %d processes, want the init, the runtime and the sleeper", n)
	}
	mustOK(t, b.as(runOpts{}, applet("ctx-agent"), "stop", "--root", b.root, "coder"))
	waitNone(t, "after ctx-agent stop", ns)
	ns = b.startWithSleeper(t, "7102")
	pid, err := strconv.Atoi(strings.TrimSpace(b.read("pid")))
	must(t, err)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	waitNone(t, "after SIGKILL of the launcher", ns)
}

// The provider key is nowhere inside — not in the environment of any
// process of the sandbox, not in a file, not in any output — yet the
// agent's model calls carried it.
func (b *escapeBox) noCredential(t *testing.T) {
	b.setMounts()
	b.setPolicy()
	t.Cleanup(func() { b.as(runOpts{}, applet("ctx-agent"), "stop", "--root", b.root, "coder") })
	ns := b.startWithSleeper(t, "7103")
	sawRuntime := false
	for _, pid := range inNS(ns) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.Fatalf("read the environment of pid %d: %v", pid, err)
		}
		if strings.Contains(string(env), escapeKey) {
			t.Errorf("the key is in the environment of pid %d in the sandbox", pid)
		}
		if argv, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil || strings.Contains(string(argv), escapeKey) {
			t.Errorf("the key is in the argv of pid %d in the sandbox (or it could not be read: %v)", pid, err)
		}
		sawRuntime = sawRuntime || strings.Contains(string(env), "CTX_ROOT=/ctx\x00")
	}
	if !sawRuntime {
		t.Errorf("no process of the sandbox has the runtime's environment (CTX_ROOT=/ctx): the check read the wrong processes")
	}
	dump := b.tool("shell.exec", `{"cmd":"cat /proc/self/environ; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline; done 2>&1; env"}`)
	if !strings.Contains(dump, "CTX_HOME=") || strings.Contains(dump, escapeKey) {
		t.Errorf("a tool's view of every environment it can read: key present=%v\n%.400s", strings.Contains(dump, escapeKey), dump)
	}
	if got := b.auths(); len(got) == 0 || got[len(got)-1] != "Bearer "+escapeKey {
		t.Fatalf("the provider did not get the key, so this proves nothing: %q", got)
	}
	for _, req := range b.fake.requests() {
		if strings.Contains(reqText(req), escapeKey) {
			t.Errorf("the key is in a model request's messages")
		}
	}
	if hits := grepTree(t, b.base, escapeKey); len(hits) > 0 {
		t.Errorf("the key is in files: %v", hits)
	}

}

// A child made by agent.create with a narrower mount cannot see what its
// parent hid, nor what it left out of the child's mounts; the parent, and
// the child through its own mount, read what they were given.
func (b *escapeBox) childSeesLess(t *testing.T) {
	shared, private := filepath.Join(b.work, "shared"), filepath.Join(b.work, "private")
	b.mkdir(shared, b.agent)
	b.mkdir(private, b.agent)
	must(t, os.WriteFile(filepath.Join(shared, "ok.txt"), []byte("SHARED-OK"), 0o644))
	must(t, os.WriteFile(filepath.Join(private, "secret.txt"), []byte("PARENT-ONLY"), 0o644))
	hidden := filepath.Join(b.base, "hidden-from-parent")
	b.mkdir(hidden, b.agent)
	must(t, os.WriteFile(filepath.Join(hidden, "x.txt"), []byte("NOBODY"), 0o644))
	b.setMounts()
	b.setPolicy("allow coder_t tool:agent.create execute\n", "allow coder_t tool:agent.start execute\n",
		"allow coder_t agent:reviewer create\n", "allow coder_t agent:reviewer start\n")
	for _, tl := range []string{"agent.create", "agent.start"} {
		f, err := os.OpenFile(filepath.Join(b.root, "tool", tl+".d", "policy"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		must(t, err)
		f.WriteString("allow coder_t tool:" + tl + " execute\n")
		f.Close()
	}
	t.Cleanup(func() {
		b.as(runOpts{}, applet("ctx-agent"), "stop", "--root", b.root, "reviewer")
		b.as(runOpts{}, applet("ctx-agent"), "stop", "--root", b.root, "coder")
	})
	create := `{"name":"reviewer","tools":["fs.read"],"mount":[["/ctx","/ctx","ro"],["` + shared + `","/data","ro"]]}`
	b.fake.script(
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: create}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.start", Args: `{"name":"reviewer"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"` + private + `/secret.txt"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"` + hidden + `/x.txt"}`}}},
		fakeStep{Text: "made a reviewer"})
	mustOK(t, b.as(runOpts{}, applet("ctx-agent"), "start", "--root", b.root, "coder"))
	r := mustOK(t, b.as(runOpts{}, applet("ctx"), "send", filepath.Join(b.root, "agent", "coder"), "make a reviewer"))
	parent := b.lastToolResults(4)
	if !strings.Contains(parent[0], `"name":"reviewer"`) || !strings.Contains(parent[1], `"pid"`) {
		t.Fatalf("the parent could not create and start its child: %q\n%s", parent, r)
	}
	if !strings.Contains(parent[2], "PARENT-ONLY") {
		t.Errorf("control: the parent cannot read its own private file: %s", parent[2])
	}
	if !strings.Contains(parent[3], "ENOENT") {
		t.Errorf("the parent reads what no mount of it exposes: %s", parent[3])
	}
	b.fake.script(
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"/data/ok.txt"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"` + private + `/secret.txt"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"` + hidden + `/x.txt"}`}}},
		fakeStep{Text: "reviewed"})
	r = mustOK(t, b.as(runOpts{}, applet("ctx"), "send", filepath.Join(b.root, "agent", "reviewer"), "look"))
	child := b.lastToolResults(3)
	if !strings.Contains(child[0], "SHARED-OK") {
		t.Errorf("control: the child cannot read through its own mount: %s\n%s", child[0], r)
	}
	if !strings.Contains(child[1], "ENOENT") || strings.Contains(child[1], "PARENT-ONLY") {
		t.Errorf("the child sees the parent's file it was not given: %s", child[1])
	}
	if !strings.Contains(child[2], "ENOENT") || strings.Contains(child[2], "NOBODY") {
		t.Errorf("the child sees what the parent hid: %s", child[2])
	}
}

// lastToolResults are the results of the last n tool calls of the last
// run, as the model got them.
func (b *escapeBox) lastToolResults(n int) []string {
	b.t.Helper()
	reqs := b.fake.requests()
	msgs := reqs[len(reqs)-1].Messages
	var out []string
	for _, m := range msgs {
		if m.Role == "tool" && m.Content != nil {
			out = append(out, *m.Content)
		}
	}
	if len(out) < n {
		b.t.Fatalf("the last run had %d tool results, want %d", len(out), n)
	}
	return out[len(out)-n:]
}

// /ctx inside is the agent's view of the tree: tool/ lists exactly the
// tools it may run (the host's tool/ holds more). A launcher that cannot
// mount FUSE (an unprivileged user without a working fusermount3) binds
// the tree as .d/mount says, read-only, and says so on stderr.
func (b *escapeBox) ctxView(t *testing.T) {
	b.setMounts()
	b.setPolicy()
	b.fake.script(fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"ls /ctx/tool; touch /ctx/tool/x"}`}}}, fakeStep{Text: "done"})
	b.sessions++
	r := mustOK(t, b.as(runOpts{}, filepath.Join(b.root, "agent", "coder"), "--session", "s"+strconv.Itoa(b.sessions), "go"))
	res := b.lastToolResults(1)[0]
	got := strings.Fields(field(t, res, "stdout"))
	host, err := os.ReadDir(filepath.Join(b.root, "tool"))
	must(t, err)
	if len(host) <= 6 {
		t.Fatalf("the host's tool/ holds only %d entries: the check would prove nothing", len(host))
	}
	want := []string{"fs.read", "fs.read.d", "fs.write", "fs.write.d", "shell.exec", "shell.exec.d"}
	switch {
	case slices.Equal(got, want):
	case b.prof.asUser && strings.Contains(r.stderr, "could not be mounted") && len(got) == len(host):
		t.Logf("no FUSE for uid %d here: /ctx is the tree as bound (%s)", b.agent.UID, strings.TrimSpace(r.stderr))
	default:
		t.Errorf("/ctx/tool inside lists %v, want %v\n%s", got, want, r)
	}
	if !strings.Contains(field(t, res, "stderr"), "Read-only file system") {
		t.Errorf("a write under /ctx was not EROFS: %s", res)
	}
}
