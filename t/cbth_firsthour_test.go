package t

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Issue 16, "cbth CLI delivery, as a user meets it": every trap a newcomer
// met following README, each made loud with the fix in the message.

// A completed job whose thread has no cbth session says so, with the
// command that delivers it, in batch inspect-head and job query.
func TestCbthBlockedReasonWithoutSession(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	j := submit(t, home, "T-nosession")
	mustOK(t, cbth(t, home, "job", "complete", "--job-id", j.JobID, "--summary", "done"))
	var head struct {
		Batch *struct {
			Blocked *string `json:"delivery_blocked_reason"`
		}
	}
	cbthJSON(t, home, &head, "batch", "inspect-head", "--source-thread-id", "T-nosession")
	if head.Batch == nil || head.Batch.Blocked == nil || !strings.Contains(*head.Batch.Blocked, "no cbth CLI session") ||
		!strings.Contains(*head.Batch.Blocked, "cbth resume T-nosession") {
		t.Fatalf("inspect-head does not say why the batch waits: %+v", head.Batch)
	}
	var q struct {
		JobID   string  `json:"job_id"`
		Blocked *string `json:"delivery_blocked_reason"`
	}
	cbthJSON(t, home, &q, "job", "query", j.JobID)
	if q.JobID != j.JobID || q.Blocked == nil || *q.Blocked != *head.Batch.Blocked {
		t.Fatalf("job query: %+v", q)
	}
	human := mustOK(t, cbth(t, home, "batch", "inspect-head", "--source-thread-id", "T-nosession"))
	if !strings.Contains(human.stdout, "delivery_blocked_reason") {
		t.Errorf("human inspect-head lacks the reason:\n%s", human.stdout)
	}
}

// README's flow with defaults never delivers (the session allows approval,
// the job is not read-only): the reason, with the flags that fix it, is in
// inspect-head, job query and doctor cli. The bound thread id is printed
// again once codex has left the screen; a session that is done can be
// forgotten once its manual batch is resolved.
func TestCbthCLIDefaultsSayWhyAndForget(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	p := w.foreground("new")
	var thread string
	waitFor(t, 40*time.Second, "cbth new prints the bound thread id", func() bool {
		if m := boundRE.FindStringSubmatch(p.output()); m != nil {
			thread = m[1]
		}
		return thread != ""
	})
	var j cbthJob
	w.json(&j, "job", "submit", "--target", "cli", "--thread-id", thread, "--task-kind", "ci", "--summary", "defaults")
	w.json(&j, "job", "complete", "--job-id", j.JobID, "--summary", "done")
	var q struct {
		Blocked *string `json:"delivery_blocked_reason"`
	}
	waitFor(t, 30*time.Second, "job query names what blocks delivery", func() bool {
		w.json(&q, "job", "query", j.JobID)
		return q.Blocked != nil && strings.Contains(*q.Blocked, "manual_resolution_only")
	})
	if !strings.Contains(*q.Blocked, "--delivery-read-only true") && !strings.Contains(*q.Blocked, "--session-allows-approval false") {
		t.Fatalf("the reason lacks the flags that fix it: %s", *q.Blocked)
	}
	var head struct {
		Batch struct {
			Blocked *string `json:"delivery_blocked_reason"`
		}
	}
	w.json(&head, "batch", "inspect-head", "--source-thread-id", thread)
	if head.Batch.Blocked == nil || *head.Batch.Blocked != *q.Blocked {
		t.Fatalf("inspect-head: %+v, job query: %s", head.Batch, *q.Blocked)
	}
	doc := w.cbth("doctor", "cli", "--json")
	var rep struct {
		Blocked []struct {
			BatchID string `json:"batch_id"`
			Reason  string `json:"delivery_blocked_reason"`
		} `json:"blocked_batches"`
	}
	if err := fromEnvelope([]byte(doc.stdout), &rep); err != nil || len(rep.Blocked) != 1 || rep.Blocked[0].Reason != *q.Blocked {
		t.Fatalf("doctor cli does not list the blocked batch: %v\n%s", err, doc)
	}
	// Quit codex: the id is printed after the alternate screen is gone.
	s := w.leaveTUI(p, thread)
	p.wait()
	tail := p.output()[strings.LastIndex(p.output(), "\x1b"):]
	if !strings.Contains(tail, "continue it with: cbth resume "+thread) {
		t.Fatalf("after codex exits the thread id is not printed again; tail:\n%q", tail)
	}
	// The thread's manual batch keeps the session; once the operator
	// resolved it, the session can be forgotten.
	r := w.cbth("cli", "session", "forget", s.ManagedSessionID, "--json")
	if r.code != 69 || !strings.Contains(r.stdout, `"code":"EBUSY"`) {
		t.Fatalf("forget with an unresolved manual batch: %s", r)
	}
	mustOK(t, w.cbth("batch", "close-head", "--source-thread-id", thread, "--reason", "operator_closed_unconfirmed"))
	var gone cliSession
	w.json(&gone, "cli", "session", "forget", s.ManagedSessionID)
	if gone.SessionState != "retired" {
		t.Fatalf("forgotten session: %+v", gone)
	}
	var listed, all []cliSession
	w.json(&listed, "cli", "session", "list")
	w.json(&all, "cli", "session", "list", "--all")
	if len(listed) != 0 || len(all) != 1 {
		t.Fatalf("list after forget: %d listed, %d with --all", len(listed), len(all))
	}
}

