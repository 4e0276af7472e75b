package t

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// agentFrame adds the agent-run fields to frame.
type agentFrame struct {
	frame
	Agent     string          `json:"agent"`
	CallID    string          `json:"call_id"`
	Arguments json.RawMessage `json:"arguments"`
}

func parseAgentFrames(t *testing.T, out string) []agentFrame {
	t.Helper()
	var fs []agentFrame
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var f agentFrame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", line, err)
		}
		fs = append(fs, f)
	}
	return fs
}

func (f agentFrame) text() string {
	var b strings.Builder
	for _, c := range f.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// agentRoot is a fresh tree with the fake model and one agent.
func agentRoot(t *testing.T, fake *fakeChat, name string, createArgs ...string) (root, work string) {
	t.Helper()
	root = newRoot(t)
	addFakeModel(t, root, fake)
	work = t.TempDir()
	args := append([]string{"agent", "create", name, "--root", root, "--model", "fake/chat", "--cwd", work}, createArgs...)
	mustOK(t, sh(t, "ctx", args...))
	return root, work
}

// eventRecords reads a session's events.jsonl.
func eventRecords(t *testing.T, root, agent, session string) []map[string]string {
	t.Helper()
	p := filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent", agent, "session", session, "events.jsonl")
	f, err := os.Open(p)
	if err != nil {
		t.Fatalf("events.jsonl: %v", err)
	}
	defer f.Close()
	var out []map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]string
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("events.jsonl line %q: %v", sc.Text(), err)
		}
		for _, k := range []string{"ts", "type", "agent", "session", "object", "status"} {
			if m[k] == "" {
				t.Errorf("event %v lacks %q", m, k)
			}
		}
		out = append(out, m)
	}
	return out
}

func findEvent(evs []map[string]string, typ, object string) map[string]string {
	for _, e := range evs {
		if e["type"] == typ && e["object"] == object {
			return e
		}
	}
	return nil
}

// The scripted model asks for fs.read, then answers with the file's
// content: the run shows the tool_call, the tool result and the final
// message; events.jsonl records them.
func TestAgentFSReadToolCall(t *testing.T) {
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}},
		fakeStep{Text: "The notes say: hello-from-file"})
	root, work := agentRoot(t, fake, "coder", "--tool", "fs.read")
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("hello-from-file"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "read", "notes.txt"))
	fs := parseAgentFrames(t, r.stdout)
	if fs[0].Type != "start" || fs[0].Agent != "coder" || fs[len(fs)-1].Type != "done" || fs[len(fs)-1].Status != "ok" {
		t.Fatalf("want start(agent coder)…done ok, got:\n%s", r.stdout)
	}
	var sawCall, sawResult, sawFinal bool
	for _, f := range fs {
		switch {
		case f.Type == "tool_call" && f.Name == "fs.read" && strings.Contains(string(f.Arguments), "notes.txt"):
			sawCall = true
		case f.Type == "message" && f.Role == "tool" && f.Name == "fs.read" && strings.Contains(f.text(), "hello-from-file"):
			sawResult = true
		case f.Type == "message" && f.Role == "assistant" && strings.Contains(f.text(), "hello-from-file"):
			sawFinal = true
		}
	}
	if !sawCall || !sawResult || !sawFinal {
		t.Fatalf("call=%v result=%v final=%v in:\n%s", sawCall, sawResult, sawFinal, r.stdout)
	}
	reqs := fake.requests()
	if len(reqs) != 2 || len(reqs[0].Tools) != 1 {
		t.Fatalf("model got %d requests (first with %d tools), want 2 with 1 tool", len(reqs), len(reqs[0].Tools))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "tool" || last.Content == nil || !strings.Contains(*last.Content, "hello-from-file") {
		t.Errorf("the model did not get the tool result: %+v", last)
	}
	evs := eventRecords(t, root, "coder", "default")
	if e := findEvent(evs, "tool.call", "tool/fs.read"); e == nil || e["status"] != "ok" {
		t.Errorf("events.jsonl has no ok tool.call of tool/fs.read: %v", evs)
	}
	if e := findEvent(evs, "run.done", "agent/coder"); e == nil || e["status"] != "ok" {
		t.Errorf("events.jsonl has no ok run.done: %v", evs)
	}
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent/coder/session/default/x")), "events.jsonl"))
	if strings.Contains(string(b), "hello-from-file") {
		t.Errorf("events.jsonl logged tool output (content must not be logged):\n%s", b)
	}
}

