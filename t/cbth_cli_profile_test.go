package t

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// An existing thread (made headlessly by the real `codex exec`) is bound
// with `cbth resume ID`; its thread runs workspace-write, so the auto
// profile pins write access and strict-safe automatic delivery is refused
// with a visible reason.
func TestCbthCLIStrictSafeRefusesWriteProfile(t *testing.T) {
	w := newCLIWorld(t, "workspace-write")
	r := run(t, runOpts{env: w.env, dir: w.proj, timeout: 60 * time.Second}, codexBinDir(t)+"/codex",
		"exec", "--json", "--skip-git-repo-check", "make a thread")
	thread := ""
	for _, line := range strings.Split(r.stdout, "\n") {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "thread.started" {
			thread = ev.ThreadID
		}
	}
	if thread == "" {
		t.Fatalf("codex exec made no thread:\n%s", r)
	}
	p := w.foreground("resume", thread)
	waitFor(t, 40*time.Second, "session live with a pinned profile", func() bool {
		var ss []cliSession
		w.json(&ss, "cli", "session", "list")
		return len(ss) == 1 && ss[0].SessionState == "live" && ss[0].SessionAllowsWrite != nil
	})
	s := w.session(thread)
	if !*s.SessionAllowsWrite {
		t.Fatalf("workspace-write thread pinned write=false: %+v", s)
	}
	job := w.readyJob(thread, "blocked SUMMARY-W")
	waitFor(t, 20*time.Second, "delivery_blocked_reason", func() bool {
		s = w.session(thread)
		return s.DeliveryBlockedReason != nil
	})
	if !strings.Contains(*s.DeliveryBlockedReason, "write_access=true") {
		t.Fatalf("reason: %s", *s.DeliveryBlockedReason)
	}
	time.Sleep(time.Second)
	if b := w.batchOfJob(job); b.State == "closed" || b.HeadAttempt.State != "prepared" || len(w.fake.Matching("blocked SUMMARY-W")) != 0 {
		t.Fatalf("blocked batch was delivered: %+v", b)
	}
	if countAudit(w.audit(thread), "cli.delivery.blocked", "", "") == 0 {
		t.Fatal("no cli.delivery.blocked audit row")
	}
	doc := w.cbth("doctor", "cli", "--json")
	if doc.code != 0 || !strings.Contains(doc.stdout, `"ok":true`) || !strings.Contains(doc.stdout, "write_access=true") {
		t.Fatalf("doctor cli:\n%s", doc)
	}
	// The real TUI attached to the daemon-owned app-server and resumed it.
	if !strings.Contains(p.output(), "cbth") && len(p.output()) == 0 {
		t.Fatalf("no TUI output")
	}
}

// A codex binary whose protocol lacks what delivery needs fails closed in
// doctor with a clear reason.
func TestCbthCLIDoctorFailsClosedOnMissingCapability(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	fakeBin := t.TempDir() + "/codex"
	// A real program that answers generate-json-schema with an empty protocol.
	script := "#!/bin/sh\nmkdir -p \"$4\"; echo '{\"oneOf\":[]}' > \"$4/ClientRequest.json\"; echo '{\"oneOf\":[]}' > \"$4/ServerNotification.json\"\n"
	if err := writeExec(fakeBin, script); err != nil {
		t.Fatal(err)
	}
	r := w.cbth("doctor", "cli", "--codex-bin", fakeBin, "--json")
	if r.code != 1 || !strings.Contains(r.stdout, "method turn/start") || !strings.Contains(r.stdout, "turn/start clientUserMessageId") {
		t.Fatalf("doctor cli on an incapable binary:\n%s", r)
	}
	ok := w.cbth("doctor", "cli")
	if ok.code != 0 || !strings.Contains(ok.stdout, "ok   codex capability probe") {
		t.Fatalf("doctor cli on the real codex:\n%s", ok)
	}
}
