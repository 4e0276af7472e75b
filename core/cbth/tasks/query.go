package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

const taskColumns = `t.task_id, t.job_id, t.source_thread_id, t.argv_json, t.cwd, t.state, t.pid, t.pid_start_time,
	t.exit_status, t.signal, t.reason, t.timeout_seconds, t.output_format, t.spool_dir, t.spool_collected_at,
	t.created_at, t.started_at, t.ended_at, t.stdout_tail, t.stderr_tail, t.stdout_truncated, t.stderr_truncated,
	j.status`

func scanTask(row interface{ Scan(...any) error }) (*Task, error) {
	t := &Task{}
	var argv string
	var outTail, errTail sql.NullString
	err := row.Scan(&t.TaskID, &t.JobID, &t.SourceThreadID, &argv, &t.Cwd, &t.State, &t.PID, &t.PIDStartTime,
		&t.ExitStatus, &t.Signal, &t.Reason, &t.TimeoutSeconds, &t.OutputFormat, &t.SpoolDir, &t.SpoolCollected,
		&t.CreatedAt, &t.StartedAt, &t.EndedAt, &outTail, &errTail, &t.StdoutTruncated, &t.StderrTruncated, &t.JobStatus)
	if err == nil {
		_ = json.Unmarshal([]byte(argv), &t.Argv)
		t.StdoutTail, t.StderrTail = outTail.String, errTail.String
		t.tailsRecorded = outTail.Valid
	}
	return t, err
}

// Inspect loads a task with its output tails: live from the supervisor
// while it runs, as recorded at its end after (the spool file holds only
// the head of a capped stream, so its end is never the tail).
func (m *Manager) Inspect(ctx context.Context, id string) (*Task, error) {
	t, err := scanTask(m.Store.DB.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks t JOIN jobs j ON j.job_id = t.job_id
		WHERE t.task_id = ?`, id))
	if store.IsNoRows(err) {
		return nil, abi.Errorf(abi.ENOENT, "no task %q", id)
	}
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	p := m.live[id]
	m.mu.Unlock()
	switch {
	case p != nil && p.out != nil:
		t.StdoutTail, t.StderrTail = p.out.Tail(), p.errs.Tail()
		t.StdoutTruncated, t.StderrTruncated = p.out.Truncated(), p.errs.Truncated()
	case (t.EndedAt == nil || !t.tailsRecorded) && t.SpoolCollected == nil:
		t.StdoutTail = readTail(filepath.Join(t.SpoolDir, "stdout"), m.Cfg.TaskTailBytes)
		t.StderrTail = readTail(filepath.Join(t.SpoolDir, "stderr"), m.Cfg.TaskTailBytes)
	}
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
