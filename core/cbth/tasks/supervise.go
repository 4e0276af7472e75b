package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

type sqlTx = sql.Tx

type outcome struct {
	state  State
	status int
	signal string
	reason string
	stdout string
	stderr string
}

// start launches the command in its own process group with stdin from
// /dev/null and stdout/stderr spooled under dir.
func (m *Manager) start(id, jobID, dir string, r RunRequest) error {
	out, err := newSpool(filepath.Join(dir, "stdout"), m.Cfg.TaskSpoolMaxBytes, int(m.Cfg.TaskTailBytes))
	if err != nil {
		return err
	}
	errs, err := newSpool(filepath.Join(dir, "stderr"), m.Cfg.TaskSpoolMaxBytes, int(m.Cfg.TaskTailBytes))
	if err != nil {
		out.Close()
		return err
	}
	cmd := exec.Command(r.Argv[0], r.Argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = r.Cwd, out, errs
	cmd.Env = append(os.Environ(), r.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		errs.Close()
		return err
	}
	p := &proc{pid: cmd.Process.Pid, done: make(chan struct{})}
	m.mu.Lock()
	if m.live == nil {
		m.live = map[string]*proc{}
	}
	m.live[id] = p
	m.mu.Unlock()
	m.wg.Add(1)
	now := store.TS(m.Store.Now())
	_ = m.Store.Tx(context.Background(), func(tx *sqlTx) error {
		_, err := tx.Exec(`UPDATE tasks SET state = ?, pid = ?, started_at = ?, updated_at = ? WHERE task_id = ?`,
			Running, p.pid, now, now, id)
		return err
	})
	go m.supervise(id, jobID, cmd, p, out, errs, time.Duration(r.TimeoutSeconds)*time.Second)
	return nil
}

func (m *Manager) supervise(id, jobID string, cmd *exec.Cmd, p *proc, out, errs *spool, timeout time.Duration) {
	defer m.wg.Done()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	timedOut := false
	var err error
	select {
	case err = <-waited:
	case <-timer:
		timedOut = true
		syscall.Kill(-p.pid, syscall.SIGKILL)
		err = <-waited
	}
	// The leader is gone; make sure nothing of its group outlives it.
	syscall.Kill(-p.pid, syscall.SIGKILL)
	out.Close()
	errs.Close()
	m.mu.Lock()
	cancelled := p.cancelled
	delete(m.live, id)
	m.mu.Unlock()
	close(p.done)
	o := outcome{stdout: out.Tail(), stderr: errs.Tail(), status: -1}
	var ee *exec.ExitError
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case cancelled:
		o.state, o.reason = Cancelled, "cancelled by operator (process group killed)"
	case timedOut:
		o.state, o.reason, o.signal = Failed, fmt.Sprintf("timeout after %v (process group killed)", timeout), "SIGKILL"
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
	m.changed()
}

// finish records the task's end and completes, fails or cancels its job
// with the output tails and exit status as the result artifact.
func (m *Manager) finish(ctx context.Context, id, jobID string, o outcome) {
	var dir string
	_ = m.Store.DB.QueryRowContext(ctx, `SELECT spool_dir FROM tasks WHERE task_id = ?`, id).Scan(&dir)
	result := filepath.Join(dir, "result.txt")
	body := fmt.Sprintf("task %s\nexit_status: %d\nsignal: %s\nreason: %s\n--- stdout (tail) ---\n%s\n--- stderr (tail) ---\n%s\n",
		id, o.status, o.signal, o.reason, o.stdout, o.stderr)
	if err := atomicfile.WriteFile(result, []byte(body), 0o600); err != nil {
		result = ""
	}
	now := store.TS(m.Store.Now())
	err := m.Store.Tx(ctx, func(tx *sqlTx) error {
		_, err := tx.ExecContext(ctx, `UPDATE tasks SET state = ?, exit_status = ?, signal = ?, reason = ?, ended_at = ?,
			updated_at = ? WHERE task_id = ? AND state IN ('starting','running')`, o.state, nullInt(o.status), nullStr(o.signal),
			nullStr(o.reason), now, now, id)
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, now, m.Actor, audit.Entry{Action: "task.end", EntityKind: "task", EntityID: id,
			To: string(o.state), Reason: o.reason, Outcome: "ok", Detail: map[string]any{"exit_status": o.status, "job_id": jobID}})
	})
	if err != nil && m.Log != nil {
		m.Log.Printf("task %s: record end: %v", id, err)
	}
	summary := clip(fmt.Sprintf("exit status %d; stdout tail: %s", o.status, o.stdout), 2000)
	var rf *os.File
	if result != "" {
		if rf, err = os.Open(result); err != nil {
			result, rf = "", nil
		} else {
			defer rf.Close()
		}
	}
	switch o.state {
	case Exited:
		_, err = m.Jobs.Complete(ctx, m.Actor, jobs.CompleteRequest{JobID: jobID, Summary: summary, ResultFile: result, Result: rf})
	case Cancelled:
		_, err = m.Jobs.Cancel(ctx, m.Actor, jobs.CancelRequest{JobID: jobID, Reason: o.reason})
	default:
		reason := clip(fmt.Sprintf("%s; stdout tail: %s; stderr tail: %s", o.reason, o.stdout, o.stderr), 4000)
		_, err = m.Jobs.Fail(ctx, m.Actor, jobs.FailRequest{JobID: jobID, Reason: reason, ResultFile: result, Result: rf})
	}
	if err != nil && m.Log != nil {
		m.Log.Printf("task %s: finish job %s: %v", id, jobID, err)
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
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

// Cancel kills the task's process group; the supervisor records the end
// and cancels the job.
func (m *Manager) Cancel(ctx context.Context, actor audit.Actor, id string) (*Task, error) {
	m.mu.Lock()
	p := m.live[id]
	if p != nil {
		p.cancelled = true
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
			EntityID: id, Outcome: "ok", Detail: map[string]any{"pgid": p.pid}})
	})
	syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		syscall.Kill(-p.pid, syscall.SIGKILL)
		<-p.done
	}
	return m.Inspect(ctx, id)
}