// cbth new/resume refuse early, with the fix: no terminal, an id that is
// not a thread, a thread codex does not know, no codex at all; doctor cli
// fails with the fix when there is no codex. Nothing is left behind.
func TestCbthForegroundRefusalsLeaveNothing(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	r := run(t, runOpts{env: w.env, dir: w.proj, stdin: ""}, applet("cbth"), "new")
	if msg := oneError(t, r, "cbth", "EINVAL", 2); !strings.Contains(msg, "terminal") {
		t.Errorf("cbth new without a terminal: %q", msg)
	}
	oneError(t, run(t, runOpts{env: w.env, dir: w.proj}, applet("cbth"), "resume", "not-a-thread"), "cbth", "EINVAL", 2)
	p := w.foreground("resume", "0199a3f0-1111-7222-8333-444455556666")
	if code := p.wait(); code != 1 || !strings.Contains(p.output(), "codex has no thread") || !strings.Contains(p.output(), "(ENOENT)") {
		t.Fatalf("resume of an unknown thread: exit %d\n%s", code, p.output())
	}
	var all []cliSession
	w.json(&all, "cli", "session", "list", "--all")
	for _, s := range all {
		if s.SessionState != "retired" {
			t.Fatalf("a refused foreground left a session behind: %+v", all)
		}
	}
	var listed []cliSession
	if w.json(&listed, "cli", "session", "list"); len(listed) != 0 {
		t.Fatalf("cli session list shows %+v", listed)
	}
	// No codex on PATH.
	noCodex := []string{"CBTH_HOME=" + w.home, "PATH=/usr/bin:/bin", "TERM=xterm"}
	line := "exec env"
	for _, e := range noCodex {
		line += " " + shq(e)
	}
	p = startPTY(t, "/bin/sh", "-c", line+" "+shq(applet("cbth"))+" new")
	if code := p.wait(); code != 69 || !strings.Contains(p.output(), "npm install -g @openai/codex") {
		t.Fatalf("cbth new without codex: exit %d\n%s", code, p.output())
	}
	d := run(t, runOpts{env: noCodex}, applet("cbth"), "doctor", "cli")
	if d.code != 1 || !regexp.MustCompile(`(?m)^FAIL codex binary .*npm install -g @openai/codex`).MatchString(d.stdout) {
		t.Fatalf("doctor cli without codex:\n%s", d)
	}
}

// cbth doctor on a fresh home starts the daemon like any command; the
// first start writes a commented config.ini of every key; config errors
// name their line and the key meant.
func TestCbthDoctorFreshHomeAndConfig(t *testing.T) {
	home := filepath.Join(t.TempDir(), "fresh")
	t.Cleanup(func() { cbth(t, home, "daemon", "stop") })
	r := cbth(t, home, "doctor")
	if r.code != 0 || strings.Contains(r.stdout, "FAIL") {
		t.Fatalf("doctor on a fresh home:\n%s", r)
	}
	fi, err := os.Stat(filepath.Join(home, "config.ini"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("no private sample config.ini: %v %v", fi, err)
	}
	sample, _ := os.ReadFile(filepath.Join(home, "config.ini"))
	var cfg struct {
		Exists bool `json:"exists"`
		Keys   []struct {
			Section, Key, Value, Default, Doc string
			Set                               bool
		} `json:"keys"`
	}
	cbthJSON(t, home, &cfg, "daemon", "config")
	if !cfg.Exists || len(cfg.Keys) < 20 {
		t.Fatalf("daemon config: %+v", cfg)
	}
	for _, k := range cfg.Keys {
		if k.Set || k.Doc == "" || !strings.Contains(string(sample), "# "+k.Key+" = ") {
			t.Errorf("key %s: set=%v doc=%q, or missing from the sample", k.Key, k.Set, k.Doc)
		}
	}
	mustOK(t, cbth(t, home, "daemon", "stop"))
	if err := os.WriteFile(filepath.Join(home, "config.ini"), []byte("[daemon]\n# comment\nidle_timout = 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cbth(t, home, "daemon", "ping", "--json")
	var e struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal([]byte(r.stdout), &e); r.code != 2 || e.Error.Code != "EINVAL" ||
		!strings.Contains(e.Error.Message, "config.ini:3") || !strings.Contains(e.Error.Message, "did you mean [daemon] idle_timeout?") {
		t.Fatalf("a mistyped key: %s", r)
	}
	oneError(t, cbth(t, home, "daemon", "config"), "cbth", "EINVAL", 2)
	if h := mustOK(t, cbth(t, home, "daemon", "config", "--help")); !strings.Contains(h.stdout, "--sample") {
		t.Errorf("daemon config --help:\n%s", h.stdout)
	}
}
