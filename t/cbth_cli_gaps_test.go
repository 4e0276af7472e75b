package t

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/t/codexfake"
	"github.com/cortexfs/cortexfs/wire/codex"
)

// End-to-end coverage of the managed-session rules of the seed sections
// "CLI delivery_turn_id 观察连续性" and "CLI managed session profile",
// against the real codex (only the model provider is faked).

type gapSession struct {
	ManagedSessionID   string  `json:"managed_session_id"`
	BoundThreadID      *string `json:"bound_thread_id"`
	SessionEpoch       int64   `json:"session_epoch"`
	SessionState       string  `json:"session_state"`
	AllowsWrite        *bool   `json:"session_allows_write_access"`
	StartupWrite       *bool   `json:"startup_session_allows_write_access"`
	RequestedWrite     string  `json:"requested_allows_write_access"`
	AppServerPID       *int64  `json:"app_server_pid"`
	AppServerURL       *string `json:"app_server_url"`
	LeaseID            *string `json:"lease_id"`
	PermissionRevision int64   `json:"permission_snapshot_revision"`
}

func (w *cliWorld) sessions() []gapSession {
	w.t.Helper()
	var ss []gapSession
	w.json(&ss, "cli", "session", "list")
	return ss
}

type gapAudit struct {
	Action   string         `json:"action"`
	EntityID string         `json:"entity_id"`
	From     string         `json:"from_state"`
	To       string         `json:"to_state"`
	Outcome  string         `json:"outcome"`
	Reason   string         `json:"reason"`
	Detail   map[string]any `json:"detail"`
}

func (w *cliWorld) auditRows(thread, action string) []gapAudit {
	w.t.Helper()
	var rows []gapAudit
	w.json(&rows, "audit", "list", "--source-thread-id", thread, "--limit", "1000")
	var out []gapAudit
	for _, r := range rows {
		if r.Action == action {
			out = append(out, r)
		}
	}
	return out
}

// execThread makes a thread with a rollout headlessly (real `codex exec`).
func (w *cliWorld) execThread() string {
	w.t.Helper()
	r := run(w.t, runOpts{env: w.env, dir: w.proj, timeout: 60 * time.Second}, w.bin+"/codex",
		"exec", "--json", "--skip-git-repo-check", "make a thread")
	for _, line := range strings.Split(r.stdout, "\n") {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "thread.started" {
			return ev.ThreadID
		}
	}
	w.t.Fatalf("codex exec made no thread:\n%s", r)
	return ""
}

// leaveTUI quits the Codex TUI (Ctrl-C twice) and waits until the managed
// session's live part has ended.
func (w *cliWorld) leaveTUI(p *ptyProc, thread string) cliSession {
	w.t.Helper()
	p.master.Write([]byte{3})
	time.Sleep(300 * time.Millisecond)
	p.master.Write([]byte{3})
	var s cliSession
	waitFor(w.t, 20*time.Second, "the session leaves live after the TUI exits", func() bool {
		s = w.session(thread)
		return s.SessionState != "live"
	})
	return s
}

