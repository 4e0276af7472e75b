package t

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// toolResults are the tool messages the model got, in order.
func toolResults(f *fakeChat) []string {
	var out []string
	seen := 0
	for _, r := range f.requests() {
		var tools []string
		for _, m := range r.Messages {
			if m.Role == "tool" && m.Content != nil {
				tools = append(tools, *m.Content)
			}
		}
		if len(tools) > seen {
			out = append(out, tools[seen:]...)
			seen = len(tools)
		}
	}
	return out
}

// Issue 15, defect 5: a parent refused shell.exec by the tool's own
// .d/policy (which allows only admin_t) created a child labelled admin_t
// with shell.exec, and the child ran it. A child label must be fresh (no
// policy names it) or the parent's own, and each permission asked for must
// be one the parent effectively has, under every check of the seed.
func TestSecurityChildLabelAttenuation(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "marker")
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"kid","label":"admin_t","tools":["shell.exec"]}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"kid","label":"user_u:agent_r:admin_t:s0"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"kid","tools":["shell.exec"]}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"kid","label":"boss_t"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"kid","tools":["fs.read"]}`}}},
		fakeStep{Text: "done creating"})
	root, _ := agentRoot(t, fake, "coder", "--tool", "agent.create", "--tool", "shell.exec", "--tool", "fs.read")
	appendPolicy(t, root, "coder", "allow coder_t agent:kid create")
	// shell.exec is the admin's: its own policy allows admin_t only.
	if err := os.WriteFile(filepath.Join(root, "tool/shell.exec.d/policy"), []byte("allow admin_t tool:shell.exec execute\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another agent already holds boss_t: not a fresh label either.
	mustOK(t, sh(t, "ctx", "agent", "create", "boss", "--root", root, "--model", "fake/chat", "--label", "boss_t"))
	mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "make children"))
	res := toolResults(fake)
	if len(res) != 5 {
		t.Fatalf("want 5 tool results, got %d: %q", len(res), res)
	}
	for i, want := range []string{"EACCES", "EACCES", "EACCES", "EACCES", `"name":"kid"`} {
		if !strings.Contains(res[i], want) {
			t.Errorf("agent.create #%d: result %s, want %s", i+1, res[i], want)
		}
	}
	if l := ctlString(t, root, "kid", "label"); strings.Contains(l, "admin_t") || strings.Contains(l, "boss_t") {
		t.Fatalf("the child got label %q", l)
	}
	if p := ctlString(t, root, "kid", "policy"); strings.Contains(p, "shell.exec") {
		t.Fatalf("the child may run shell.exec:\n%s", p)
	}
	// Whatever the child was given, it cannot run shell.exec.
	fake.script(fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"touch ` + marker + `"}`}}}, fakeStep{Text: "tried"})
	run(t, runOpts{}, filepath.Join(root, "agent/kid"), "try shell")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran shell.exec")
	}
}

// Issue 15, defect 9 (policy): an empty tool .d/policy denies (default
// deny); `ctx agent create --tool T` is what adds the agent's type to T's
// own policy.
func TestSecurityEmptyToolPolicyDenies(t *testing.T) {
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}}, fakeStep{Text: "one"},
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}}, fakeStep{Text: "two"})
	root, work := agentRoot(t, fake, "coder", "--tool", "fs.read")
	os.WriteFile(filepath.Join(work, "notes.txt"), []byte("notes-content"), 0o644)
	pol := filepath.Join(root, "tool/fs.read.d/policy")
	if b, _ := os.ReadFile(pol); !strings.Contains(string(b), "allow coder_t tool:fs.read execute") {
		t.Fatalf("ctx agent create --tool fs.read did not allow coder_t in the tool's own policy:\n%s", b)
	}
	r := mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "read"))
	if !strings.Contains(r.stdout, "notes-content") {
		t.Fatalf("control: an allowed tool did not run:\n%s", r.stdout)
	}
	os.WriteFile(pol, []byte("# policy v0, nothing allowed\n"), 0o644)
	r = mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "--session", "s2", "read"))
	if strings.Contains(r.stdout, "notes-content") {
		t.Fatalf("a tool with an empty own policy ran:\n%s", r.stdout)
	}
}

