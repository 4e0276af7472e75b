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

// appendPolicy adds allow lines to agent/<name>.d/policy.
func appendPolicy(t *testing.T, root, name string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(root, "agent", name+".d", "policy"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// treeFiles lists every path under dir (relative), for "nothing written".
func treeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func readEvents(t *testing.T, p string) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("events.jsonl: %v", err)
	}
	var out []map[string]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]string
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("events.jsonl line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func countEvents(evs []map[string]string, typ, status string) int {
	n := 0
	for _, e := range evs {
		if e["type"] == typ && e["status"] == status {
			n++
		}
	}
	return n
}

// reqText joins a model request's messages as role:content.
func reqText(r fakeReq) string {
	var seen []string
	for _, m := range r.Messages {
		if m.Content != nil {
			seen = append(seen, m.Role+":"+*m.Content)
		}
	}
	return strings.Join(seen, "|")
}

// Gap 1: --shared SPACE (and stdin {"shared":…}) keeps the session under
// shared/<space>/agent/<agent>/session/<session>/ only when the policy has
// allow <type> shared:<space> write AND the space's Linux permissions let
// the agent's identity (.d/uid, .d/gid, .d/groups) write; a refusal is
// EACCES and writes nothing under shared/; a second run continues the
// shared session's history.
func TestAgentSharedSession(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Text: "first answer"}, fakeStep{Text: "second answer"})
	root, _ := agentRoot(t, fake, "coder")
	space := filepath.Join(root, "shared", "proj")
	if err := os.MkdirAll(space, 0o755); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(root, "agent/coder")
	nothingShared := func(when string) {
		t.Helper()
		if fs := treeFiles(t, filepath.Join(root, "shared")); len(fs) != 1 || fs[0] != "proj" {
			t.Errorf("%s: something was written under shared/: %v", when, fs)
		}
		if n := len(fake.requests()); n != 0 {
			t.Errorf("%s: the model was called %d times", when, n)
		}
	}
	// No policy line: refused, both ways of naming the space.
	r := run(t, runOpts{}, obj, "--shared", "proj", "remember the word ZEBRA")
	if r.code != 13 || !strings.Contains(r.stdout, `"code":"EACCES"`) || !strings.Contains(r.stdout, "shared:proj") {
		t.Fatalf("--shared without the policy line: want exit 13 EACCES naming shared:proj, got:\n%s", r)
	}
	nothingShared("--shared without policy")
	r = run(t, runOpts{stdin: `{"task":"remember the word ZEBRA","shared":"proj"}`}, obj)
	if r.code != 13 || !strings.Contains(r.stdout, `"code":"EACCES"`) {
		t.Fatalf(`stdin {"shared":…} without the policy line: want exit 13 EACCES, got:\n%s`, r)
	}
	nothingShared("stdin shared without policy")

	// The policy allows it, but the agent's Linux identity may not write
	// the space (root:root 0755, agent uid/gid 4242): still EACCES.
	appendPolicy(t, root, "coder", "allow coder_t shared:proj write", "allow coder_t shared:proj read", "allow coder_t session:default write")
	for f, v := range map[string]string{"uid": "4242", "gid": "4242"} {
		if err := os.WriteFile(filepath.Join(root, "agent/coder.d", f), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r = run(t, runOpts{}, obj, "--shared", "proj", "remember the word ZEBRA")
	if r.code != 13 || !strings.Contains(r.stdout, `"code":"EACCES"`) {
		t.Fatalf("shared space not writable by the agent's uid/gid: want exit 13 EACCES, got:\n%s", r)
	}
	nothingShared("space mode refuses the agent")

	// The space belongs to the agent's uid: the session is written there.
	if err := os.Chown(space, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	r = mustOK(t, run(t, runOpts{}, obj, "--shared", "proj", "remember the word ZEBRA"))
	if !strings.Contains(r.stdout, "first answer") {
		t.Fatalf("first shared turn:\n%s", r)
	}
	sess := filepath.Join(space, "agent/coder/session/default")
	for _, f := range []string{"messages.jsonl", "events.jsonl"} {
		fi, err := os.Stat(filepath.Join(sess, f))
		if err != nil {
			t.Fatalf("shared session lacks %s: %v (tree: %v)", f, err, treeFiles(t, space))
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 {
			t.Errorf("%s is owned by uid %d, not the agent's uid 4242", f, st.Uid)
		}
	}
	for _, d := range []string{"agent", "agent/coder", "agent/coder/session", "agent/coder/session/default"} {
		fi, err := os.Stat(filepath.Join(space, d))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 {
			t.Errorf("shared/proj/%s is owned by uid %d, not the agent's uid 4242", d, st.Uid)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent/coder/session/default")); err == nil {
		t.Errorf("a shared run also wrote a private session")
	}
	// Continuing a shared session that has a conversation needs
	// session:<name> resume (issue 18, policy classes checked where they
	// apply); then the second run (stdin form) continues that history.
	r = run(t, runOpts{stdin: `{"task":"which word?","shared":"proj"}`}, obj)
	if r.code != 13 || !strings.Contains(r.stdout, "session:default resume") {
		t.Fatalf("resuming a shared session without session:default resume: want EACCES, got:\n%s", r)
	}
	appendPolicy(t, root, "coder", "allow coder_t session:default resume")
	r = mustOK(t, run(t, runOpts{stdin: `{"task":"which word?","shared":"proj"}`}, obj))
	if !strings.Contains(r.stdout, "second answer") {
		t.Fatalf("second shared turn:\n%s", r)
	}
	reqs := fake.requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	if j := reqText(reqs[1]); !strings.Contains(j, "user:remember the word ZEBRA") || !strings.Contains(j, "assistant:first answer") {
		t.Errorf("second shared run did not see the first run's history: %s", j)
	}
	if j := reqText(reqs[0]); strings.Contains(j, "which word") {
		t.Errorf("first request already had the second task: %s", j)
	}
	evs := readEvents(t, filepath.Join(sess, "events.jsonl"))
	if n := countEvents(evs, "run.done", "ok"); n != 2 {
		t.Errorf("shared events.jsonl has %d ok run.done, want 2: %v", n, evs)
	}
	for _, e := range evs {
		if e["agent"] != "coder" || e["session"] != "default" {
			t.Errorf("shared event %v: want agent coder session default", e)
		}
	}
}

// waitCount polls until s occurs at least n times in the pty output.
func (p *ptyProc) waitCount(s string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(p.output(), s) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("pty output never showed %q %d times; got:\n%s", s, n, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether the pty process still runs (not exited, not a zombie).
func (p *ptyProc) alive() bool {
	pid := p.cmd.Process.Pid
	return syscall.Kill(pid, 0) == nil && !zombie(pid)
}

func (f *fakeChat) hold() chan struct{} {
	g := make(chan struct{})
	f.mu.Lock()
	f.gate = g
	f.mu.Unlock()
	return g
}

func (f *fakeChat) release(g chan struct{}, wantReqs int, t *testing.T) {
	t.Helper()
	f.mu.Lock()
	f.gate = nil
	f.mu.Unlock()
	close(g)
	agentWait(t, "the held model request to finish", func() bool { return len(f.requests()) >= wantReqs })
}

// Gap 2: in the bare-TTY interactive session, Ctrl-C during a slow model
// turn cancels that turn: it ends cancelled, the prompt comes back and the
// session takes the next turn (and a later Ctrl-C cancels again); Ctrl-C
// at the prompt ends the session.
func TestAgentInteractiveCtrlC(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Text: "too late one"}, fakeStep{Text: "second answer"}, fakeStep{Text: "too late two"})
	root, _ := agentRoot(t, fake, "coder")
	stopAgent(t, root, "coder")
	var open []chan struct{}
	t.Cleanup(func() { // before the fake server closes: let held handlers end
		for _, g := range open {
			select {
			case <-g:
			default:
				close(g)
			}
		}
	})
	p := startPTY(t, filepath.Join(root, "agent/coder"))
	p.expect("coder> ")
	ttyEvents := func() []map[string]string {
		b, _ := os.ReadFile(filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent/coder/session/tty/events.jsonl"))
		var out []map[string]string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]string
			if json.Unmarshal([]byte(l), &m) == nil {
				out = append(out, m)
			}
		}
		return out
	}
	slowTurn := func(line string, nth int) {
		t.Helper()
		g := fake.hold()
		open = append(open, g)
		p.master.Write([]byte(line + "\n"))
		agentWait(t, "the turn to be busy", func() bool { return ctlString(t, root, "coder", "status") == "busy" })
		time.Sleep(100 * time.Millisecond) // the model request is in flight
		p.master.Write([]byte{3})          // Ctrl-C
		agentWait(t, "the turn to end cancelled", func() bool { return countEvents(ttyEvents(), "run.done", "cancelled") >= nth })
		p.waitCount("coder> ", 2*nth)
		if s := ctlString(t, root, "coder", "status"); s == "dead" {
			t.Fatalf("Ctrl-C killed the agent process:\n%s", p.output())
		}
		if !p.alive() {
			t.Fatalf("the session exited on a Ctrl-C during a turn:\n%s", p.output())
		}
	}
	slowTurn("a slow question", 1)
	if !strings.Contains(strings.ToLower(p.output()), "cancel") {
		t.Errorf("the session did not say the turn was cancelled:\n%s", p.output())
	}
	fake.release(open[0], 1, t)
	p.master.Write([]byte("a quick question\n"))
	p.expect("second answer")
	p.waitCount("coder> ", 3)
	if n := countEvents(ttyEvents(), "run.done", "ok"); n != 1 {
		t.Fatalf("the turn after a cancelled one did not end ok (%d ok run.done):\n%s", n, p.output())
	}
	// The quick turn's model request carries the quick question.
	reqs := fake.requests()
	if j := reqText(reqs[len(reqs)-1]); !strings.Contains(j, "user:a quick question") {
		t.Errorf("second turn request: %s", j)
	}
	// A later turn is cancelled by Ctrl-C just the same.
	slowTurnAt := func() {
		g := fake.hold()
		open = append(open, g)
		p.master.Write([]byte("another slow one\n"))
		agentWait(t, "the turn to be busy", func() bool { return ctlString(t, root, "coder", "status") == "busy" })
		time.Sleep(100 * time.Millisecond)
		p.master.Write([]byte{3})
		agentWait(t, "the second Ctrl-C'd turn to end cancelled", func() bool { return countEvents(ttyEvents(), "run.done", "cancelled") >= 2 })
		p.waitCount("coder> ", 4)
	}
	slowTurnAt()
	if !p.alive() {
		t.Fatalf("session exited after the second turn's Ctrl-C:\n%s", p.output())
	}
	time.Sleep(100 * time.Millisecond)
	p.master.Write([]byte{3}) // Ctrl-C at the prompt: leave
	if code := p.wait(); code != 0 {
		t.Errorf("Ctrl-C at the prompt: exit %d, want 0:\n%s", code, p.output())
	}
	if s := ctlString(t, root, "coder", "status"); s != "idle" {
		t.Errorf("agent status after the session left: %q, want idle", s)
	}
}

// Gap 3: a tool call for a tool that was not offered — visible on
// CTX_PATH or not, by its CortexFS name or by the provider-encoded one —
// gets EACCES fed back, never runs, and the run ends done ok. An encoded
// name that maps to exactly one tool is decoded so the refusal and the
// event name the real tool.
func TestAgentUnofferedToolCalls(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	written := filepath.Join(dir, "written")
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "shell_exec", Args: `{"cmd":"touch ` + marker + `"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"touch ` + marker + `"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "net.fetch", Args: `{"url":"http://example.invalid/"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs_write", Args: `{"path":"` + written + `","content":"x"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "../shell.exec", Args: `{}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}},
		fakeStep{Text: "finished"})
	root, work := agentRoot(t, fake, "coder", "--tool", "fs.read")
	os.WriteFile(filepath.Join(work, "notes.txt"), []byte("offered-tool-ran"), 0o644)
	// fs.write is allowed by policy but not executable: visible to no one,
	// so not offered either.
	appendPolicy(t, root, "coder", "allow coder_t tool:fs.write execute")
	if err := os.Chmod(filepath.Join(root, "tool/fs.write"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "try tools"))
	fs := parseAgentFrames(t, r.stdout)
	if last := fs[len(fs)-1]; last.Type != "done" || last.Status != "ok" {
		t.Fatalf("run did not end done ok:\n%s", r.stdout)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("shell.exec ran although it was not offered")
	}
	if _, err := os.Stat(written); err == nil {
		t.Errorf("fs.write ran although it was not offered")
	}
	reqs := fake.requests()
	if len(reqs) != 7 {
		t.Fatalf("model got %d requests, want 7:\n%s", len(reqs), r.stdout)
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Function.Name != "fs_read" {
		t.Errorf("offered tools %+v, want only fs_read", reqs[0].Tools)
	}
	// The refusal fed back for each un-offered call names the real tool.
	for i, want := range []string{"shell.exec", "shell.exec", "net.fetch", "fs.write", ""} {
		msgs := reqs[i+1].Messages
		last := msgs[len(msgs)-1]
		if last.Role != "tool" || last.Content == nil || !strings.Contains(*last.Content, `"code":"EACCES"`) {
			t.Errorf("call %d: tool result %+v, want EACCES", i+1, last)
			continue
		}
		if !strings.Contains(*last.Content, want) {
			t.Errorf("call %d: refusal %q does not name %s", i+1, *last.Content, want)
		}
	}
	last := reqs[6].Messages[len(reqs[6].Messages)-1]
	if last.Content == nil || !strings.Contains(*last.Content, "offered-tool-ran") {
		t.Errorf("the offered tool (control) did not run: %+v", last)
	}
	// The stream names the decoded tool on the call and its result.
	var names []string
	for _, f := range fs {
		if f.Type == "message" && f.Role == "tool" {
			names = append(names, f.Name)
		}
	}
	if len(names) != 6 || names[0] != "shell.exec" || names[3] != "fs.write" || names[5] != "fs.read" {
		t.Errorf("tool result frames name %q, want shell.exec … fs.write … fs.read", names)
	}
	evs := eventRecords(t, root, "coder", "default")
	denied := 0
	for _, e := range evs {
		if e["type"] != "tool.call" {
			continue
		}
		if e["object"] == "tool/shell_exec" || e["object"] == "tool/fs_write" {
			t.Errorf("event names the provider-encoded tool: %v", e)
		}
		if e["status"] == "denied" {
			denied++
			if e["code"] != "EACCES" {
				t.Errorf("denied tool.call without code EACCES: %v", e)
			}
		}
	}
	if denied != 5 {
		t.Errorf("events.jsonl has %d denied tool.call, want 5: %v", denied, evs)
	}
	if e := findEvent(evs, "tool.call", "tool/fs.write"); e == nil || e["status"] != "denied" {
		t.Errorf("no denied tool.call of tool/fs.write: %v", evs)
	}
}

// Gap 4: events.jsonl records a refused tool call as denied with code
// EACCES, and neither events.jsonl nor any .d/log holds a prompt or a
// tool-output body (a sentinel in the task, in the refused call's
// arguments and in the file the allowed tool reads).
func TestAgentEventsNoBodies(t *testing.T) {
	const sentinel = "SENTINEL-c0ffee-4711"
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"echo ` + sentinel + `"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"secret.txt"}`}}},
		fakeStep{Text: "done reading"})
	root, work := agentRoot(t, fake, "coder", "--tool", "fs.read")
	os.WriteFile(filepath.Join(work, "secret.txt"), []byte("file body "+sentinel+"-file"), 0o644)
	r := mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "please keep "+sentinel+"-task safe"))
	// Positive controls: the sentinel did flow through the run.
	if !strings.Contains(r.stdout, sentinel+"-file") {
		t.Fatalf("fs.read output never reached the stream:\n%s", r.stdout)
	}
	sess := filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent/coder/session/default")
	if b, _ := os.ReadFile(filepath.Join(sess, "messages.jsonl")); !strings.Contains(string(b), sentinel+"-task") {
		t.Fatalf("messages.jsonl lacks the task (the grep below would prove nothing):\n%s", b)
	}
	evs := eventRecords(t, root, "coder", "default")
	e := findEvent(evs, "tool.call", "tool/shell.exec")
	if e == nil || e["status"] != "denied" || e["code"] != "EACCES" {
		t.Errorf("refused tool.call not recorded as denied/EACCES: %v", e)
	}
	if e := findEvent(evs, "tool.call", "tool/fs.read"); e == nil || e["status"] != "ok" {
		t.Errorf("allowed tool.call not recorded ok: %v", evs)
	}
	check := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return
		}
		if strings.Contains(string(b), sentinel) {
			t.Errorf("%s holds a prompt or tool-output body:\n%s", p, b)
		}
	}
	check(filepath.Join(sess, "events.jsonl"))
	logs, _ := filepath.Glob(filepath.Join(root, "*", "*.d", "log"))
	more, _ := filepath.Glob(filepath.Join(root, "model", "*", "*.d", "log"))
	logs = append(logs, more...)
	sawAgentLog := false
	for _, l := range logs {
		if strings.HasSuffix(l, "agent/coder.d/log") {
			sawAgentLog = true
			if b, _ := os.ReadFile(l); !strings.Contains(string(b), "session=default") {
				t.Errorf("agent .d/log lacks the run line:\n%s", b)
			}
		}
		check(l)
	}
	if !sawAgentLog {
		t.Errorf("no agent/coder.d/log among %v", logs)
	}
}

// Gap 5: ctx agent create rejects an invalid name (EINVAL, exit 2) and a
// --model that is not provider/model (EINVAL, exit 2) without writing
// anything, and a duplicate create is EEXIST and overwrites nothing.
func TestAgentCreateRejects(t *testing.T) {
	root := newRoot(t)
	before := treeFiles(t, root)
	for _, name := range []string{"../x", "a/b", ".hidden", "x y", "coder.d", "coder.sock", "-", strings.Repeat("n", 300)} {
		r := sh(t, "ctx", "agent", "create", name, "--root", root, "--model", "debug/echo")
		if r.code != 2 || !strings.Contains(r.stderr, "EINVAL") {
			t.Errorf("create %q: want exit 2 EINVAL, got:\n%s", name, r)
		}
	}
	for _, m := range []string{"echo", "debug/echo/x", "/echo", "debug/", "de bug/echo", "debug/../x"} {
		r := sh(t, "ctx", "agent", "create", "coder", "--root", root, "--model", m)
		if r.code != 2 || !strings.Contains(r.stderr, "EINVAL") {
			t.Errorf("create --model %q: want exit 2 EINVAL, got:\n%s", m, r)
		}
	}
	r := sh(t, "ctx", "agent", "create", "coder", "--root", root, "--model", "debug/echo", "--model", "bad")
	if r.code != 2 || !strings.Contains(r.stderr, "EINVAL") {
		t.Errorf("create with a bad second --model: want exit 2 EINVAL, got:\n%s", r)
	}
	if after := treeFiles(t, root); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("rejected creates wrote files: before %v after %v", before, after)
	}

	mustOK(t, sh(t, "ctx", "agent", "create", "coder", "--root", root, "--model", "debug/echo", "--tool", "fs.read"))
	ctl := filepath.Join(root, "agent/coder.d")
	snap := func() map[string]string {
		m := map[string]string{}
		for _, p := range []string{filepath.Join(root, "agent/coder")} {
			b, _ := os.ReadFile(p)
			m["object"] = string(b)
		}
		es, _ := os.ReadDir(ctl)
		for _, e := range es {
			b, _ := os.ReadFile(filepath.Join(ctl, e.Name()))
			m[e.Name()] = string(b)
		}
		return m
	}
	// A hand-edited control file must survive a duplicate create too.
	appendPolicy(t, root, "coder", "allow coder_t shared:proj read")
	want := snap()
	r = sh(t, "ctx", "agent", "create", "coder", "--root", root, "--model", "debug/main", "--label", "user_u:agent_r:evil_t:s0", "--tool", "shell.exec")
	if r.code != 1 || !strings.Contains(r.stderr, "EEXIST") {
		t.Errorf("duplicate create: want exit 1 EEXIST, got:\n%s", r)
	}
	r = sh(t, "ctx", "agent", "create", "coder", "--root", root, "--model", "debug/main", "--json")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "EEXIST") {
		t.Errorf("duplicate create --json: want exit 1 EEXIST, got:\n%s", r)
	}
	got := snap()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("duplicate create changed %s:\nwas %q\nnow %q", k, v, got[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("duplicate create added control files: %d → %d", len(want), len(got))
	}
	if !strings.Contains(got["policy"], "tool:fs.read execute") || strings.Contains(got["policy"], "shell.exec") {
		t.Errorf("policy after duplicate create:\n%s", got["policy"])
	}
}
