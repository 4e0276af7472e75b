package t

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent driven by the scripted model calls a tool of the real
// everything server end to end; an agent whose policy lacks the tool is
// refused with EACCES and the server never sees that call.
func TestAgentCallsMCPTool(t *testing.T) {
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "mcp.everything.echo", Args: `{"message":"from-the-agent"}`}}},
		fakeStep{Text: "the server said so"},
		fakeStep{Calls: []fakeCall{{Name: "mcp.everything.echo", Args: `{"message":"must-not-arrive"}`}}},
		fakeStep{Text: "refused"})
	root, _ := agentRoot(t, fake, "coder", "--tool", "mcp.everything.echo", "--allow-missing") // the MCP server comes next
	mustOK(t, sh(t, "ctx", "agent", "create", "intruder", "--root", root, "--model", "fake/chat", "--tool", "fs.read"))
	wrapper, transcript := transcriptServer(t, everythingBin(t))
	mustOK(t, sh(t, "ctx", "mcp", "add", "everything", "--root", root, "--", wrapper))
	toolDaemon(t, root, "OPENAI_API_KEY="+daemonKey)
	waitSource(t, root, "everything", "ready")

	r := mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "echo something"))
	var result string
	for _, f := range parseAgentFrames(t, r.stdout) {
		if f.Type == "message" && f.Role == "tool" && f.Name == "mcp.everything.echo" {
			result = f.text()
		}
	}
	if !strings.Contains(result, "Echo: from-the-agent") {
		t.Fatalf("the agent's tool result: %q\n%s", result, r.stdout)
	}
	reqs := fake.requests()
	if len(reqs) < 2 || len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Function.Name != "mcp_everything_echo" {
		t.Fatalf("the model was not offered exactly mcp.everything.echo: %+v", reqs)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "tool" || last.Content == nil || !strings.Contains(*last.Content, "Echo: from-the-agent") {
		t.Errorf("the model did not get the MCP result: %+v", last)
	}
	if e := findEvent(eventRecords(t, root, "coder", "default"), "tool.call", "tool/mcp.everything.echo"); e == nil || e["status"] != "ok" {
		t.Errorf("events.jsonl: %v", e)
	}
	if n := countCalls(readTranscript(t, transcript), "echo"); n != 1 {
		t.Fatalf("the server saw %d echo calls, want 1", n)
	}

	r = mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/intruder"), "echo something"))
	reqs = fake.requests()
	last = reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
	if last.Role != "tool" || last.Content == nil || !strings.Contains(*last.Content, `"code":"EACCES"`) {
		t.Fatalf("the un-allowed call was not refused with EACCES: %+v\n%s", last, r.stdout)
	}
	tr := readTranscript(t, transcript)
	if strings.Contains(tr, "must-not-arrive") || countCalls(tr, "echo") != 1 {
		t.Fatalf("the server saw the refused call:\n%s", tr)
	}
	if e := findEvent(eventRecords(t, root, "intruder", "default"), "tool.call", "tool/mcp.everything.echo"); e == nil || e["status"] != "denied" {
		t.Errorf("events.jsonl of the refused agent: %v", e)
	}
}

// A sandboxed agent calls a process plugin's tool: the call is relayed to
// the launcher (the plugin directory is not in the sandbox), authorized
// there again and run beside the sandbox.
func TestAgentCallsProcessPlugin(t *testing.T) {
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "plugin.wc.word_count", Args: `{"text":"one two"}`}}},
		fakeStep{Text: "counted"})
	root := newRoot(t)
	addFakeModel(t, root, fake)
	src := filepath.Join(t.TempDir(), "wc")
	os.MkdirAll(filepath.Join(src, "bin"), 0o755)
	os.WriteFile(filepath.Join(src, "bin", "wc.js"), []byte(processPluginScript), 0o755)
	os.WriteFile(filepath.Join(src, "manifest.toml"), []byte(processManifest(`"agent"`, "")), 0o644)
	mustOK(t, sh(t, "ctx", "plugin", "install", src, "--root", root))
	mustOK(t, sh(t, "ctx", "agent", "create", "coder", "--root", root, "--model", "fake/chat", "--cwd", t.TempDir(), "--tool", "plugin.wc.word_count"))
	mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "count"))
	reqs := fake.requests()
	last := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
	if last.Role != "tool" || last.Content == nil || !strings.Contains(*last.Content, "agent: 2 words") {
		t.Fatalf("the process plugin's result did not reach the model: %+v", last)
	}
}
