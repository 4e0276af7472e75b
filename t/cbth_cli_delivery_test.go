package t

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/t/codexfake"
	"github.com/cortexfs/cortexfs/wire/codex"
)

// A fresh thread made by the real Codex TUI (codex --remote on a pty) is
// bound from its first thread/started; a completed job is delivered with
// turn/start, the model sees the batch summary and the marker, and the
// observed turn/completed closes the batch as delivered.
func TestCbthCLINewThreadDelivered(t *testing.T) {
	for _, v := range codexVersions {
		t.Run("codex-"+v.name, func(t *testing.T) { testNewThreadDelivered(t, codexDir(t, v.dir)) })
	}
}

func testNewThreadDelivered(t *testing.T, bin string) {
	w := newCLIWorldBin(t, "read-only", bin)
	p, thread := w.newThread()
	s := w.session(thread)
	if s.SessionEpoch != 1 || s.SessionState != "live" || s.CapabilityState != "ok" || s.AppServerURL == nil ||
		!strings.HasPrefix(*s.AppServerURL, "ws://127.0.0.1:") {
		t.Fatalf("fresh managed session: %+v", s)
	}
	job := w.readyJob(thread, "nightly build SUMMARY-7")
	b := w.waitBatch(job, 30*time.Second, "batch delivered", func(b cliBatch) bool { return b.State == "closed" })
	if b.CloseReason == nil || *b.CloseReason != "delivered" || b.HeadAttempt == nil {
		t.Fatalf("batch not delivered: %+v", b)
	}
	a := b.HeadAttempt
	if a.DeliveryTurnID == nil || a.ManagedSessionID == nil || *a.ManagedSessionID != s.ManagedSessionID ||
		a.SessionEpoch == nil || *a.SessionEpoch != 1 || a.DeliveryAcceptedAt == nil || a.DeliveryObservationDeadline == nil ||
		a.LastObservedTurnEvent == nil || *a.LastObservedTurnEvent != "turn_completed" || a.DeliveryRPCCorrelationMarker == nil {
		t.Fatalf("CLI evidence fields: %+v", a)
	}
	req, ok := w.fake.WaitMatching(*a.DeliveryRPCCorrelationMarker, 5*time.Second)
	if !ok || !strings.Contains(string(req.Body), "nightly build SUMMARY-7") || !strings.Contains(string(req.Body), job) {
		t.Fatalf("the model never received the batch summary with marker %s; %d requests", *a.DeliveryRPCCorrelationMarker, len(w.fake.Requests()))
	}
	rows := w.audit(thread)
	for _, want := range []struct{ action, from, to string }{{"cli.delivery.allow", "", ""},
		{"attempt.transition", "prepared", "accept_pending"}, {"attempt.transition", "accept_pending", "cooldown"},
		{"cli.turn_event", "", "turn_completed"}, {"batch.transition", "cooldown", "closed"}} {
		if countAudit(rows, want.action, want.from, want.to) == 0 {
			t.Errorf("audit lacks %v: %+v", want, rows)
		}
	}
	var apps []struct {
		ManagedSessionID string `json:"managed_session_id"`
		PID              int    `json:"pid"`
		Running          bool   `json:"running"`
	}
	w.json(&apps, "cli", "app-servers")
	if len(apps) != 1 || !apps[0].Running || apps[0].ManagedSessionID != s.ManagedSessionID {
		t.Fatalf("app-servers: %+v", apps)
	}
	// The TUI exits (Ctrl-C twice): the lease ends and the session leaves live.
	p.master.Write([]byte{3})
	time.Sleep(300 * time.Millisecond)
	p.master.Write([]byte{3})
	waitFor(t, 20*time.Second, "session detached after the TUI exits", func() bool {
		return w.session(thread).SessionState == "detached"
	})
}

// A turn the model fails ends the accepted attempt: abandoned, the batch
// manual_resolution_only, and never a second turn/start.
func TestCbthCLIFailedTurnIsManual(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	w.fake.SetDefault(codexfake.Behavior{Kind: codexfake.Fail})
	_, thread := w.newThread()
	job := w.readyJob(thread, "flaky SUMMARY-F")
	b := w.waitBatch(job, 30*time.Second, "manual after failed turn", func(b cliBatch) bool {
		return b.ReplayPolicy == "manual_resolution_only"
	})
	a := b.HeadAttempt
	if b.State == "closed" || a == nil || a.State != "abandoned" || a.LastObservedTurnEvent == nil ||
		*a.LastObservedTurnEvent != "turn_failed" {
		t.Fatalf("after a failed turn: %+v attempt %+v", b, a)
	}
	time.Sleep(3 * time.Second) // a second turn/start would happen within this
	if n := countAudit(w.audit(thread), "attempt.transition", "prepared", "accept_pending"); n != 1 {
		t.Fatalf("%d turn/start attempts, want exactly 1", n)
	}
	if b = w.batchOfJob(job); len(b.Attempts) != 1 || b.State == "closed" {
		t.Fatalf("after waiting: %d attempts (want 1), batch %s", len(b.Attempts), b.State)
	}
}

