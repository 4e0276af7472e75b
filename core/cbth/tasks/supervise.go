package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// outcome is how a task ended, with its output tails.
type outcome struct {
	state            State
	status           int
	signal           string
	reason           string
	stdout, stderr   string
	outTrunc, errTrn bool
	format           string
}

func (m *Manager) supervise(id, jobID string, p *proc, format string, timeout time.Duration) {
	defer m.wg.Done()
	waited := make(chan error, 1)
	go func() {
		err := p.cmd.Wait()
		close(p.exited)
		waited <- err
	}()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var err error
	select {
	case err = <-waited:
	case <-timer:
		m.mu.Lock()
		p.timedOut = true
		m.mu.Unlock()
		m.stop(p)
		err = <-waited
	}
	p.ctl.Close()
	p.out.Close()
	p.errs.Close()
	m.mu.Lock()
	cancelled, timedOut, why := p.cancelled, p.timedOut, p.reason
	m.mu.Unlock()
	o := outcome{stdout: p.out.Tail(), stderr: p.errs.Tail(), outTrunc: p.out.Truncated(), errTrn: p.errs.Truncated(),
		status: -1, format: format}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	var ee *exec.ExitError
	switch {
	case cancelled:
		o.state, o.reason = Cancelled, why
	case timedOut:
		o.state, o.reason, o.signal = Failed, fmt.Sprintf("timeout after %v (the task's process tree was ended)", timeout), "SIGKILL"
	case err == nil:
		o.state, o.status = Exited, 0
	case errors.As(err, &ee) && ws.Signaled():
		o.state, o.signal, o.reason = Failed, ws.Signal().String(), "killed by signal "+ws.Signal().String()
	case errors.As(err, &ee):
		o.state, o.status, o.reason = Failed, ws.ExitStatus(), fmt.Sprintf("exit status %d", ws.ExitStatus())
	default:
		o.state, o.reason = Failed, err.Error()
	}
	if ws.Exited() {
		o.status = ws.ExitStatus()
	}
	m.finish(context.Background(), id, jobID, o)
	m.release(id)
	close(p.done)
	m.changed()
}

// stop asks the shim to end the command's tree and waits for the shim to
// exit; one that does not in time is killed through its os.Process, which
// signals by pidfd and refuses once the shim was waited for, so the kill
// can never reach a process that got its pid after it was reaped.
func (m *Manager) stop(p *proc) {
	if p.ctl == nil {
		return
	}
	_, _ = p.ctl.Write([]byte{gateStop})
	select {
	case <-p.exited:
	case <-time.After(shimGrace + 3*time.Second):
		_ = p.cmd.Process.Kill()
	}
}

// finish records the task's end and ends its job in one transaction: exit
// 0 completes the job, a cancel cancels it, anything else fails it. The
// result artifact is staged first (outside the transaction).
func (m *Manager) finish(ctx context.Context, id, jobID string, o outcome) {
	var dir string
	_ = m.Store.DB.QueryRowContext(ctx, `SELECT spool_dir FROM tasks WHERE task_id = ?`, id).Scan(&dir)
	text, to := m.jobText(id, dir, o)
	staged := m.stageResult(id, jobID, dir, o)
	now := store.TS(m.Store.Now())
	err := delivery.Run(ctx, m.Store, m.Cfg, m.Actor, func(op *delivery.Op) error {
		res, err := op.Tx.ExecContext(ctx, `UPDATE tasks SET state = ?, exit_status = ?, signal = ?, reason = ?,
			ended_at = ?, updated_at = ?, stdout_tail = ?, stderr_tail = ?, stdout_truncated = ?, stderr_truncated = ?
			WHERE task_id = ? AND state IN ('starting','running')`, o.state, nullInt(o.status), nullStr(o.signal),
			nullStr(o.reason), now, now, o.stdout, o.stderr, o.outTrunc, o.errTrn, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errAlreadyEnded
		}
		if err := op.Audit(audit.Entry{Action: "task.end", EntityKind: "task", EntityID: id, To: string(o.state),
			Reason: o.reason, Outcome: "ok", Detail: map[string]any{"exit_status": o.status, "job_id": jobID}}); err != nil {
			return err
		}
		if o.state == Cancelled {
			err := m.Jobs.CancelOp(op, jobID, o.reason)
			if abi.CodeOf(err) == abi.EEXIST || abi.CodeOf(err) == abi.EBUSY {
				return nil // the job already ended its own way
			}
			return err
		}
		ok, st, err := m.Jobs.FinishOp(op, jobs.Finishing{JobID: jobID, To: to, Reason: text.reason, Text: text.text,
			Staged: staged})
		if err == nil && !ok {
			err = op.Audit(audit.Entry{Action: "task.job_left_alone", EntityKind: "job", EntityID: jobID,
				Reason: "the job was already " + string(st), Outcome: "ok"})
		}
		return err
	})
	if err != nil {
		if staged != nil {
			staged.Discard()
		}
		if !errors.Is(err, errAlreadyEnded) && m.Log != nil {
			m.Log.Printf("task %s: record end: %v", id, err)
		}
	}
}

