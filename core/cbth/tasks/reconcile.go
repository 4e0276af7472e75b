package tasks

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Reasons recovery records.
const (
	reasonNeverStarted   = "daemon stopped before the command was started; it never ran"
	reasonSupervisorGone = "daemon restarted; the task's supervisor ended it when the daemon went away " +
		"(exit status unknown)"
	reasonKilled = "daemon restarted while the task ran; its supervisor was ended (supervision lost)"
)

type orphan struct {
	id, job, state string
	ident          Identity
	hasPID         bool
}

// Reconcile runs at daemon start, before the socket exists. Every task a
// previous daemon left starting or running fails with its job, in one
// transaction each. A supervisor is signalled only when its pid still
// names the very process recorded (same boot, same start time): a pid
// reused by an unrelated process is never touched. Job rows left running
// for a task that ended, or for a task row that never got written, are
// reconciled too.
func (m *Manager) Reconcile(ctx context.Context) error {
	rows, err := m.Store.DB.QueryContext(ctx, `SELECT task_id, job_id, state, pid, pid_start_time, COALESCE(boot_id,'')
		FROM tasks WHERE state IN ('starting','running') AND COALESCE(daemon_instance,'') != ?`, m.Instance)
	if err != nil {
		return err
	}
	var list []orphan
	for rows.Next() {
		var o orphan
		var pid, start sql.NullInt64
		if err := rows.Scan(&o.id, &o.job, &o.state, &pid, &start, &o.ident.BootID); err != nil {
			rows.Close()
			return err
		}
		o.hasPID = pid.Valid && pid.Int64 > 0 && start.Valid
		o.ident.PID, o.ident.StartTime = int(pid.Int64), uint64(start.Int64)
		list = append(list, o)
	}
	rows.Close()
	for _, o := range list {
		reason := reasonNeverStarted
		if o.hasPID {
			reason = reasonSupervisorGone
			if o.ident.Alive() {
				endSupervisor(o.ident)
				reason = reasonKilled
			}
		}
		dir := filepath.Join(m.Dir, o.id)
		out, outTrunc := m.fileTail(filepath.Join(dir, "stdout"))
		errs, errTrunc := m.fileTail(filepath.Join(dir, "stderr"))
		m.finish(ctx, o.id, o.job, outcome{state: Failed, status: -1, reason: reason, stdout: out, stderr: errs,
			outTrunc: outTrunc, errTrn: errTrunc, format: FormatText})
	}
	return m.reconcileJobs(ctx)
}