// Issue 15, defect 9 (init): ctx init wrote control files through a
// symlinked tool/<name>.d into the directory it pointed at.
func TestSecurityInitSymlinkedControlDir(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "ctx"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "tool"), filepath.Join(root, "model", "debug"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"tool/fs.read.d", "model/debug/echo.d"} {
		if err := os.Symlink(outside, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	r := sh(t, "ctx", "init", "--root", root, "--runner", applet("cortexfs-object-runner"), "--json")
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("ctx init wrote through a symlinked .d/ into %s: %v\n%s", outside, es, r)
	}
	if !strings.Contains(r.stdout, "left_alone") {
		t.Errorf("ctx init did not report the symlinked .d/ as left alone:\n%s", r)
	}
}

// Issue 15, defect 9 (mode bits): the execute bit is checked for the
// agent's .d/uid, .d/gid and .d/groups, not the runtime's: a root-owned
// 0100 tool does not run for uid 65534.
func TestSecurityToolModeBitsForAgentUID(t *testing.T) {
	needRoot(t)
	marker := filepath.Join(t.TempDir(), "marker")
	fake := newFakeChat(t, fakeStep{Calls: []fakeCall{{Name: "rootonly", Args: `{}`}}}, fakeStep{Text: "tried"})
	root, _ := agentRoot(t, fake, "coder")
	sandboxBinds(t, root, "coder", filepath.Dir(marker))
	tool := filepath.Join(root, "tool", "rootonly")
	// 0500: root's only (read and execute: the shell reads the script, and
	// root in a sandbox has no CAP_DAC_OVERRIDE to read a 0100 one).
	os.WriteFile(tool, []byte("#!/bin/sh\ntouch "+marker+"\necho ran\n"), 0o500)
	os.Chmod(tool, 0o500)
	os.MkdirAll(tool+".d", 0o755)
	os.WriteFile(tool+".d/policy", []byte("allow coder_t tool:rootonly execute\n"), 0o644)
	appendPolicy(t, root, "coder", "allow coder_t tool:rootonly execute")
	for _, f := range []string{"uid", "gid"} {
		os.WriteFile(filepath.Join(root, "agent/coder.d", f), []byte("65534\n"), 0o644)
	}
	mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "run it"))
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a 0100 root-owned tool ran for an agent with uid 65534")
	}
	if res := toolResults(fake); len(res) != 1 || !strings.Contains(res[0], "EACCES") {
		t.Errorf("tool result %q, want EACCES", res)
	}
	// Control: the same agent as uid 0 may execute it.
	for _, f := range []string{"uid", "gid"} {
		os.WriteFile(filepath.Join(root, "agent/coder.d", f), []byte("0\n"), 0o644)
	}
	fake.script(fakeStep{Calls: []fakeCall{{Name: "rootonly", Args: `{}`}}}, fakeStep{Text: "tried"})
	mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "--session", "s2", "run it"))
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("control: uid 0 could not run the tool, so the check proves nothing")
	}
}

// Issue 15, defect 9 (owned children): a child declared in files
// (.d/parent agent:P, .d/life owned) and started with `ctx-agent start`
// is tied to its parent's process like one started by agent.start: it
// dies with the parent, and it does not start without it.
func TestSecurityOwnedChildFromFilesDiesWithParent(t *testing.T) {
	fake := newFakeChat(t)
	root, _ := agentRoot(t, fake, "coder")
	mustOK(t, sh(t, "ctx", "agent", "create", "kid", "--root", root, "--model", "fake/chat"))
	os.WriteFile(filepath.Join(root, "agent/kid.d/parent"), []byte("agent:coder\n"), 0o644)
	os.WriteFile(filepath.Join(root, "agent/kid.d/life"), []byte("owned\n"), 0o644)
	stopAgent(t, root, "kid")
	stopAgent(t, root, "coder")
	if r := sh(t, "ctx-agent", "start", "--root", root, "kid"); r.code == 0 {
		t.Errorf("an owned child started while its parent is not running:\n%s", r)
		sh(t, "ctx-agent", "stop", "--root", root, "kid")
	}
	mustOK(t, sh(t, "ctx-agent", "start", "--root", root, "coder"))
	mustOK(t, sh(t, "ctx-agent", "start", "--root", root, "kid"))
	kid, _ := strconv.Atoi(ctlString(t, root, "kid", "pid"))
	parent, _ := strconv.Atoi(ctlString(t, root, "coder", "pid"))
	if kid == 0 || parent == 0 {
		t.Fatalf("pids: parent %d kid %d", parent, kid)
	}
	syscall.Kill(parent, syscall.SIGKILL)
	agentWait(t, "the owned child to die with its parent", func() bool { return !pidAlive(kid) })
}