var errAlreadyEnded = errors.New("task already ended")

type jobText struct{ text, reason string }

// jobText is the job's summary (completed) or failure reason (failed).
// For the canonical event stream the summary is the final assistant
// message, and a done with an error status or an error frame fails the
// job with its code and message, whatever the exit status.
func (m *Manager) jobText(id, dir string, o outcome) (jobText, jobs.Status) {
	if o.format == FormatEvents && o.state != Cancelled {
		s := ParseEventStream(filepath.Join(dir, "stdout"), o.stdout, o.outTrunc)
		switch {
		case s.Failed():
			why := clip(s.FailureText(), 4000)
			return jobText{text: why, reason: why}, jobs.Failed
		case o.state == Exited && s.Done:
			return jobText{text: clip(orDefault(s.Final, "(the run ended without an assistant message)"), 4000),
				reason: "complete"}, jobs.Ready
		}
	}
	if o.state == Exited {
		return jobText{text: clip(fmt.Sprintf("exit status %d; stdout tail: %s", o.status, o.stdout), 2000),
			reason: "complete"}, jobs.Ready
	}
	reason := clip(fmt.Sprintf("%s; stdout tail: %s; stderr tail: %s", o.reason, o.stdout, o.stderr), 4000)
	return jobText{text: reason, reason: reason}, jobs.Failed
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// stageResult stages the task's result artifact: the full event stream
// for an events task, else a text summary with the output tails.
func (m *Manager) stageResult(id, jobID, dir string, o outcome) *artifacts.Staged {
	if dir == "" || o.state == Cancelled {
		return nil
	}
	name := filepath.Join(dir, "result.txt")
	if o.format == FormatEvents {
		name = filepath.Join(dir, "stdout")
	} else {
		body := fmt.Sprintf("task %s\nexit_status: %d\nsignal: %s\nreason: %s\n--- stdout (tail) ---\n%s\n--- stderr (tail) ---\n%s\n",
			id, o.status, o.signal, o.reason, o.stdout, o.stderr)
		if err := atomicfile.WriteFile(name, []byte(body), 0o600); err != nil {
			return nil
		}
	}
	f, err := os.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	display := "result.txt"
	if o.format == FormatEvents {
		display = "events.jsonl"
	}
	staged, err := m.Jobs.Stage(jobID, display, f)
	if err != nil && m.Log != nil {
		m.Log.Printf("task %s: stage result: %v", id, err)
	}
	return staged
}

// clip keeps the last n bytes of s, starting on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

func nullInt(n int) any {
	if n < 0 {
		return nil
	}
	return n
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Cancel ends a running task's process tree; the supervisor records the
// end and cancels the job.
func (m *Manager) Cancel(ctx context.Context, actor audit.Actor, id string) (*Task, error) {
	return m.cancel(ctx, actor, id, "cancelled by operator (the task's process tree was ended)")
}

func (m *Manager) cancel(ctx context.Context, actor audit.Actor, id, why string) (*Task, error) {
	m.mu.Lock()
	p := m.live[id]
	if p != nil {
		p.cancelled, p.reason = true, why
	}
	m.mu.Unlock()
	if p == nil {
		t, err := m.Inspect(ctx, id)
		if err != nil {
			return nil, err
		}
		return nil, abi.Errorf(abi.EEXIST, "task %s is %s, not running", id, t.State)
	}
	_ = m.Store.Tx(ctx, func(tx *sqlTx) error {
		return audit.Write(ctx, tx, store.TS(m.Store.Now()), actor, audit.Entry{Action: "task.cancel", EntityKind: "task",
			EntityID: id, Outcome: "ok", Reason: why, Detail: map[string]any{"pid": p.pid}})
	})
	m.stop(p)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		return nil, abi.Errorf(abi.ETIMEDOUT, "task %s did not end within 30s of its cancel", id)
	}
	return m.Inspect(ctx, id)
}

// CancelAll runs when the daemon stops: no task outlives its supervision,
// each is cancelled (its job with it) and no new one starts.
func (m *Manager) CancelAll(ctx context.Context, why string) int {
	m.mu.Lock()
	m.closing = true
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, err := m.cancel(ctx, m.Actor, id, why); err == nil {
			n++
		}
	}
	return n
}
