package t

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func ctlString(t *testing.T, root, agent, file string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(root, "agent", agent+".d", file))
	return strings.TrimSpace(string(b))
}

// waitFor polls cond for up to 10 s.
func agentWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopAgent(t *testing.T, root, name string) {
	t.Helper()
	t.Cleanup(func() { sh(t, "ctx-agent", "stop", "--root", root, name) })
}

// ctx-agent start owns agent/<name>.sock; two ctx send turns on one
// session: the second turn's model request carries the first turn; .d/status
// walks start→ready→busy→idle, stop leaves stopped (issue 16: a new agent
// reads stopped too, not dead).
func TestAgentSocketSessionLifecycle(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Text: "first answer"}, fakeStep{Text: "second answer"})
	root, _ := agentRoot(t, fake, "coder")
	stopAgent(t, root, "coder")
	if s := ctlString(t, root, "coder", "status"); s != "stopped" {
		t.Errorf("a new agent's status is %q, want stopped (no process)", s)
	}
	r := mustOK(t, sh(t, "ctx-agent", "start", "--root", root, "coder"))
	pid, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if err != nil || ctlString(t, root, "coder", "pid") != strconv.Itoa(pid) {
		t.Fatalf("start printed %q, .d/pid is %q", r.stdout, ctlString(t, root, "coder", "pid"))
	}
	if s := ctlString(t, root, "coder", "status"); s != "ready" {
		t.Errorf("status after start = %q, want ready", s)
	}
	obj := filepath.Join(root, "agent/coder")
	r = mustOK(t, sh(t, "ctx", "send", "--session", "work", obj, "remember the word PELICAN"))
	if !strings.Contains(r.stdout, "first answer") {
		t.Fatalf("first turn:\n%s", r)
	}
	if s := ctlString(t, root, "coder", "status"); s != "idle" {
		t.Errorf("status after a turn = %q, want idle", s)
	}
	fake.mu.Lock()
	fake.gate = make(chan struct{})
	fake.mu.Unlock()
	done := make(chan result, 1)
	go func() { done <- sh(t, "ctx", "send", "--session", "work", obj, "which word?") }()
	agentWait(t, "status busy during a turn", func() bool { return ctlString(t, root, "coder", "status") == "busy" })
	close(fake.gate) // fake.gate stays set but closed: later requests pass at once
	r = mustOK(t, <-done)
	if !strings.Contains(r.stdout, "second answer") {
		t.Fatalf("second turn:\n%s", r)
	}
	reqs := fake.requests()
	var seen []string
	for _, m := range reqs[1].Messages {
		if m.Content != nil {
			seen = append(seen, m.Role+":"+*m.Content)
		}
	}
	joined := strings.Join(seen, "|")
	if !strings.Contains(joined, "user:remember the word PELICAN") || !strings.Contains(joined, "assistant:first answer") {
		t.Errorf("second turn did not see the first turn's history: %s", joined)
	}
	mustOK(t, sh(t, "ctx-agent", "stop", "--root", root, "coder"))
	if s := ctlString(t, root, "coder", "status"); s != "stopped" {
		t.Errorf("status after stop = %q, want stopped", s)
	}
	if _, err := os.Stat(obj + ".sock"); err == nil {
		t.Errorf("socket left behind after stop")
	}
	if syscall.Kill(pid, 0) == nil && !zombie(pid) {
		t.Errorf("agent process %d still alive after stop", pid)
	}
	log, _ := os.ReadFile(obj + ".d/log")
	if !strings.Contains(string(log), "event=start") || !strings.Contains(string(log), "session=work") {
		t.Errorf(".d/log lacks lifecycle or turn lines:\n%s", log)
	}
}

func zombie(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// agent/<name> with no arguments on a terminal is an interactive session
// over the socket; it starts the agent process when nothing serves it.
func TestAgentInteractiveTTY(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Text: "hello from the agent"})
	root, _ := agentRoot(t, fake, "coder")
	stopAgent(t, root, "coder")
	p := startPTY(t, filepath.Join(root, "agent/coder"))
	p.expect("coder> ")
	p.master.Write([]byte("hi there\n"))
	p.expect("hello from the agent")
	p.expect("coder> ")
	if strings.Contains(p.output(), `"type":"delta"`) {
		t.Errorf("interactive session printed JSONL:\n%s", p.output())
	}
	p.master.Write([]byte{4})
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d:\n%s", code, p.output())
	}
	if s := ctlString(t, root, "coder", "status"); s != "idle" {
		t.Errorf("agent process started by the session: status %q, want idle", s)
	}
}