// endSupervisor ends a proven shim: SIGTERM lets it end its command's
// tree; if it is still the same process after the grace, its group (whose
// number its live leader proves ours) is killed.
func endSupervisor(id Identity) {
	_ = syscall.Kill(id.PID, syscall.SIGTERM)
	deadline := time.Now().Add(shimGrace + 3*time.Second)
	for time.Now().Before(deadline) {
		if !id.Alive() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if id.Alive() {
		_ = syscall.Kill(-id.PID, syscall.SIGKILL)
	}
}

func (m *Manager) fileTail(path string) (string, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	return readTail(path, m.Cfg.TaskTailBytes), fi.Size() >= m.Cfg.TaskSpoolMaxBytes
}

// reconcileJobs repairs pairings a crash of an older daemon could leave:
// a running job whose task ended (the job follows the task) or whose task
// row does not exist (the job fails).
func (m *Manager) reconcileJobs(ctx context.Context) error {
	rows, err := m.Store.DB.QueryContext(ctx, `SELECT j.job_id, COALESCE(t.task_id,''), COALESCE(t.state,''),
		COALESCE(t.reason,''), COALESCE(t.exit_status, -1) FROM jobs j LEFT JOIN tasks t ON t.task_id = j.task_id
		WHERE j.status = 'running' AND j.task_id IS NOT NULL AND (t.task_id IS NULL OR t.state NOT IN ('starting','running'))`)
	if err != nil {
		return err
	}
	type pair struct {
		job, task, state, reason string
		status                   int
	}
	var list []pair
	for rows.Next() {
		var p pair
		if err := rows.Scan(&p.job, &p.task, &p.state, &p.reason, &p.status); err != nil {
			rows.Close()
			return err
		}
		list = append(list, p)
	}
	rows.Close()
	for _, p := range list {
		err := delivery.Run(ctx, m.Store, m.Cfg, m.Actor, func(o *delivery.Op) error {
			var err error
			switch State(p.state) {
			case Cancelled:
				err = m.Jobs.CancelOp(o, p.job, "its task was cancelled")
			case Exited:
				_, _, err = m.Jobs.FinishOp(o, jobs.Finishing{JobID: p.job, To: jobs.Ready, Reason: "complete",
					Text: "exit status 0 (recovered after a daemon restart; output in the task's spool)"})
			default:
				why := "its task row was never recorded (daemon restarted)"
				if p.task != "" {
					why = "its task ended " + p.state + ": " + p.reason
				}
				_, _, err = m.Jobs.FinishOp(o, jobs.Finishing{JobID: p.job, To: jobs.Failed, Reason: why, Text: why})
			}
			if err != nil {
				return err
			}
			return o.Audit(audit.Entry{Action: "task.reconcile_job", EntityKind: "job", EntityID: p.job,
				Reason: "job/task pairing repaired at start", Outcome: "ok", Detail: map[string]any{"task_id": p.task}})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// orphanGrace is how old a spool directory without a task row must be
// before it is removed (a live Run records its row within milliseconds).
const orphanGrace = time.Hour

// Collect removes the spools of tasks that ended more than [tasks]
// spool_ttl ago (their results live on as artifacts) and spool directories
// no task row claims.
func (m *Manager) Collect(ctx context.Context) (int, error) {
	until := store.TS(m.Store.Now().Add(-m.Cfg.TaskSpoolTTL))
	rows, err := m.Store.DB.QueryContext(ctx, `SELECT task_id, spool_dir FROM tasks WHERE spool_collected_at IS NULL
		AND ended_at IS NOT NULL AND ended_at <= ? ORDER BY ended_at LIMIT 500`, until)
	if err != nil {
		return 0, err
	}
	type spoolRow struct{ id, dir string }
	var due []spoolRow
	for rows.Next() {
		var r spoolRow
		if err := rows.Scan(&r.id, &r.dir); err != nil {
			rows.Close()
			return 0, err
		}
		due = append(due, r)
	}
	rows.Close()
	n := 0
	for _, r := range due {
		// Only ever a direct child of the tasks directory.
		if filepath.Dir(r.dir) == filepath.Clean(m.Dir) && strings.HasPrefix(filepath.Base(r.dir), Prefix) {
			if err := os.RemoveAll(r.dir); err != nil {
				continue
			}
		}
		err := m.Store.Tx(ctx, func(tx *sqlTx) error {
			at := store.TS(m.Store.Now())
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET spool_collected_at = ?, updated_at = ? WHERE task_id = ?`,
				at, at, r.id); err != nil {
				return err
			}
			return audit.Write(ctx, tx, at, m.Actor, audit.Entry{Action: "task.spool_collected", EntityKind: "task",
				EntityID: r.id, Reason: "spool_ttl passed", Outcome: "ok"})
		})
		if err != nil {
			return n, err
		}
		n++
	}
	return n + m.collectOrphans(ctx), nil
}

func (m *Manager) collectOrphans(ctx context.Context) int {
	ents, err := os.ReadDir(m.Dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), Prefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < orphanGrace {
			continue
		}
		var x int
		err = m.Store.DB.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE task_id = ?`, e.Name()).Scan(&x)
		if store.IsNoRows(err) && os.RemoveAll(filepath.Join(m.Dir, e.Name())) == nil {
			n++
		}
	}
	return n
}
