package t

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/t/fake"
)

// Issue 16, "the first hour" (ctx side): silent traps a newcomer meets
// with models, object names and agents, each fixed with the fix in the
// message.

// noKeys empties every variable a 127.0.0.1 or "local" provider reads its
// key from, so a test proves no key was needed.
var noKeys = []string{"HOST_127_0_0_1_API_KEY=", "LOCAL_API_KEY=", "OLLAMA_API_KEY="}

// TestFirstHourKeylessLocalServer: a keyless local server (llama.cpp, vLLM,
// Ollama) is one flag away, and the ENOKEY a user meets first says which.
func TestFirstHourKeylessLocalServer(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	base := srv.BaseURL(fake.OpenAIChat)

	// Without auth=none the first run fails, and the message names the fix.
	addModel(t, root, "local/plain", "--driver", "openai-chat", "--base-url", base, "--id", "text")
	r := run(t, runOpts{env: noKeys}, modelPath(root, "local/plain"), "hello")
	fs := parseFrames(t, r.stdout)
	if r.code != 69 || len(fs) < 2 || fs[1].Code != "ENOKEY" || !strings.Contains(fs[1].Message, "auth=none") ||
		!strings.Contains(fs[1].Message, "ctx model add --auth none") {
		t.Fatalf("ENOKEY does not say how to run a keyless server:\n%s", r)
	}

	// ctx model add --auth none writes the line and the model runs keyless.
	addModel(t, root, "local/keyless", "--driver", "openai-chat", "--base-url", base, "--id", "text", "--auth", "none")
	if d := mustReadFile(t, modelPath(root, "local/keyless")+".d/default"); !strings.Contains(d, "\nauth=none\n") && !strings.HasPrefix(d, "auth=none\n") {
		t.Errorf(".d/default lacks auth=none:\n%s", d)
	}
	checkText(t, run(t, runOpts{env: noKeys}, modelPath(root, "local/keyless"), "hello"), "local/keyless", "hello")
	for _, req := range srv.Requests() {
		if req.Header.Get("Authorization") != "" {
			t.Errorf("a keyless model sent Authorization: %q", req.Header.Get("Authorization"))
		}
	}
	bad := run(t, runOpts{}, applet("ctx"), "model", "add", "--root", root, "local/x", "--driver", "openai-chat", "--base-url", base, "--auth", "bearer")
	if msg := oneError(t, bad, "ctx", "EINVAL", 2); !strings.Contains(msg, "none") {
		t.Errorf("--auth bearer: %q", msg)
	}

	// refresh honours the provider's auth=none: no key asked, and every
	// model it creates is keyless too.
	r = mustOK(t, run(t, runOpts{env: noKeys}, applet("ctx"), "model", "refresh", "local", "--root", root, "--json"))
	if !strings.Contains(r.stdout, `"local/gpt-4o"`) {
		t.Fatalf("refresh of a keyless provider:\n%s", r)
	}
	if d := mustReadFile(t, modelPath(root, "local/gpt-4o")+".d/default"); !strings.Contains(d, "auth=none") {
		t.Errorf("a model refresh created lacks auth=none:\n%s", d)
	}
	// A provider with no model yet: --auth none on refresh itself; without
	// it the ENOKEY names the flag.
	fresh := run(t, runOpts{env: noKeys}, applet("ctx"), "model", "refresh", "lan", "--root", root, "--driver", "openai-chat", "--base-url", base)
	if msg := oneError(t, fresh, "ctx", "ENOKEY", 69); !strings.Contains(msg, "ctx model refresh lan --auth none") {
		t.Errorf("refresh ENOKEY without the fix: %q", msg)
	}
	mustOK(t, run(t, runOpts{env: noKeys}, applet("ctx"), "model", "refresh", "lan", "--root", root, "--driver", "openai-chat", "--base-url", base, "--auth", "none"))
	if d := mustReadFile(t, filepath.Join(root, "model/lan/gpt-4o.d/default")); !strings.Contains(d, "auth=none") {
		t.Errorf("refresh --auth none did not pass it on:\n%s", d)
	}
	ls := mustOK(t, run(t, runOpts{env: noKeys}, applet("ctx"), "model", "ls", "--root", root, "--json"))
	var rows []map[string]string
	if err := fromEnvelope([]byte(ls.stdout), &rows); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if strings.HasPrefix(row["id"], "lan/") && row["credential"] != "not_needed" {
			t.Errorf("%s: credential %q, want not_needed", row["id"], row["credential"])
		}
	}
}

