package t

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// escapeProfile is one way the escape suite runs its agent: iso=uid
// launched by root (the agent has a uid of its own), or iso=userns
// launched by an unprivileged user.
type escapeProfile struct {
	name   string
	iso    string
	asUser bool // the launcher is an unprivileged user
}

var escapeProfiles = []escapeProfile{{"uid-as-root", "uid", false}, {"userns-as-user", "userns", true}}

// escapeBox is one agent "coder" in a fresh tree, with a scripted fake
// model that wants the sentinel key, as a profile runs it.
type escapeBox struct {
	t        *testing.T
	prof     escapeProfile
	launcher actor    // who runs ctx-agent and the agent object
	agent    testUser // the agent's identity outside the sandbox
	base     string   // everything of the test, 0755
	root     string   // the tree
	work     string   // the agent's cwd, bound read-write
	fake     *fakeChat
	auths    func() []string
	mounts   string // .d/mount as ctx agent create wrote it, plus the host's programs
	policy   string
	sessions int
}

const escapeKey = "sk-ctxt11-SENTINEL-9c4e1a77d2"

func newEscapeBox(t *testing.T, prof escapeProfile) *escapeBox {
	t.Helper()
	needRoot(t)
	b := &escapeBox{t: t, prof: prof}
	if prof.asUser {
		u := ensureUser(t, "ctxt11b")
		b.launcher, b.agent = actor{u: &u, home: "/"}, u
	} else {
		b.launcher, b.agent = actor{home: "/root"}, ensureUser(t, "ctxt11a")
	}
	base, err := os.MkdirTemp("", "cortexfs-t11-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	b.base, b.root, b.work = base, filepath.Join(base, "ctx"), filepath.Join(base, "work")
	must(t, os.Chmod(base, 0o755))
	must(t, os.Chown(base, b.launcher.uid(), b.launcher.gid()))
	b.mkdir(b.work, b.agent)
	mustOK(t, b.as(runOpts{}, applet("ctx"), "init", "--root", b.root, "--runner", applet("cortexfs-object-runner")))
	b.fake, b.auths = recordingFake(t)
	writeModel(t, b.root, "fake/chat", map[string]string{"id": "fake-chat\n", "driver": "openai-chat\n", "session": "none\n",
		"status": "ready\n", "log": "", "default": "base_url=" + b.fake.srv.URL + "/v1\nauth=required\n"})
	chownTree(t, filepath.Join(b.root, "model"), b.launcher)
	mustOK(t, b.as(runOpts{}, applet("ctx"), "agent", "create", "coder", "--root", b.root, "--model", "fake/chat",
		"--cwd", b.work, "--iso", prof.iso, "--tool", "fs.read", "--tool", "fs.write", "--tool", "shell.exec"))
	if !prof.asUser {
		// The agent runs as a uid of its own; its home (root/, sessions)
		// is its own, its control files stay root's.
		for f, v := range map[string]int{"uid": b.agent.UID, "gid": b.agent.GID} {
			must(t, os.WriteFile(b.ctl(f), []byte(strconv.Itoa(v)+"\n"), 0o644))
		}
		chownTree(t, filepath.Join(b.root, "home", "0", "agent", "coder"), actor{u: &b.agent})
	}
	sandboxBinds(t, b.root, "coder")
	b.mounts, b.policy = b.read("mount"), b.read("policy")
	return b
}

func (b *escapeBox) ctl(f string) string { return filepath.Join(b.root, "agent", "coder.d", f) }

func (b *escapeBox) read(f string) string {
	data, err := os.ReadFile(b.ctl(f))
	must(b.t, err)
	return string(data)
}

// mkdir makes a 0755 directory owned by u.
func (b *escapeBox) mkdir(d string, u testUser) {
	must(b.t, os.MkdirAll(d, 0o755))
	must(b.t, os.Chown(d, u.UID, u.GID))
}

// as runs a program as the launcher, with the provider key in its
// environment (the launcher holds it; nothing in the sandbox may).
func (b *escapeBox) as(o runOpts, path string, args ...string) result {
	b.t.Helper()
	o.env = append(o.env, "FAKE_API_KEY="+escapeKey)
	return runAs(b.t, b.launcher, o, path, args...)
}

// setMounts makes .d/mount the baseline plus extra lines.
func (b *escapeBox) setMounts(extra ...string) {
	must(b.t, os.WriteFile(b.ctl("mount"), []byte(b.mounts+strings.Join(extra, "")), 0o644))
	allowMounts(b.t, b.root, "coder") // each mount needs its mount:<name> line
}

// setPolicy makes .d/policy the baseline plus extra lines.
func (b *escapeBox) setPolicy(extra ...string) {
	must(b.t, os.WriteFile(b.ctl("policy"), []byte(b.policy+strings.Join(extra, "")), 0o644))
	allowMounts(b.t, b.root, "coder")
}

func mountLine(src, dst, mode, opts string) string {
	return src + "\t" + dst + "\t" + mode + "\t" + opts + "\n"
}

// tool has the model call one tool, runs the agent once (a session of its
// own) and returns the tool's result as the model got it.
func (b *escapeBox) tool(name, args string) string {
	b.t.Helper()
	b.fake.script(fakeStep{Calls: []fakeCall{{Name: name, Args: args}}}, fakeStep{Text: "done"})
	b.sessions++
	r := b.as(runOpts{}, filepath.Join(b.root, "agent", "coder"), "--session", "s"+strconv.Itoa(b.sessions), "go")
	mustOK(b.t, r)
	reqs := b.fake.requests()
	if len(reqs) > 0 {
		msgs := reqs[len(reqs)-1].Messages
		if m := msgs[len(msgs)-1]; m.Role == "tool" && m.Content != nil {
			return *m.Content
		}
	}
	b.t.Fatalf("the model got no tool result for %s:\n%s", name, r)
	return ""
}

// field is one member of a tool's JSON result ("" if absent).
func field(t *testing.T, result, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(result), &m); err != nil {
		return ""
	}
	switch v := m[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// statusField reads "Key:\tvalue" from a /proc/PID/status text.
func statusField(status, key string) string {
	for _, l := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// direct runs a tool object once outside any agent (the control runs), as
// the launcher, and returns its role "tool" message.
func (b *escapeBox) direct(tool, args string) string {
	b.t.Helper()
	r := mustOK(b.t, b.as(runOpts{dir: b.work}, filepath.Join(b.root, "tool", tool), "--jsonl", args))
	for _, l := range strings.Split(r.stdout, "\n") {
		var f agentFrame
		if json.Unmarshal([]byte(l), &f) == nil && f.Type == "message" && f.Role == "tool" {
			return f.text()
		}
	}
	b.t.Fatalf("no tool message from %s:\n%s", tool, r)
	return ""
}

// procsWith lists host pids whose command line holds needle.
func procsWith(needle string) []int {
	var out []int
	es, _ := os.ReadDir("/proc")
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), needle) {
			out = append(out, pid)
		}
	}
	return out
}

// pidNS is the pid namespace of pid ("" when it is gone).
func pidNS(pid int) string {
	l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return l
}

// inNS lists the live host pids in pid namespace ns.
func inNS(ns string) []int {
	var out []int
	es, _ := os.ReadDir("/proc")
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && ns != "" && pidNS(pid) == ns && pidAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// waitNone polls until no process is left in ns.
func waitNone(t *testing.T, what, ns string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(inNS(ns)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: processes of the agent remain on the host: %v", what, inNS(ns))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
