package t

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A parent agent creates a child through the agent.* tools: a widened
// policy or mount is EACCES, an invalid name EINVAL; an attenuated child
// is created and started as life=owned, and when the parent process is
// killed the child is cancelled while its session directory remains.
func TestAgentChildAttenuationAndOwnedCancel(t *testing.T) {
	fake := newFakeChat(t,
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"reviewer","tools":["shell.exec"]}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"reviewer","mount":[["/etc","/etc","ro"]]}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"../x"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.create", Args: `{"name":"reviewer","tools":["fs.read"]}`}}},
		fakeStep{Calls: []fakeCall{{Name: "agent.start", Args: `{"name":"reviewer"}`}}},
		fakeStep{Text: "child is up"},
		fakeStep{Text: "reviewer here"})
	root, _ := agentRoot(t, fake, "coder", "--tool", "agent.create", "--tool", "agent.start", "--tool", "fs.read")
	pol := filepath.Join(root, "agent/coder.d/policy")
	f, err := os.OpenFile(pol, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("allow coder_t agent:reviewer create\nallow coder_t agent:reviewer start\n")
	f.Close()
	stopAgent(t, root, "reviewer")
	stopAgent(t, root, "coder")
	mustOK(t, sh(t, "ctx-agent", "start", "--root", root, "coder"))
	r := mustOK(t, sh(t, "ctx", "send", filepath.Join(root, "agent/coder"), "make a reviewer"))
	reqs := fake.requests()
	if len(reqs) != 6 {
		t.Fatalf("parent made %d model calls, want 6:\n%s", len(reqs), r.stdout)
	}
	for i, want := range []string{"EACCES", "EACCES", "EINVAL", `"name":"reviewer"`, `"pid":`} {
		msgs := reqs[i+1].Messages
		last := msgs[len(msgs)-1]
		if last.Role != "tool" || last.Content == nil || !strings.Contains(*last.Content, want) {
			t.Errorf("step %d: tool result %+v, want %s", i+1, last, want)
		}
	}
	parent := ctlString(t, root, "reviewer", "parent")
	if !strings.HasPrefix(parent, "agent:coder session:default run:r") {
		t.Errorf("child .d/parent = %q", parent)
	}
	if p := ctlString(t, root, "reviewer", "policy"); strings.Contains(p, "shell.exec") || !strings.Contains(p, "allow reviewer_t tool:fs.read execute") {
		t.Errorf("child policy:\n%s", p)
	}
	if m := ctlString(t, root, "reviewer", "mount"); strings.Contains(m, "\trw\t") || strings.Contains(m, "/etc") {
		t.Errorf("child mounts widen the parent's:\n%s", m)
	}
	if s := ctlString(t, root, "reviewer", "status"); s != "ready" {
		t.Fatalf("child status %q, want ready", s)
	}
	mustOK(t, sh(t, "ctx", "send", filepath.Join(root, "agent/reviewer"), "hello child"))
	childPID, _ := strconv.Atoi(ctlString(t, root, "reviewer", "pid"))
	parentPID, _ := strconv.Atoi(ctlString(t, root, "coder", "pid"))
	if childPID == 0 || parentPID == 0 {
		t.Fatalf("pids: parent %d child %d", parentPID, childPID)
	}
	if err := syscall.Kill(parentPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	agentWait(t, "the owned child to die with its parent", func() bool {
		// Cancelled by its parent's death, as the seed says owned children
		// are: an orderly end, so stopped.
		return ctlString(t, root, "reviewer", "status") == "stopped" && (syscall.Kill(childPID, 0) != nil || zombie(childPID))
	})
	sess := filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent/reviewer/session/default")
	for _, f := range []string{"events.jsonl", "messages.jsonl"} {
		if _, err := os.Stat(filepath.Join(sess, f)); err != nil {
			t.Errorf("child session history gone after cancellation: %v", err)
		}
	}
}