// Issue 15, defect 9 (temp sessions): a session used only by temp sends
// leaves no durable directory once its connection is gone; an ordinary
// session stays.
func TestSecurityTempSessionLeavesNothing(t *testing.T) {
	root := newRoot(t)
	startDaemon(t, root)
	echo := filepath.Join(root, "model/debug/echo")
	mustOK(t, sh(t, "ctx", "send", "--temp", "--session", "tmpx", echo, "hi"))
	mustOK(t, sh(t, "ctx", "send", "--session", "keep", echo, "hi"))
	sessions := filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "session/model/debug/echo")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Lstat(filepath.Join(sessions, "tmpx"))
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the temp session's directory is still there: %v", treeFiles(t, sessions))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(sessions, "keep", "events.jsonl")); err != nil {
		t.Errorf("the ordinary session's log is gone: %v", err)
	}
}

// Issue 18 (agent ABI gaps, done under issue 15): .d/owner, .d/uid and
// .d/gid default to the agent file's owner and that user's primary group,
// never to whoever loads the agent; the agent home has the seed's data/,
// cache/ and log/; and policy classes are checked where they apply — here
// mount:<name> for the agent's view (shared:* read and session:* in
// TestAgentSharedSession).
func TestSecurityAgentABIGaps(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Text: "hello"}, fakeStep{Text: "again"})
	root, _ := agentRoot(t, fake, "coder")
	for _, f := range []string{"owner", "uid", "gid"} {
		os.WriteFile(filepath.Join(root, "agent/coder.d", f), nil, 0o644)
	}
	wantUID, wantGID := os.Getuid(), os.Getgid()
	if os.Geteuid() == 0 {
		u := ensureUser(t, "ctxt15a")
		os.Chown(filepath.Join(root, "agent/coder"), u.UID, 0)
		wantUID, wantGID = u.UID, u.GID
	}
	var view struct {
		Owner, UID, GID int
		Home            string
	}
	r := mustOK(t, sh(t, "ctx", "agent", "show", "coder", "--root", root, "--json"))
	if err := json.Unmarshal([]byte(r.stdout), &view); err != nil {
		t.Fatalf("ctx agent show --json: %v\n%s", err, r)
	}
	if view.Owner != wantUID || view.UID != wantUID || view.GID != wantGID {
		t.Errorf("empty owner/uid/gid: got %d/%d/%d, want the agent file's owner %d and group %d", view.Owner, view.UID, view.GID, wantUID, wantGID)
	}
	home := filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent/coder")
	for _, d := range []string{"root", "session", "data", "cache", "log"} {
		if fi, err := os.Stat(filepath.Join(home, d)); err != nil || !fi.IsDir() {
			t.Errorf("agent home lacks %s/: %v", d, err)
		}
	}
	for _, f := range []string{"owner", "uid", "gid"} {
		os.WriteFile(filepath.Join(root, "agent/coder.d", f), []byte(strconv.Itoa(os.Getuid())+"\n"), 0o644)
	}
	os.Chown(filepath.Join(root, "agent/coder"), os.Getuid(), os.Getgid()) // root runs only agents it owns
	pol := filepath.Join(root, "agent/coder.d/policy")
	b, _ := os.ReadFile(pol)
	if !strings.Contains(string(b), "allow coder_t mount:ctx read") {
		t.Fatalf("ctx agent create wrote no mount lines for the default view:\n%s", b)
	}
	mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "hi"))
	os.WriteFile(pol, []byte(strings.ReplaceAll(string(b), "allow coder_t mount:ctx read\n", "")), 0o644)
	r = run(t, runOpts{}, filepath.Join(root, "agent/coder"), "hi")
	if r.code != 13 || !strings.Contains(r.stdout, "mount:ctx read") {
		t.Errorf("a mount the policy does not allow: want EACCES naming mount:ctx read, got\n%s", r)
	}
}