// TestFirstHourJSONListsOneKey: every ctx listing answers
// {"ok":true,"items":[…]} (agent ls included), and no list is null
// (tool refresh included).
func TestFirstHourJSONListsOneKey(t *testing.T) {
	fc := newFakeChat(t)
	root, _ := agentRoot(t, fc, "coder")
	for _, args := range [][]string{{"ls"}, {"model", "ls"}, {"agent", "ls"}, {"mcp", "ls"}, {"plugin", "ls"},
		{"tool", "sources"}, {"tool", "refresh"}, {"tool", "refresh", "--system", "--home"}} {
		r := mustOK(t, sh(t, "ctx", append(append([]string{"--root", root}, args...), "--json")...))
		var items []map[string]any
		if err := fromEnvelope([]byte(r.stdout), &items); err != nil {
			t.Errorf("ctx %v --json: %v", args, err)
			continue
		}
		if strings.Contains(r.stdout, "null") {
			t.Errorf("ctx %v --json has a null: %s", args, r.stdout)
		}
		if args[0] == "agent" && (len(items) != 1 || items[0]["name"] != "coder") {
			t.Errorf("ctx agent ls --json items: %s", r.stdout)
		}
	}
}

// TestFirstHourTreeRelativeNames: ctx send model/main and ctx agent show
// agent/NAME mean the tree (--root or $CTX_ROOT) from any directory; a
// name that is nowhere is ENOENT saying every path tried.
func TestFirstHourTreeRelativeNames(t *testing.T) {
	fc := newFakeChat(t)
	root, _ := agentRoot(t, fc, "coder")
	startDaemon(t, root)
	elsewhere := t.TempDir()
	for _, o := range []struct {
		env  []string
		args []string
	}{
		{[]string{"CTX_ROOT=" + root}, []string{"send", "--temp", "model/main", "hi"}},
		{[]string{"CTX_ROOT=/nonexistent"}, []string{"--root", root, "send", "--temp", "model/debug/echo.sock", "hi"}},
		{[]string{"CTX_ROOT=" + root}, []string{"agent", "show", "agent/coder", "--json"}},
	} {
		r := mustOK(t, run(t, runOpts{env: o.env, dir: elsewhere}, applet("ctx"), o.args...))
		if o.args[len(o.args)-1] == "hi" && !strings.Contains(r.stdout, `"text":"hi"`) {
			t.Errorf("ctx %v from %s: %s", o.args, elsewhere, r.stdout)
		}
	}
	r := run(t, runOpts{env: []string{"CTX_ROOT=" + root}, dir: elsewhere}, applet("ctx"), "send", "model/mian", "hi")
	msg := oneError(t, r, "ctx", "ENOENT", 1)
	for _, p := range []string{filepath.Join(root, "model/mian"), filepath.Join(elsewhere, "model/mian")} {
		if !strings.Contains(msg, p) {
			t.Errorf("ENOENT does not name %s: %q", p, msg)
		}
	}
}