// A tool the agent's policy does not allow never runs: the model gets
// EACCES and the run still ends done ok. The control agent, allowed the
// same call, does create the marker, so the check can fail.
func TestAgentRefusedShellExecNeverRuns(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		marker := filepath.Join(t.TempDir(), "marker")
		fake := newFakeChat(t,
			fakeStep{Calls: []fakeCall{{Name: "shell.exec", Args: `{"cmd":"touch ` + marker + `"}`}}},
			fakeStep{Text: "finished"})
		extra := []string{"--tool", "fs.read"}
		if allowed {
			extra = append(extra, "--tool", "shell.exec")
		}
		root, _ := agentRoot(t, fake, "coder", extra...)
		sandboxBinds(t, root, "coder", filepath.Dir(marker)) // a shell, and the marker's directory, in the sandbox
		r := mustOK(t, run(t, runOpts{stdin: `{"task":"make a marker"}`}, filepath.Join(root, "agent/coder")))
		fs := parseAgentFrames(t, r.stdout)
		if last := fs[len(fs)-1]; last.Type != "done" || last.Status != "ok" {
			t.Fatalf("allowed=%v: run did not end done ok:\n%s", allowed, r.stdout)
		}
		_, err := os.Stat(marker)
		if allowed != (err == nil) {
			t.Fatalf("allowed=%v: marker exists=%v\n%s", allowed, err == nil, r.stdout)
		}
		reqs := fake.requests()
		last := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
		gotEACCES := last.Role == "tool" && last.Content != nil && strings.Contains(*last.Content, "EACCES")
		if gotEACCES == allowed {
			t.Errorf("allowed=%v: model's tool message %+v (EACCES=%v)", allowed, last, gotEACCES)
		}
		if !allowed {
			e := findEvent(eventRecords(t, root, "coder", "default"), "tool.call", "tool/shell.exec")
			if e == nil || e["status"] != "denied" || e["code"] != "EACCES" {
				t.Errorf("events.jsonl lacks the refused tool.call: %v", e)
			}
		}
	}
}

// A tool whose own .d/policy has allow lines that exclude the agent's
// type is refused even though the agent's policy allows it.
func TestAgentToolOwnPolicyRefuses(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}}, fakeStep{Text: "ok"})
	root, work := agentRoot(t, fake, "coder", "--tool", "fs.read")
	os.WriteFile(filepath.Join(work, "notes.txt"), []byte("secret-notes"), 0o644)
	pol := filepath.Join(root, "tool/fs.read.d/policy")
	if err := os.WriteFile(pol, []byte("allow reviewer_t tool:fs.read execute\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "read notes"))
	if strings.Contains(r.stdout, "secret-notes") {
		t.Fatalf("fs.read ran despite its own policy:\n%s", r.stdout)
	}
	reqs := fake.requests()
	if len(reqs[0].Tools) != 0 {
		t.Errorf("a refused tool was offered to the model: %+v", reqs[0].Tools)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Content == nil || !strings.Contains(*last.Content, "EACCES") {
		t.Errorf("model did not get EACCES: %+v", last)
	}
	// The same line for the agent's own type lets it through.
	os.WriteFile(pol, []byte("allow coder_t tool:fs.read execute\n"), 0o644)
	fake.script(fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"notes.txt"}`}}}, fakeStep{Text: "ok"})
	r = mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "--session", "s2", "read notes"))
	if !strings.Contains(r.stdout, "secret-notes") {
		t.Errorf("tool policy allowing coder_t still refused:\n%s", r.stdout)
	}
}

// Model use needs allow <type> model:<p>/<m> use.
func TestAgentModelNotAllowed(t *testing.T) {
	fake := newFakeChat(t)
	root, _ := agentRoot(t, fake, "coder")
	os.WriteFile(filepath.Join(root, "agent/coder.d/policy"), []byte("# nothing\n"), 0o644)
	r := run(t, runOpts{}, filepath.Join(root, "agent/coder"), "hi")
	if r.code != 13 || !strings.Contains(r.stdout, `"code":"EACCES"`) {
		t.Fatalf("want exit 13 with EACCES, got:\n%s", r)
	}
	if len(fake.requests()) != 0 {
		t.Errorf("the model was called without model:fake/chat use")
	}
}