// Reconcile runs at daemon start: tasks a previous daemon left starting or
// running can no longer be supervised. A task whose process is gone fails
// at once; one still alive has its process group killed and then fails, so
// nothing runs untracked.
func (m *Manager) Reconcile(ctx context.Context) error {
	rows, err := m.Store.DB.QueryContext(ctx, `SELECT task_id, job_id, COALESCE(pid, 0) FROM tasks
		WHERE state IN ('starting','running') AND COALESCE(daemon_instance,'') != ?`, m.Instance)
	if err != nil {
		return err
	}
	type orphan struct {
		id, job string
		pid     int
	}
	var list []orphan
	for rows.Next() {
		var o orphan
		if err := rows.Scan(&o.id, &o.job, &o.pid); err != nil {
			rows.Close()
			return err
		}
		list = append(list, o)
	}
	rows.Close()
	for _, o := range list {
		reason := "daemon restarted and the task's process is gone; exit status unknown"
		if o.pid > 0 && syscall.Kill(o.pid, 0) == nil {
			syscall.Kill(-o.pid, syscall.SIGKILL)
			reason = "daemon restarted while the task ran; its process group was killed (supervision lost)"
		}
		dir := filepath.Join(m.Dir, o.id)
		m.finish(ctx, o.id, o.job, outcome{state: Failed, status: -1, reason: reason,
			stdout: readTail(filepath.Join(dir, "stdout"), m.Cfg.TaskTailBytes),
			stderr: readTail(filepath.Join(dir, "stderr"), m.Cfg.TaskTailBytes)})
	}
	return nil
}

const taskColumns = `t.task_id, t.job_id, t.source_thread_id, t.argv_json, t.cwd, t.state, t.pid, t.exit_status, t.signal,
	t.reason, t.timeout_seconds, t.spool_dir, t.created_at, t.started_at, t.ended_at, j.status`

func scanTask(row interface{ Scan(...any) error }) (*Task, error) {
	t := &Task{}
	var argv string
	err := row.Scan(&t.TaskID, &t.JobID, &t.SourceThreadID, &argv, &t.Cwd, &t.State, &t.PID, &t.ExitStatus, &t.Signal,
		&t.Reason, &t.TimeoutSeconds, &t.SpoolDir, &t.CreatedAt, &t.StartedAt, &t.EndedAt, &t.JobStatus)
	if err == nil {
		_ = json.Unmarshal([]byte(argv), &t.Argv)
	}
	return t, err
}

// Inspect loads a task with its output tails.
func (m *Manager) Inspect(ctx context.Context, id string) (*Task, error) {
	t, err := scanTask(m.Store.DB.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks t JOIN jobs j ON j.job_id = t.job_id
		WHERE t.task_id = ?`, id))
	if store.IsNoRows(err) {
		return nil, abi.Errorf(abi.ENOENT, "no task %q", id)
	}
	if err != nil {
		return nil, err
	}
	t.StdoutTail = readTail(filepath.Join(t.SpoolDir, "stdout"), m.Cfg.TaskTailBytes)
	t.StderrTail = readTail(filepath.Join(t.SpoolDir, "stderr"), m.Cfg.TaskTailBytes)
	return t, nil
}

// List returns tasks, newest first, optionally for one thread.
func (m *Manager) List(ctx context.Context, thread string, limit int) ([]*Task, error) {
	limit, err := audit.CheckLimit(limit)
	if err != nil {
		return nil, err
	}
	rows, err := m.Store.DB.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks t JOIN jobs j ON j.job_id = t.job_id
		WHERE (? = '' OR t.source_thread_id = ?) ORDER BY t.task_id DESC LIMIT ?`, thread, thread, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
