package t

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An agent process killed with SIGKILL leaves its .d/pid and a status that
// says it runs. The kernel may since have given that pid to another
// process, one that started after .d/pid was written — which the agent's
// own process, writing its own pid, never did. Such a pid is not the
// agent's: ls and show say dead, ctx-agent start starts the agent instead
// of answering with the stranger's pid, and ctx-agent stop signals nobody
// (the same rule as cbth's supervised tasks: never signal a process you
// cannot prove is yours).
func TestAgentStalePidReusedIsNotTheAgent(t *testing.T) {
	fake := newFakeChat(t)
	root, _ := agentRoot(t, fake, "coder")
	stopAgent(t, root, "coder")
	ctl := filepath.Join(root, "agent", "coder.d")

	stranger := exec.Command("sleep", "60")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
	spid := strconv.Itoa(stranger.Process.Pid)
	// What the killed agent left a minute ago, its pid now the stranger's.
	if err := os.WriteFile(filepath.Join(ctl, "pid"), []byte(spid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctl, "status"), []byte("idle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Minute)
	if err := os.Chtimes(filepath.Join(ctl, "pid"), then, then); err != nil {
		t.Fatal(err)
	}

	r := mustOK(t, sh(t, "ctx", "agent", "show", "--root", root, "coder", "--json"))
	if !strings.Contains(r.stdout, `"dead"`) || strings.Contains(r.stdout, `"pid":`+spid) {
		t.Errorf("show reports the stranger as the agent's process (want dead, no pid %s):\n%s", spid, r.stdout)
	}

	r = run(t, runOpts{timeout: 20 * time.Second}, applet("ctx-agent"), "stop", "--root", root, "coder")
	if r.code != 0 {
		t.Errorf("stop of an agent whose process is gone: %s", r)
	}
	time.Sleep(100 * time.Millisecond)
	// The stranger is our child: killed, it would stay a zombie, which
	// kill(pid, 0) still finds; alive reads its state.
	if !alive(stranger.Process.Pid) {
		t.Fatalf("ctx-agent stop signalled the process that reused the agent's pid")
	}

	// Stale again, as after the SIGKILL: start must start the agent.
	if err := os.WriteFile(filepath.Join(ctl, "pid"), []byte(spid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(ctl, "pid"), then, then); err != nil {
		t.Fatal(err)
	}
	r = mustOK(t, sh(t, "ctx-agent", "start", "--root", root, "coder"))
	if got := strings.TrimSpace(r.stdout); got == spid {
		t.Fatalf("ctx-agent start answered with the stranger's pid %s instead of starting the agent", spid)
	}
	if got := ctlString(t, root, "coder", "pid"); got == spid {
		t.Errorf(".d/pid still names the stranger after start")
	}
	mustOK(t, sh(t, "ctx-agent", "stop", "--root", root, "coder"))
	if !alive(stranger.Process.Pid) {
		t.Fatalf("the stranger died along the way")
	}
}