// refusedAttach runs a foreground attach on a terminal (cbth new/resume
// refuse to start without one) that must be refused before any codex
// starts; it returns the JSON error message.
func (w *cliWorld) refusedAttach(args ...string) string {
	w.t.Helper()
	p := w.foreground(append(args, "--json")...)
	code := p.wait()
	var body struct {
		OK    bool `json:"ok"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	out := strings.TrimSpace(strings.ReplaceAll(p.output(), "\r\n", "\n"))
	if code == 0 || json.Unmarshal([]byte(out), &body) != nil || body.OK {
		w.t.Fatalf("cbth %v was not refused: exit %d\n%s", args, code, out)
	}
	return body.Error.Message
}

func nonRetired(ss []gapSession, thread string) []gapSession {
	var out []gapSession
	for _, s := range ss {
		if s.BoundThreadID != nil && *s.BoundThreadID == thread && s.SessionState != "retired" {
			out = append(out, s)
		}
	}
	return out
}

// A requested bootstrap profile that differs from the durable one is
// session_profile_mismatch while the old session has a live foreground or
// an accepted turn under observation; once the work is resolved the old
// session is retired and a new managed_session_id carries the new profile.
func TestCbthCLISessionProfileMismatch(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	thread := w.execThread()
	strict := []string{"--session-allows-approval", "false", "--session-allows-network", "false",
		"--session-allows-write-access", "false"}
	p := w.foreground(append([]string{"resume", thread}, strict...)...)
	waitFor(t, 40*time.Second, "session live and pinned", func() bool {
		ss := w.sessions()
		return len(ss) == 1 && ss[0].SessionState == "live" && ss[0].AllowsWrite != nil
	})
	old := w.sessions()[0]
	if *old.AllowsWrite || old.StartupWrite == nil || *old.StartupWrite {
		t.Fatalf("strict bootstrap profile not pinned: %+v", old)
	}

	// (a) the old session has an active foreground client.
	msg := w.refusedAttach("resume", thread, "--session-allows-write-access", "true")
	if !strings.Contains(msg, "session_profile_mismatch") || !strings.Contains(msg, "active foreground") {
		t.Fatalf("mismatch with a live foreground: %q", msg)
	}

	// (b) the foreground is gone but an accepted turn is still observed.
	w.fake.Push(codexfake.Behavior{Kind: codexfake.Slow, Delay: time.Minute})
	job := w.readyJob(thread, "slow SUMMARY-PM")
	w.waitBatch(job, 30*time.Second, "accepted and tracking", func(b cliBatch) bool {
		return b.HeadAttempt != nil && b.HeadAttempt.DeliveryObservationState != nil && *b.HeadAttempt.DeliveryObservationState == "tracking"
	})
	if s := w.leaveTUI(p, thread); s.SessionState != "detached" {
		t.Fatalf("foreground gone with no manual batch: state %s, want detached", s.SessionState)
	}
	msg = w.refusedAttach("resume", thread, "--session-allows-write-access", "true")
	if !strings.Contains(msg, "session_profile_mismatch") || !strings.Contains(msg, "unresolved delivery work") {
		t.Fatalf("mismatch with an observed accepted turn: %q", msg)
	}
	refused := w.auditRows(thread, "cli.attach.refused")
	if len(refused) != 2 || refused[0].Reason != "session_profile_mismatch" || refused[1].Reason != "session_profile_mismatch" ||
		refused[0].EntityID != old.ManagedSessionID || !strings.Contains(fmt.Sprint(refused[0].Detail["changed_dimensions"]), "write_access") {
		t.Fatalf("refusal audit rows: %+v", refused)
	}
	if ss := nonRetired(w.sessions(), thread); len(ss) != 1 || ss[0].ManagedSessionID != old.ManagedSessionID ||
		ss[0].RequestedWrite != "false" {
		t.Fatalf("a refused attach changed the sessions: %+v", ss)
	}

	// (c) the observed turn completes: retirement conditions hold.
	w.fake.Release()
	if b := w.waitBatch(job, 30*time.Second, "delivered", func(b cliBatch) bool { return b.State == "closed" }); *b.CloseReason != "delivered" {
		t.Fatalf("observed turn: %+v", b)
	}
	p2 := w.foreground("resume", thread, "--session-allows-write-access", "true")
	var fresh gapSession
	waitFor(t, 40*time.Second, "a new live session with the new profile", func() bool {
		ss := nonRetired(w.sessions(), thread)
		if len(ss) != 1 || ss[0].ManagedSessionID == old.ManagedSessionID || ss[0].SessionState != "live" || ss[0].StartupWrite == nil {
			return false
		}
		fresh = ss[0]
		return true
	})
	if fresh.RequestedWrite != "true" || !*fresh.StartupWrite || fresh.SessionEpoch != 1 {
		t.Fatalf("new session: %+v", fresh)
	}
	// The read-only thread is narrower than the explicit write=true pin:
	// effective stays false, and that drift is reported.
	if fresh.AllowsWrite == nil || *fresh.AllowsWrite {
		t.Fatalf("effective write of the new session: %+v", fresh)
	}
	drift := w.auditRows(thread, "cli.permission.drift")
	if len(drift) != 1 || drift[0].EntityID != fresh.ManagedSessionID || drift[0].Reason != "tightened" ||
		fmt.Sprint(drift[0].Detail["changed_dimensions"]) != "[write_access]" {
		t.Fatalf("drift against the explicit bootstrap pin: %+v", drift)
	}
	waitFor(t, 10*time.Second, "the drift warning on the new foreground", func() bool {
		return strings.Contains(p2.output(), "session permission drift (tightened: write_access)")
	})
	var retired cliSession
	w.json(&retired, "cli", "session", "inspect", old.ManagedSessionID)
	if retired.SessionState != "retired" {
		t.Fatalf("old session: %+v", retired)
	}
	tr := w.auditRows(thread, "cli.session.transition")
	found := false
	for _, r := range tr {
		found = found || (r.EntityID == old.ManagedSessionID && r.From == "detached" && r.To == "retired")
	}
	if !found {
		t.Fatalf("no detached→retired transition audited: %+v", tr)
	}
}

// A session whose foreground left while a manual batch is unresolved is
// parked; attach/reuse is refused with session_pending_manual_resolution
// (whatever profile is asked) and no second session for the thread is
// made. The operator's close-head releases it: detached, then attachable.
func TestCbthCLIPendingManualResolutionParks(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	w.fake.SetDefault(codexfake.Behavior{Kind: codexfake.Fail})
	p, thread := w.newThread()
	job := w.readyJob(thread, "flaky SUMMARY-PMR")
	w.waitBatch(job, 30*time.Second, "manual after failed turn", func(b cliBatch) bool {
		return b.ReplayPolicy == "manual_resolution_only"
	})
	s := w.session(thread)
	if s.SessionState != "live" {
		t.Fatalf("session with its foreground: %+v", s)
	}
	if got := w.leaveTUI(p, thread); got.SessionState != "parked" {
		t.Fatalf("foreground gone with a manual batch: state %s, want parked", got.SessionState)
	}
	strict := []string{"--session-allows-approval", "false", "--session-allows-network", "false",
		"--session-allows-write-access", "false"}
	for _, args := range [][]string{append([]string{"resume", thread}, strict...), {"resume", thread},
		{"cli", "run", "--bind-thread-id", thread, "--session-allows-write-access", "true"}} {
		if msg := w.refusedAttach(args...); !strings.Contains(msg, "session_pending_manual_resolution") {
			t.Fatalf("cbth %v on a parked session: %q", args, msg)
		}
	}
	if ss := w.sessions(); len(ss) != 1 || ss[0].ManagedSessionID != s.ManagedSessionID || ss[0].SessionState != "parked" {
		t.Fatalf("sessions after refusals: %+v", ss)
	}
	if n := len(w.auditRows(thread, "cli.attach.refused")); n != 3 {
		t.Fatalf("%d refusal audit rows, want 3", n)
	}
	for _, r := range w.auditRows(thread, "cli.attach.refused") {
		if r.Reason != "session_pending_manual_resolution" || r.Outcome != "refused" {
			t.Fatalf("refusal audit: %+v", r)
		}
	}
	mustOK(t, w.cbth("batch", "close-head", "--source-thread-id", thread, "--reason", "operator_closed_unconfirmed"))
	waitFor(t, 10*time.Second, "parked session released to detached", func() bool {
		return w.session(thread).SessionState == "detached"
	})
	w.fake.SetDefault(codexfake.Behavior{Kind: codexfake.Answer})
	w.foreground(append([]string{"resume", thread}, strict...)...)
	waitFor(t, 40*time.Second, "the same session live again", func() bool {
		for _, r := range w.auditRows(thread, "cli.session.transition") {
			if r.EntityID == s.ManagedSessionID && r.From == "detached" && r.To == "live" {
				return true
			}
		}
		return false
	})
	if ss := w.sessions(); len(ss) != 1 || ss[0].ManagedSessionID != s.ManagedSessionID {
		t.Fatalf("sessions after close-head and attach: %+v", ss)
	}
}

// dropDaemonWebsocket destroys the daemon's own TCP connections to the
// app-server (ss -K, kernel SOCK_DESTROY) and leaves the app-server and
// the TUI's connection alone (besides its websocket the daemon may hold an
// idle keep-alive of its /readyz poll). It returns how many it destroyed.
func dropDaemonWebsocket(t *testing.T, w *cliWorld, url string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("ss"); err != nil {
		t.Fatalf("ss (iproute2) is required to drop a TCP connection: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(w.home, "run", "daemon.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(raw, &info); err != nil || info.PID == 0 {
		t.Fatalf("daemon.pid: %v %s", err, raw)
	}
	pid := info.PID
	hostport := strings.TrimPrefix(url, "ws://")
	out, err := exec.Command("ss", "-tnpH", "dst", hostport).CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, fmt.Sprintf("pid=%d,", pid)) {
			continue
		}
		local := ""
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "127.0.0.1:") && f != hostport {
				local = f
				break
			}
		}
		if local == "" {
			continue
		}
		k, err := exec.Command("ss", "-K", "-tnH", "src", local, "dst", hostport).CombinedOutput()
		if err != nil {
			t.Fatalf("ss -K: %v\n%s", err, k)
		}
		if strings.TrimSpace(string(k)) != "" {
			n++
		}
	}
	return n, fmt.Sprintf("daemon pid %d; ss -tnpH dst %s:\n%s", pid, hostport, out)
}

// A websocket drop to the same live app-server keeps session_epoch and
// the accepted turn's observation goes on to delivered; an app-server
// restart moves the epoch on.
func TestCbthCLIWebsocketReconnectKeepsEpoch(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	w.fake.Push(codexfake.Behavior{Kind: codexfake.Slow, Delay: time.Minute})
	_, thread := w.newThread()
	job := w.readyJob(thread, "slow SUMMARY-WS")
	w.waitBatch(job, 30*time.Second, "accepted and tracking", func(b cliBatch) bool {
		return b.HeadAttempt != nil && b.HeadAttempt.DeliveryObservationState != nil && *b.HeadAttempt.DeliveryObservationState == "tracking"
	})
	s := w.session(thread)
	if s.SessionEpoch != 1 || s.AppServerURL == nil || s.AppServerPID == nil {
		t.Fatalf("session before the drop: %+v", s)
	}
	if n, seen := dropDaemonWebsocket(t, w, *s.AppServerURL); n < 1 {
		t.Fatalf("destroyed %d daemon connections to %s (ss -K needs root and a kernel with CONFIG_INET_DIAG_DESTROY); %s", n, *s.AppServerURL, seen)
	}
	waitFor(t, 10*time.Second, "the daemon reconnects to the same app-server", func() bool {
		return strings.Contains(w.daemonLog(), "reconnected to "+*s.AppServerURL+" (same epoch)")
	})
	var v struct {
		cliSession
		Connected bool `json:"connected"`
	}
	w.json(&v, "cli", "session", "inspect", "--thread-id", thread)
	if v.SessionEpoch != 1 || !v.Connected || *v.AppServerPID != *s.AppServerPID {
		t.Fatalf("after the reconnect: %+v", v)
	}
	w.fake.Release()
	b := w.waitBatch(job, 30*time.Second, "observation continues to delivered", func(b cliBatch) bool { return b.State == "closed" })
	if a := b.HeadAttempt; *b.CloseReason != "delivered" || *a.SessionEpoch != 1 || *a.LastObservedTurnEvent != "turn_completed" {
		t.Fatalf("after the reconnect the batch: %+v attempt %+v", b, a)
	}
	if n := len(w.auditRows(thread, "cli.session.epoch")); n != 0 {
		t.Fatalf("%d epoch changes for a websocket reconnect", n)
	}
	// An app-server restart (its process group killed) is a new epoch.
	if err := syscall.Kill(-int(*s.AppServerPID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "epoch 2 on a new app-server", func() bool {
		s2 := w.session(thread)
		return s2.SessionEpoch == 2 && s2.AppServerPID != nil && *s2.AppServerPID != *s.AppServerPID
	})
}

// userTurn is the thread's user acting through a second real app-server
// client: a turn/start whose approvalPolicy/sandboxPolicy override the
// thread's permissions for this and later turns (what the TUI sends after
// a permissions change). It waits for the turn to finish.
func userTurn(t *testing.T, url, thread, text string, approval, sandbox string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan string, 16)
	cl, err := codex.Dial(ctx, url, func(n codex.Notification) {
		if n.Method == codex.NoteTurnCompleted {
			var p codex.TurnNotification
			if json.Unmarshal(n.Params, &p) == nil && p.ThreadID == thread {
				done <- p.Turn.ID
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, "cbth-e2e-user", "0"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Call(ctx, codex.MethodThreadResume, codex.ThreadResumeParams{ThreadID: thread, ExcludeTurns: true}, nil); err != nil {
		t.Fatal(err)
	}
	var resp codex.TurnStartResponse
	err = cl.Call(ctx, codex.MethodTurnStart, codex.TurnStartParams{ThreadID: thread,
		Input:          []codex.UserInput{{Type: "text", Text: text}},
		ApprovalPolicy: json.RawMessage(approval), SandboxPolicy: json.RawMessage(sandbox)}, &resp)
	if err != nil {
		t.Fatalf("user turn/start: %v", err)
	}
	for {
		select {
		case id := <-done:
			if id == resp.Turn.ID {
				return
			}
		case <-ctx.Done():
			t.Fatalf("user turn %s never completed", resp.Turn.ID)
		}
	}
}

// threadPermissions reads the thread's current approvalPolicy and sandbox
// through a fresh client's thread/resume.
func threadPermissions(t *testing.T, url, thread string) (string, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := codex.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, "cbth-e2e-reader", "0"); err != nil {
		t.Fatal(err)
	}
	var r codex.ThreadResumeResponse
	if err := cl.Call(ctx, codex.MethodThreadResume, codex.ThreadResumeParams{ThreadID: thread, ExcludeTurns: true}, &r); err != nil {
		t.Fatal(err)
	}
	var sb map[string]any
	_ = json.Unmarshal(r.Sandbox, &sb)
	return string(r.ApprovalPolicy), sb
}

func sandboxOf(t *testing.T, allow gapAudit) map[string]any {
	t.Helper()
	sb, _ := allow.Detail["sandbox_policy"].(map[string]any)
	if sb == nil {
		t.Fatalf("allow row records no sandbox_policy: %+v", allow)
	}
	return sb
}

// Drift of the thread's current permissions against the startup pin, in
// both directions: a stderr warning on the foreground, an audit row with
// startup/current/effective and the changed dimensions, and turn/start
// carrying the tighter effective policy (the allow row records what was
// sent), while the thread's own settings are restored after it.
func TestCbthCLIPermissionDrift(t *testing.T) {
	w := newCLIWorld(t, "workspace-write")
	thread := w.execThread()
	p := w.foreground("resume", thread, "--auto-delivery-policy", "trusted-all")
	waitFor(t, 40*time.Second, "session live with the auto startup pin", func() bool {
		ss := w.sessions()
		return len(ss) == 1 && ss[0].SessionState == "live" && ss[0].StartupWrite != nil
	})
	s := w.sessions()[0]
	if !*s.StartupWrite || !*s.AllowsWrite {
		t.Fatalf("workspace-write thread pinned: %+v", s)
	}
	url := *s.AppServerURL

	// Narrower: the user turns the thread read-only.
	userTurn(t, url, thread, "go read-only", `"never"`, `{"type":"readOnly","networkAccess":false}`)
	job1 := w.readyJob(thread, "narrowed SUMMARY-D1")
	if b := w.waitBatch(job1, 30*time.Second, "delivered", func(b cliBatch) bool { return b.State == "closed" }); *b.CloseReason != "delivered" {
		t.Fatalf("first batch: %+v", b)
	}
	drift := w.auditRows(thread, "cli.permission.drift")
	if len(drift) != 1 {
		t.Fatalf("%d drift rows after narrowing, want 1: %+v", len(drift), drift)
	}
	d := drift[0]
	eff, _ := d.Detail["effective"].(map[string]any)
	startup, _ := d.Detail["startup"].(map[string]any)
	current, _ := d.Detail["current"].(map[string]any)
	if d.Reason != "tightened" || fmt.Sprint(d.Detail["changed_dimensions"]) != "[write_access]" ||
		startup["allows_write_access"] != true || current["allows_write_access"] != false || eff["allows_write_access"] != false {
		t.Fatalf("narrowing drift row: %+v", d)
	}
	allow := w.auditRows(thread, "cli.delivery.allow")
	if len(allow) != 1 || sandboxOf(t, allow[0])["type"] != "readOnly" || allow[0].Detail["approval_policy"] != "never" {
		t.Fatalf("turn/start after narrowing must carry readOnly/never: %+v", allow)
	}
	waitFor(t, 10*time.Second, "the drift warning on the foreground's stderr", func() bool {
		return strings.Contains(p.output(), "cbth: warning: session permission drift (tightened: write_access)")
	})

	// Wider than the startup pin: full access, network and approvals.
	userTurn(t, url, thread, "go wide", `"on-request"`, `{"type":"dangerFullAccess"}`)
	if a, sb := threadPermissions(t, url, thread); a != `"on-request"` || sb["type"] != "dangerFullAccess" {
		t.Fatalf("the user turn did not widen the thread: %s %v", a, sb)
	}
	job2 := w.readyJob(thread, "widened SUMMARY-D2")
	if b := w.waitBatch(job2, 30*time.Second, "delivered", func(b cliBatch) bool { return b.State == "closed" }); *b.CloseReason != "delivered" {
		t.Fatalf("second batch: %+v", b)
	}
	drift = w.auditRows(thread, "cli.permission.drift")
	if len(drift) != 2 {
		t.Fatalf("%d drift rows after widening, want 2: %+v", len(drift), drift)
	}
	d = gapAudit{}
	for _, r := range drift {
		if r.Reason == "loosened" {
			d = r
		}
	}
	eff, _ = d.Detail["effective"].(map[string]any)
	current, _ = d.Detail["current"].(map[string]any)
	if d.Reason != "loosened" || fmt.Sprint(d.Detail["changed_dimensions"]) != "[approval network write_access]" ||
		current["allows_approval"] != true || current["allows_network"] != true ||
		eff["allows_approval"] != false || eff["allows_network"] != false || eff["allows_write_access"] != true {
		t.Fatalf("widening drift row: %+v", d)
	}
	allow = w.auditRows(thread, "cli.delivery.allow")
	var second gapAudit
	for _, a := range allow {
		if sb := sandboxOf(t, a); sb["type"] != "readOnly" {
			second = a
		}
	}
	sb := sandboxOf(t, second)
	if sb["type"] != "workspaceWrite" || sb["networkAccess"] != false || second.Detail["approval_policy"] != "never" {
		t.Fatalf("turn/start after widening must carry the startup-capped workspaceWrite/no network/never: %+v", allow)
	}
	// The delivered turn ran with the capped policy, but the thread keeps
	// the user's own wide settings for the user's next turns.
	if a, sb := threadPermissions(t, url, thread); a != `"on-request"` || sb["type"] != "dangerFullAccess" {
		t.Fatalf("thread permissions after the delivered turn: %s %v, want the user's on-request/dangerFullAccess", a, sb)
	}
	waitFor(t, 10*time.Second, "the widening warning on stderr", func() bool {
		return strings.Contains(p.output(), "session permission drift (loosened: approval,network,write_access)")
	})
}