// TestFirstHourCtxAgentSpeaksLikeCtx: ctx-agent is on the shared command
// table: group help, --json in the one envelope, global flags before the
// command, did-you-mean and hints with the full command.
func TestFirstHourCtxAgentSpeaksLikeCtx(t *testing.T) {
	fc := newFakeChat(t)
	root, _ := agentRoot(t, fc, "coder")
	stopAgent(t, root, "coder")
	top := mustOK(t, sh(t, "ctx-agent", "--help"))
	cmds := helpCommands(t, top.stdout)
	for _, c := range []string{"start", "stop", "run"} {
		if cmds[c] == "" {
			t.Errorf("ctx-agent --help does not list %s:\n%s", c, top.stdout)
		}
		h := mustOK(t, sh(t, "ctx-agent", c, "--help"))
		if !strings.HasPrefix(h.stdout, "usage: ctx-agent "+c) || !strings.Contains(h.stdout, "--root DIR") {
			t.Errorf("ctx-agent %s --help:\n%s", c, h.stdout)
		}
	}
	if cmds["init"] != "" || cmds["runtime"] != "" {
		t.Errorf("internal commands listed:\n%s", top.stdout)
	}
	if msg := oneError(t, sh(t, "ctx-agent", "stpo", "coder"), "ctx-agent", "EINVAL", 2); !strings.Contains(msg, "did you mean ctx-agent stop?") {
		t.Errorf("no suggestion: %q", msg)
	}
	if msg := oneError(t, sh(t, "ctx-agent", "start"), "ctx-agent", "EINVAL", 2); !strings.Contains(msg, "see ctx-agent start --help") {
		t.Errorf("hint without the full command: %q", msg)
	}
	var started struct {
		OK   bool
		Name string
		PID  int
	}
	r := mustOK(t, run(t, runOpts{env: []string{"CTX_ROOT=/nonexistent"}}, applet("ctx-agent"), "--root", root, "--json", "start", "coder"))
	if err := fromEnvelope([]byte(r.stdout), &started); err != nil || !started.OK || started.Name != "coder" || started.PID <= 0 {
		t.Fatalf("ctx-agent --root R --json start coder: %v\n%s", err, r)
	}
	// Plain start still prints the bare pid.
	if r := mustOK(t, sh(t, "ctx-agent", "start", "--root", root, "coder")); strings.TrimSpace(r.stdout) != strconv.Itoa(started.PID) {
		t.Errorf("ctx-agent start (already running) printed %q, want %d", r.stdout, started.PID)
	}
	var stopped struct {
		OK     bool
		Name   string
		Status string
	}
	r = mustOK(t, run(t, runOpts{env: []string{"CTX_ROOT=" + root}, dir: t.TempDir()}, applet("ctx-agent"), "stop", "agent/coder", "--json"))
	if err := fromEnvelope([]byte(r.stdout), &stopped); err != nil || !stopped.OK || stopped.Name != "coder" || stopped.Status == "" {
		t.Fatalf("ctx-agent stop agent/coder --json: %v\n%s", err, r)
	}
	r = sh(t, "ctx-agent", "--root", root, "--json", "stop", "nosuch")
	var e struct {
		OK    bool
		Error struct{ Code, Message string }
	}
	if r.code == 0 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &e) != nil || e.OK || e.Error.Code != "ENOENT" {
		t.Errorf("ctx-agent --json stop nosuch:\n%s", r)
	}
}

