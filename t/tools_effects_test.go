package t

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// effectsWorld: an agent allowed plugin.hello-c.remove (delete_file,
// irreversible, confirmation=always, dry_run=required_before_execute) and
// plugin.hello-c.slow (timeout_secs=2), served by cortexfsd.
func effectsWorld(t *testing.T, fake *fakeChat) string {
	t.Helper()
	root, _ := agentRoot(t, fake, "coder", "--tool", "plugin.hello-c.remove", "--tool", "plugin.hello-c.slow", "--allow-missing") // the plugin comes next
	toolDaemon(t, root)
	mustOK(t, sh(t, "ctx", "plugin", "install", cPluginDir(t, "hello-c", ""), "--root", root))
	waitSource(t, root, "hello-c", "ready")
	return root
}

// lastToolMessage is the tool result the model got last.
func lastToolMessage(t *testing.T, fake *fakeChat) string {
	t.Helper()
	reqs := fake.requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		msgs := reqs[i].Messages
		if m := msgs[len(msgs)-1]; m.Role == "tool" && m.Content != nil {
			return *m.Content
		}
	}
	t.Fatal("the model never got a tool result")
	return ""
}

// Without a terminal nobody can approve: a tool whose effects need
// confirmation is refused with EACCES and the reason, after its required
// dry run, and is never executed for real.
func TestEffectsNoApproverRefuses(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Calls: []fakeCall{{Name: "plugin.hello-c.remove", Args: `{"path":"/tmp/x"}`}}}, fakeStep{Text: "ok"})
	root := effectsWorld(t, fake)
	mustOK(t, run(t, runOpts{}, filepath.Join(root, "agent/coder"), "remove it"))
	msg := lastToolMessage(t, fake)
	if !strings.Contains(msg, `"code":"EACCES"`) || !strings.Contains(msg, "needs confirmation") || !strings.Contains(msg, "nobody can approve") {
		t.Fatalf("tool result: %s", msg)
	}
	evs := eventRecords(t, root, "coder", "default")
	if e := findEvent(evs, "tool.dry_run", "tool/plugin.hello-c.remove"); e == nil || e["status"] != "ok" {
		t.Errorf("no dry run before the refusal: %v", evs)
	}
	if e := findEvent(evs, "tool.approval", "tool/plugin.hello-c.remove"); e == nil || e["status"] != "denied" {
		t.Errorf("no denied approval: %v", evs)
	}
	log := readFileString(t, filepath.Join(root, "tool", "plugin.hello-c.remove.d", "log"))
	if strings.Count(log, "\n") != 1 || !strings.Contains(log, "dry_run=true") {
		t.Errorf("the tool ran other than its dry run:\n%s", log)
	}
}

// On a terminal the person at it decides: "y" runs the tool (after its dry
// run, whose preview is shown), "n" refuses it with EACCES.
func TestEffectsTerminalApproval(t *testing.T) {
	for _, answer := range []string{"y", "n"} {
		t.Run(answer, func(t *testing.T) {
			fake := newFakeChat(t, fakeStep{Calls: []fakeCall{{Name: "plugin.hello-c.remove", Args: `{"path":"/tmp/x"}`}}}, fakeStep{Text: "done"})
			root := effectsWorld(t, fake)
			p := startPTY(t, filepath.Join(root, "agent/coder"), "remove", "it")
			p.expect("allow? [y/N] ")
			if out := p.output(); !strings.Contains(out, "delete_file:/tmp (irreversible, confirmation=always)") || !strings.Contains(out, "would remove") {
				t.Errorf("the prompt does not show the effect and the dry run:\n%s", out)
			}
			p.master.Write([]byte(answer + "\n"))
			if code := p.wait(); code != 0 {
				t.Fatalf("exit %d:\n%s", code, p.output())
			}
			msg := lastToolMessage(t, fake)
			evs := eventRecords(t, root, "coder", "default")
			approval := findEvent(evs, "tool.approval", "tool/plugin.hello-c.remove")
			if answer == "y" {
				if !strings.Contains(msg, `"output":"removed"`) || approval == nil || approval["status"] != "approved" {
					t.Fatalf("approved: result %s, event %v", msg, approval)
				}
				return
			}
			if !strings.Contains(msg, `"code":"EACCES"`) || !strings.Contains(msg, "declined") || approval == nil || approval["status"] != "denied" {
				t.Fatalf("declined: result %s, event %v", msg, approval)
			}
		})
	}
}

// A tool's timeout_secs replaces the agent's default tool timeout.
func TestEffectsToolTimeout(t *testing.T) {
	fake := newFakeChat(t, fakeStep{Calls: []fakeCall{{Name: "plugin.hello-c.slow", Args: `{"secs":60}`}}}, fakeStep{Text: "ok"})
	root := effectsWorld(t, fake)
	start := time.Now()
	mustOK(t, run(t, runOpts{timeout: 100 * time.Second}, filepath.Join(root, "agent/coder"), "be slow"))
	if d := time.Since(start); d > 40*time.Second {
		t.Fatalf("the run took %v: timeout_secs=2 was not applied", d)
	}
	if msg := lastToolMessage(t, fake); !strings.Contains(msg, `"code":"ETIMEDOUT"`) {
		t.Fatalf("tool result: %s", msg)
	}
}

func readFileString(t *testing.T, p string) string {
	t.Helper()
	b, _ := os.ReadFile(p)
	return string(b)
}