// Killing the app-server mid-turn bumps the epoch and fails the in-flight
// accepted attempt closed; the operator's close-head releases the FIFO and
// the next batch is delivered on a new app-server.
func TestCbthCLIAppServerKilledMidTurn(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	w.fake.Push(codexfake.Behavior{Kind: codexfake.Slow, Delay: time.Minute})
	_, thread := w.newThread()
	first := w.readyJob(thread, "slow SUMMARY-K1")
	b := w.waitBatch(first, 30*time.Second, "accepted and tracking", func(b cliBatch) bool {
		return b.HeadAttempt != nil && b.HeadAttempt.DeliveryObservationState != nil && *b.HeadAttempt.DeliveryObservationState == "tracking"
	})
	s := w.session(thread)
	if s.AppServerPID == nil || s.SessionEpoch != 1 {
		t.Fatalf("session before kill: %+v", s)
	}
	// Kill only once the slow turn's request is in the fake: killed earlier,
	// the queued slow behaviour would be served to the next batch's turn.
	if _, ok := w.fake.WaitMatching("SUMMARY-K1", 20*time.Second); !ok {
		t.Fatal("the first turn's model request never reached the fake")
	}
	second := w.readyJob(thread, "after SUMMARY-K2")
	if err := syscall.Kill(-int(*s.AppServerPID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b = w.waitBatch(first, 20*time.Second, "attempt failed closed", func(b cliBatch) bool {
		return b.ReplayPolicy == "manual_resolution_only"
	})
	if a := b.HeadAttempt; a.State != "abandoned" || *a.DeliveryObservationState != "lost" {
		t.Fatalf("in-flight attempt after kill: %+v", a)
	}
	waitFor(t, 30*time.Second, "epoch 2 on a new app-server", func() bool {
		s2 := w.session(thread)
		return s2.SessionEpoch == 2 && s2.AppServerPID != nil && *s2.AppServerPID != *s.AppServerPID
	})
	if sb := w.batchOfJob(second); sb.State == "closed" {
		t.Fatalf("second batch delivered while the manual head blocked the FIFO: %+v", sb)
	}
	mustOK(t, w.cbth("batch", "close-head", "--source-thread-id", thread, "--reason", "operator_closed_unconfirmed"))
	b2 := w.waitBatch(second, 40*time.Second, "second batch delivered", func(b cliBatch) bool { return b.State == "closed" })
	if *b2.CloseReason != "delivered" || *b2.HeadAttempt.SessionEpoch != 2 {
		t.Fatalf("second batch: %+v attempt %+v", b2, b2.HeadAttempt)
	}
}

// A delivery must not change the user's session: the delivered turn runs
// with the pinned (narrower) permissions, and the thread's own settings
// are back for the user's next turn, on every supported codex.
func TestCbthCLIDeliveryKeepsUserSettings(t *testing.T) {
	for _, v := range codexVersions {
		t.Run("codex-"+v.name, func(t *testing.T) {
			w := newCLIWorldBin(t, "workspace-write", codexDir(t, v.dir))
			thread := w.execThread()
			w.foreground("resume", thread, "--session-allows-approval", "false", "--session-allows-network", "false",
				"--session-allows-write-access", "false")
			waitFor(t, 40*time.Second, "session live", func() bool {
				ss := w.sessions()
				return len(ss) == 1 && ss[0].SessionState == "live" && ss[0].AppServerURL != nil
			})
			url := *w.sessions()[0].AppServerURL
			job := w.readyJob(thread, "settings SUMMARY-S")
			b := w.waitBatch(job, 40*time.Second, "delivered", func(b cliBatch) bool { return b.State == "closed" })
			if *b.CloseReason != "delivered" {
				t.Fatalf("batch: %+v", b)
			}
			req, ok := w.fake.WaitMatching(*b.HeadAttempt.DeliveryRPCCorrelationMarker, 5*time.Second)
			if !ok || sandboxModeOf(req.Body) != "read-only" {
				t.Fatalf("the delivered turn ran with %q, want read-only", sandboxModeOf(req.Body))
			}
			approval, sb := threadPermissions(t, url, thread)
			if approval != `"never"` || sb["type"] != "workspaceWrite" {
				t.Fatalf("thread settings after the delivery: %s %v, want the user's never/workspaceWrite", approval, sb)
			}
			userTurn(t, url, thread, "USER-NEXT-18", "", "")
			next, ok := w.fake.WaitMatching("USER-NEXT-18", 5*time.Second)
			if !ok || sandboxModeOf(next.Body) != "workspace-write" {
				t.Fatalf("the user's next turn ran with %q, want workspace-write", sandboxModeOf(next.Body))
			}
			if n := countAudit(w.audit(thread), "cli.settings.restore", "", ""); n != 1 {
				t.Errorf("%d cli.settings.restore rows, want 1", n)
			}
		})
	}
}

// sandboxModeOf is the sandbox mode the latest permission instructions of
// a model request state (the turn's own, after any earlier turns').
func sandboxModeOf(body []byte) string {
	const key = "sandbox_mode` is `"
	s := string(body)
	i := strings.LastIndex(s, key)
	if i < 0 {
		return ""
	}
	rest := s[i+len(key):]
	return rest[:max(strings.IndexByte(rest, '`'), 0)]
}

// --enable-turn-steer really steers: with a read-only batch and an active
// user turn that is itself read_only_low_risk, the batch goes into that
// turn with turn/steer (its marker reaches the model) and closes delivered
// when the steered turn completes.
func TestCbthCLITurnSteer(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	thread := w.execThread()
	w.foreground("resume", thread, "--enable-turn-steer", "--session-allows-approval", "false",
		"--session-allows-network", "false", "--session-allows-write-access", "false")
	waitFor(t, 40*time.Second, "session live", func() bool {
		ss := w.sessions()
		return len(ss) == 1 && ss[0].SessionState == "live" && ss[0].AppServerURL != nil
	})
	url := *w.sessions()[0].AppServerURL
	w.fake.Push(codexfake.Behavior{Kind: codexfake.Slow, Delay: 8 * time.Second})
	userDone := make(chan struct{})
	go func() { defer close(userDone); userTurn(t, url, thread, "USER-SLOW-18", "", "") }()
	if _, ok := w.fake.WaitMatching("USER-SLOW-18", 20*time.Second); !ok {
		t.Fatal("the user's turn never reached the model")
	}
	job := w.readyJob(thread, "steered SUMMARY-ST")
	b := w.waitBatch(job, 60*time.Second, "delivered", func(b cliBatch) bool { return b.State == "closed" })
	<-userDone
	var full struct {
		DeliveryMode *string `json:"delivery_mode"`
		HeadAttempt  *struct {
			DeliveryRPCKind *string `json:"delivery_rpc_kind"`
		} `json:"head_attempt"`
	}
	w.json(&full, "batch", "inspect", "--batch-id", b.BatchID)
	if *b.CloseReason != "delivered" || full.DeliveryMode == nil || *full.DeliveryMode != "cli_turn_steer" ||
		*full.HeadAttempt.DeliveryRPCKind != "turn_steer" {
		t.Fatalf("steered batch: %+v mode %v", b, full.DeliveryMode)
	}
	if _, ok := w.fake.WaitMatching(*b.HeadAttempt.DeliveryRPCCorrelationMarker, 5*time.Second); !ok {
		t.Fatal("the steered input never reached the model")
	}
}

// A thread under a built-in permission profile (default_permissions) gets
// the profile id on turn/start, not a legacy sandbox, when the profile is
// exactly the effective cap; tightened by the session, it gets the pinned
// legacy sandbox, and the profile comes back after the delivered turn.
func TestCbthCLIPermissionProfileOnTurnStart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flags     []string
		wantProf  string
		wantModel string
	}{
		{"exact", []string{"--auto-delivery-policy", "trusted-all"}, ":workspace", "workspace-write"},
		{"tightened", []string{"--session-allows-approval", "false", "--session-allows-network", "false",
			"--session-allows-write-access", "false"}, "", "read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCLIWorld(t, "workspace-write")
			cfg := filepath.Join(w.codexHome, "config.toml")
			b, _ := os.ReadFile(cfg)
			os.WriteFile(cfg, []byte(strings.Replace(string(b), `sandbox_mode = "workspace-write"`, `default_permissions = ":workspace"`, 1)), 0o600)
			thread := w.execThread()
			w.foreground(append([]string{"resume", thread}, tc.flags...)...)
			waitFor(t, 40*time.Second, "session live", func() bool {
				ss := w.sessions()
				return len(ss) == 1 && ss[0].SessionState == "live" && ss[0].AppServerURL != nil
			})
			url := *w.sessions()[0].AppServerURL
			job := w.readyJob(thread, "profile SUMMARY-PP")
			bt := w.waitBatch(job, 40*time.Second, "delivered", func(b cliBatch) bool { return b.State == "closed" })
			allow := w.auditRows(thread, "cli.delivery.allow")
			if len(allow) != 1 || fmt.Sprint(allow[0].Detail["permissions"]) != tc.wantProf && tc.wantProf != "" ||
				tc.wantProf == "" && allow[0].Detail["sandbox_policy"] == nil {
				t.Fatalf("allow row: %+v", allow)
			}
			req, _ := w.fake.WaitMatching(*bt.HeadAttempt.DeliveryRPCCorrelationMarker, 5*time.Second)
			if got := sandboxModeOf(req.Body); got != tc.wantModel {
				t.Fatalf("the delivered turn ran %q, want %q", got, tc.wantModel)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cl, err := codex.Dial(ctx, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			cl.Initialize(ctx, "check", "0")
			var r codex.ThreadResumeResponse
			if err := cl.Call(ctx, codex.MethodThreadResume, codex.ThreadResumeParams{ThreadID: thread, ExcludeTurns: true}, &r); err != nil {
				t.Fatal(err)
			}
			if r.ActivePermissionProfile == nil || r.ActivePermissionProfile.ID != ":workspace" {
				t.Fatalf("active profile after the delivery: %+v", r.ActivePermissionProfile)
			}
		})
	}
}
