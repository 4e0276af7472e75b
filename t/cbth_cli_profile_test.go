package t

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// An existing thread (made headlessly by the real `codex exec`) is bound
// with `cbth resume ID`; its thread runs workspace-write, so the auto
// profile pins write access and strict-safe automatic delivery is refused:
// the batch becomes manual_resolution_only with the reason, it never waits
// silently as automatic.
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
	b := w.waitBatch(job, 10*time.Second, "manual_resolution_only", func(b cliBatch) bool {
		return b.ReplayPolicy == "manual_resolution_only"
	})
	time.Sleep(time.Second)
	if b = w.batchOfJob(job); b.State == "closed" || b.HeadAttempt.State != "abandoned" || len(w.fake.Matching("blocked SUMMARY-W")) != 0 {
		t.Fatalf("blocked batch was delivered or not failed closed: %+v", b)
	}
	var reason string
	for _, r := range w.audit(thread) {
		if r.Action == "batch.replay_policy" && r.To == "manual_resolution_only" {
			reason = r.Reason
		}
	}
	if !strings.Contains(reason, "strict-safe") || !strings.Contains(reason, "write_access=true") {
		t.Fatalf("the manual_resolution_only audit row does not carry the gate's reason: %q", reason)
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
	script := "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'codex-cli 0.120.0'; exit 0; }\n" +
		"[ \"$5\" = --experimental ] || exit 9\n" +
		"mkdir -p \"$4\"; echo '{\"oneOf\":[]}' > \"$4/ClientRequest.json\"; echo '{\"oneOf\":[]}' > \"$4/ServerNotification.json\"\n"
	if err := writeExec(fakeBin, script); err != nil {
		t.Fatal(err)
	}
	r := w.cbth("doctor", "cli", "--codex-bin", fakeBin, "--json")
	for _, want := range []string{"method turn/start", "turn/start clientUserMessageId", "method thread/settings/update",
		"codex \u003e= 0.136.0 (found 0.120.0)", `"min_version":"0.136.0"`} {
		if r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Fatalf("doctor cli on an incapable binary lacks %q:\n%s", want, r)
		}
	}
	human := w.cbth("doctor", "cli", "--codex-bin", fakeBin)
	if !strings.Contains(human.stdout, "0.120.0 (supported: 0.136.0 or later") {
		t.Fatalf("doctor cli does not show the version and the minimum:\n%s", human)
	}
	for _, v := range codexVersions {
		ok := w.cbth("doctor", "cli", "--codex-bin", codexDir(t, v.dir)+"/codex")
		if ok.code != 0 || !strings.Contains(ok.stdout, "ok   codex capability probe") || !strings.Contains(ok.stdout, v.name+".0 (supported") {
			t.Fatalf("doctor cli on codex %s:\n%s", v.name, ok)
		}
	}
}

// The capability probe's real verdict is recorded: a codex whose protocol
// lacks a method delivery relies on (here thread/settings/update, which
// restores the user's settings) leaves the session capability "missing",
// audited as such with the reason, and nothing is delivered.
func TestCbthCLIProbeAuditsRealOutcome(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	wrapper := t.TempDir() + "/codex"
	real := w.bin + "/codex"
	script := "#!/bin/sh\nif [ \"$2\" = generate-json-schema ]; then\n  " + shq(real) + " \"$@\" || exit $?\n" +
		"  sed -i 's|\"thread/settings/update\"|\"thread/settings/gone\"|' \"$4/ClientRequest.json\"\n  exit 0\nfi\nexec " +
		shq(real) + " \"$@\"\n"
	if err := writeExec(wrapper, script); err != nil {
		t.Fatal(err)
	}
	_, thread := w.newThread("--codex-bin", wrapper)
	s := w.session(thread)
	if s.CapabilityState != "missing" {
		t.Fatalf("session with an incapable codex: %+v", s)
	}
	var rows []gapAudit
	w.json(&rows, "audit", "list", "--action", "cli.capability_probe", "--limit", "10")
	if len(rows) == 0 || rows[len(rows)-1].Outcome != "missing" || !strings.Contains(rows[len(rows)-1].Reason, "method thread/settings/update") {
		t.Fatalf("probe audit rows: %+v", rows)
	}
	job := w.readyJob(thread, "never SUMMARY-CAP")
	time.Sleep(3 * time.Second)
	if b := w.batchOfJob(job); b.State == "closed" || len(w.fake.Matching("SUMMARY-CAP")) != 0 {
		t.Fatalf("delivered despite a missing capability: %+v", b)
	}
}