// TestFirstHourInteractiveAgentSaysItStaysRunning: a bare agent/NAME on a
// terminal that had to start the agent says so, and how to stop it, when
// it starts it and when the session ends; the command it names works.
func TestFirstHourInteractiveAgentSaysItStaysRunning(t *testing.T) {
	fc := newFakeChat(t, fakeStep{Text: "hello from the agent"})
	root, _ := agentRoot(t, fc, "coder")
	stopAgent(t, root, "coder")
	stop := "ctx-agent --root " + root + " stop coder"
	p := startPTY(t, filepath.Join(root, "agent/coder"))
	p.expect("started agent coder in the background")
	p.expect(stop)
	p.expect("coder> ")
	p.master.Write([]byte{4})
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "agent coder is still running in the background: "+stop) {
		t.Errorf("leaving the session did not say the agent keeps running:\n%s", p.output())
	}
	if s := ctlString(t, root, "coder", "status"); s == "dead" || s == "stopped" {
		t.Fatalf("agent status %q after the session, want it running", s)
	}
	args := strings.Fields(stop)
	mustOK(t, sh(t, args[0], args[1:]...))
	if s := ctlString(t, root, "coder", "status"); s != "dead" && s != "stopped" {
		t.Errorf("the named stop command left status %q", s)
	}
	// An agent that already runs is not announced: this session did not start it.
	mustOK(t, sh(t, "ctx-agent", "start", "--root", root, "coder"))
	p = startPTY(t, filepath.Join(root, "agent/coder"))
	p.expect("coder> ")
	p.master.Write([]byte{4})
	p.wait()
	if strings.Contains(p.output(), "in the background") {
		t.Errorf("a session that started nothing announced a background agent:\n%s", p.output())
	}
}

// TestFirstHourModelREPLKeepsHistory: a bare model on a terminal is a
// conversation like the agent REPL: a banner naming the model and how to
// leave, every turn sent with the earlier ones, /new starting over and
// /quit leaving.
func TestFirstHourModelREPLKeepsHistory(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	addModel(t, root, "local/chat", "--driver", "openai-chat", "--base-url", srv.BaseURL(fake.OpenAIChat), "--id", "text", "--auth", "none")
	p := startPTY(t, modelPath(root, "local/chat"))
	p.expect("model local/chat")
	p.expect("Ctrl-D or /quit")
	p.expect("local/chat> ")
	prompts := 1
	turn := func(line string, n int) string {
		t.Helper()
		p.master.Write([]byte(line + "\n"))
		prompts++
		p.waitCount("local/chat> ", prompts)
		reqs := srv.Requests()
		if len(reqs) != n {
			t.Fatalf("after %d turns the provider saw %d requests:\n%s", n, len(reqs), p.output())
		}
		return string(reqs[n-1].Body)
	}
	turn("first question", 1)
	body := turn("second question", 2)
	var req struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range req.Messages {
		got = append(got, m.Role+":"+m.Content)
	}
	if len(got) != 3 || got[0] != "user:first question" || !strings.HasPrefix(got[1], "assistant:") || got[1] == "assistant:" ||
		got[2] != "user:second question" {
		t.Errorf("the second turn does not carry the first: %q", got)
	}
	p.master.Write([]byte("/new\n"))
	prompts++
	p.waitCount("local/chat> ", prompts)
	if body := turn("third question", 3); strings.Contains(body, "first question") {
		t.Errorf("/new kept the old conversation: %s", body)
	}
	p.master.Write([]byte("/quit\n"))
	if code := p.wait(); code != 0 {
		t.Errorf("/quit: exit %d:\n%s", code, p.output())
	}
}

// TestFirstHourModelREPLCtrlC: Ctrl-C during a model REPL turn cancels that
// turn and the prompt comes back, as in the agent REPL; Ctrl-C at the
// prompt leaves.
func TestFirstHourModelREPLCtrlC(t *testing.T) {
	root := newRoot(t)
	addModel(t, root, "local/slow", "--driver", "debug")
	appendFile(t, modelPath(root, "local/slow")+".d/default", "delay_ms=3000\n")
	p := startPTY(t, modelPath(root, "local/slow"))
	p.expect("local/slow> ")
	p.master.Write([]byte("a slow question\n"))
	time.Sleep(300 * time.Millisecond)
	p.master.Write([]byte{3})
	p.expect("(turn cancelled)")
	p.waitCount("local/slow> ", 2)
	if !p.alive() {
		t.Fatalf("Ctrl-C during a turn ended the REPL:\n%s", p.output())
	}
	p.master.Write([]byte{3})
	if code := p.wait(); code != 0 {
		t.Errorf("Ctrl-C at the prompt: exit %d:\n%s", code, p.output())
	}
}
