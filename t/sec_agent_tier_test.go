package t

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// userTierAgent copies the root tier's agent x, root-owned as it is, into
// the user's tier as home/<uid>/agent/<name>: the user owns
// home/<uid>/agent/ and can rename what is in it, but not the files.
func userTierAgent(t *testing.T, w *rootWorld, name string) string {
	t.Helper()
	mustOK(t, sh(t, "ctx", "agent", "create", "x", "--root", w.root, "--model", "debug/echo"))
	agents := filepath.Join(w.home, "agent")
	mustOK(t, w.as(t, "/bin/mkdir", "-p", agents))
	obj := filepath.Join(agents, name)
	mustOK(t, run(t, runOpts{}, "/bin/cp", "-a", filepath.Join(w.root, "agent/x"), obj))
	mustOK(t, run(t, runOpts{}, "/bin/cp", "-a", filepath.Join(w.root, "agent/x.d"), obj+".d"))
	return obj
}

// dirSnapshot is each entry of dir with its inode and content: a file
// replaced by rename has a new inode even when its content is the same.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(p)
		st := fi.Sys().(*syscall.Stat_t)
		out[e.Name()] = fmt.Sprintf("ino=%d uid=%d mode=%v %q", st.Ino, st.Uid, fi.Mode(), b)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s was %s, now %s", what, k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared: %s", what, k, v)
		}
	}
}

// Issue 15 (audit): `ctx-agent run` (Serve; an interactive run as root
// starts it) wrote .d/status and .d/pid by path before the root trust
// check: a user who owns home/<uid>/agent/ swapped the agent's .d/ for a
// symlink to a root-owned directory (here root's own agent's .d/) after it
// was read, and root replaced status and pid there. Root now checks the
// agent's whole directory chain first, refuses (nobody but root may be
// able to rename in it), and writes only fd-relative through the real .d/.
func TestSecurityRootServeUserTierAgent(t *testing.T) {
	w := newRootWorld(t, "ctxt15b")
	obj := userTierAgent(t, w, "y")
	victim := filepath.Join(w.root, "agent/x.d")
	before := dirSnapshot(t, victim)
	mustOK(t, w.as(t, "/bin/ln", "-s", victim, obj+".d.swap"))
	stop := swapLoop(t, w.a, obj+".d", obj+".d.swap", 300*time.Microsecond)
	served := 0
	for i, end := 0, time.Now().Add(5*time.Second); i < 40 && time.Now().Before(end); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := exec.CommandContext(ctx, applet("ctx-agent"), "run", obj).Run()
		if err == nil || ctx.Err() != nil {
			served++
		}
		cancel()
	}
	stop()
	if served > 0 {
		t.Errorf("root served the user's agent %d times", served)
	}
	sameSnapshot(t, "root's agent/x.d", before, dirSnapshot(t, victim))
	mustOK(t, w.as(t, "/bin/rm", obj+".d.swap"))

	// Without the symlink root still refuses: the user can rename entries
	// of home/<uid>/agent/ at any moment.
	status, _ := os.ReadFile(obj + ".d/status")
	r := run(t, runOpts{timeout: 20 * time.Second}, applet("ctx-agent"), "run", obj)
	if r.code != 13 || !strings.Contains(r.stderr+r.stdout, "not root's") {
		t.Errorf("root ran an agent in the user's tier: want EACCES (13) naming the directory, got\n%s", r)
	}
	if s, _ := os.ReadFile(obj + ".d/status"); string(s) != string(status) {
		t.Errorf(".d/status is %q, was %q: root wrote it before refusing", s, status)
	}
}

// Issue 15 (audit): a one-shot run by root of an agent in a user's tier
// created root's session directory for it before the sandbox's trust
// check refused it. The refusal now comes first: EACCES, nothing created.
func TestSecurityRootOneShotUserTierAgent(t *testing.T) {
	w := newRootWorld(t, "ctxt15b")
	obj := userTierAgent(t, w, "y")
	r := run(t, runOpts{timeout: 20 * time.Second}, obj, "hello")
	if r.code != 13 || !strings.Contains(r.stdout, `"EACCES"`) {
		t.Errorf("root ran the agent in the user's tier: want EACCES (13), got\n%s", r)
	}
	if _, err := os.Lstat(filepath.Join(w.root, "home/0/agent/y")); err == nil {
		t.Errorf("root created home/0/agent/y for the refused agent: %v", treeFiles(t, filepath.Join(w.root, "home/0/agent/y")))
	}
	// Control: the same agent in root's own tier runs.
	mustOK(t, run(t, runOpts{timeout: 30 * time.Second}, filepath.Join(w.root, "agent/x"), "hello"))
}

// Issue 15 (audit): `ctx-agent stop` as root signalled whatever pid a
// user-tier agent's .d/pid held, so its owner could have root kill any
// process. Root now refuses to signal for an agent whose files another
// user controls; a process of root's named there survives. The control:
// root stops its own tier's agent.
func TestSecurityRootStopUserTierAgentPid(t *testing.T) {
	w := newRootWorld(t, "ctxt15b")
	obj := userTierAgent(t, w, "y")
	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	defer bystander.Process.Kill()
	// The user owns home/<uid>/agent/: it replaces the agent's .d/ with a
	// copy of its own and names root's process in .d/pid.
	mustOK(t, w.as(t, "/bin/sh", "-c", "cd "+filepath.Dir(obj)+" && mv y.d y.d.old && cp -r y.d.old y.d && echo "+
		fmt.Sprint(bystander.Process.Pid)+" > y.d/pid"))
	r := run(t, runOpts{timeout: 20 * time.Second}, applet("ctx-agent"), "stop", obj)
	if r.code != 13 {
		t.Errorf("root stop of a user-tier agent whose .d/pid names root's process: want EACCES (13), got\n%s", r)
	}
	time.Sleep(100 * time.Millisecond)
	if !alive(bystander.Process.Pid) { // a killed child is a zombie kill(pid, 0) still finds
		t.Fatalf("root killed the process the user's .d/pid named")
	}
	mustOK(t, run(t, runOpts{timeout: 20 * time.Second}, applet("ctx-agent"), "stop", filepath.Join(w.root, "agent/x")))
}
