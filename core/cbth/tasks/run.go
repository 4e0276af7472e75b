package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
	procfs "github.com/cortexfs/cortexfs/core/proc"
)

type sqlTx = sql.Tx

// proc is one supervised task: its shim, the control pipe's write end and
// the spools of its output.
type proc struct {
	pid       int
	ctl       *os.File
	cmd       *exec.Cmd
	out, errs *spool
	cancelled bool
	timedOut  bool
	reason    string
	done      chan struct{} // closed once the end is recorded
	exited    chan struct{} // closed once the shim is waited for (reaped)
}

// reserve takes a slot under the running cap before anything is written.
func (m *Manager) reserve(id string, r *RunRequest) (*proc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return nil, abi.Errorf(abi.EBUSY, "the cbth daemon is stopping; run the task again")
	}
	if err := r.validate(m.Cfg.TaskMaxRunning, len(m.live)); err != nil {
		return nil, err
	}
	if m.live == nil {
		m.live = map[string]*proc{}
	}
	p := &proc{done: make(chan struct{}), exited: make(chan struct{})}
	m.live[id] = p
	return p, nil
}

func (m *Manager) release(id string) {
	m.mu.Lock()
	delete(m.live, id)
	m.mu.Unlock()
}

// Run records the job and the task in one transaction, then starts the
// command behind its shim. It returns at once; the supervisor finishes
// the task and its job together when the command ends.
func (m *Manager) Run(ctx context.Context, actor audit.Actor, r RunRequest) (*Task, error) {
	id := ids.New(Prefix)
	p, err := m.reserve(id, &r)
	if err != nil {
		return nil, err
	}
	prep, err := m.Jobs.Prepare(jobs.SubmitRequest{TargetKind: r.Target, SourceThreadID: r.SourceThreadID,
		TaskKind: "task", Summary: r.Summary, Policy: r.Policy, TaskID: id})
	if err != nil {
		m.release(id)
		return nil, err
	}
	dir := filepath.Join(m.Dir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		m.release(id)
		return nil, abi.Errorf(abi.EIO, "task dir: %v", err)
	}
	argv := display(r.Argv)
	argvJSON, _ := json.Marshal(argv)
	var jobID string
	err = delivery.Run(ctx, m.Store, m.Cfg, actor, func(o *delivery.Op) (err error) {
		if jobID, _, err = prep.Insert(o); err != nil {
			return err
		}
		if _, err := o.Tx.ExecContext(ctx, `INSERT INTO tasks(task_id, job_id, source_thread_id, argv_json, cwd, state,
			timeout_seconds, spool_dir, daemon_instance, output_format, created_at, updated_at)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`, id, jobID, r.SourceThreadID, string(argvJSON), string(r.Cwd), Starting,
			r.TimeoutSeconds, dir, m.Instance, r.Format, o.At(), o.At()); err != nil {
			return err
		}
		return o.Audit(audit.Entry{Action: "task.run", EntityKind: "task", EntityID: id, SourceThreadID: r.SourceThreadID,
			To: string(Starting), Outcome: "ok", Detail: map[string]any{"job_id": jobID, "argv": argv,
				"output_format": r.Format}})
	})
	if err != nil {
		m.release(id)
		os.RemoveAll(dir)
		return nil, err
	}
	if err := m.start(p, id, dir, r); err != nil {
		m.release(id)
		m.finish(context.Background(), id, jobID, outcome{state: Failed, status: -1, reason: "cannot start: " + err.Error(),
			format: r.Format})
		close(p.done)
		m.changed()
		return m.Inspect(ctx, id)
	}
	m.wg.Add(1)
	go m.supervise(id, jobID, p, r.Format, time.Duration(r.TimeoutSeconds)*time.Second)
	return m.Inspect(ctx, id)
}

// start launches the shim (its own session, the client's environment and
// working directory, output spooled), records its identity durably and
// only then lets the command run.
func (m *Manager) start(p *proc, id, dir string, r RunRequest) error {
	var err error
	if p.out, err = newSpool(filepath.Join(dir, "stdout"), m.Cfg.TaskSpoolMaxBytes, int(m.Cfg.TaskTailBytes)); err != nil {
		return err
	}
	if p.errs, err = newSpool(filepath.Join(dir, "stderr"), m.Cfg.TaskSpoolMaxBytes, int(m.Cfg.TaskTailBytes)); err != nil {
		p.out.Close()
		return err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		p.out.Close()
		p.errs.Close()
		return err
	}
	args := append([]string{"cbth"}, ShimArgs...)
	for _, a := range r.Argv {
		args = append(args, string(a))
	}
	env := make([]string, len(r.Env))
	for i, e := range r.Env {
		env[i] = string(e)
	}
	self := m.Self
	if self == "" {
		self = "/proc/self/exe"
	}
	cmd := &exec.Cmd{Path: self, Args: args, Env: env, Dir: string(r.Cwd), Stdout: p.out, Stderr: p.errs,
		ExtraFiles: []*os.File{ctlR}, SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		// Output pipes held by a stray descendant must not hold the
		// supervisor forever.
		WaitDelay: 5 * time.Second}
	err = cmd.Start()
	ctlR.Close()
	if err != nil {
		ctlW.Close()
		p.out.Close()
		p.errs.Close()
		return err
	}
	p.pid, p.ctl, p.cmd = cmd.Process.Pid, ctlW, cmd
	st, err := procfs.ReadStat(p.pid)
	if err == nil {
		err = m.recordStart(id, Identity{PID: p.pid, StartTime: st.StartTime, BootID: procfs.BootID()})
	}
	if err != nil {
		// The shim sees EOF on its control pipe and exits without running
		// the command.
		ctlW.Close()
		_ = cmd.Wait()
		close(p.exited)
		p.out.Close()
		p.errs.Close()
		return fmt.Errorf("cannot record the supervisor's identity: %w", err)
	}
	m.mu.Lock()
	cancelled := p.cancelled
	m.mu.Unlock()
	gate := byte(gateGo)
	if cancelled {
		gate = gateStop // cancelled while starting: the command never runs
	}
	if _, err := ctlW.Write([]byte{gate}); err != nil {
		ctlW.Close()
		_ = cmd.Wait()
		close(p.exited)
		p.out.Close()
		p.errs.Close()
		return fmt.Errorf("cannot release the command: %w", err)
	}
	return nil
}

// recordStart moves the task starting -> running with the identity of its
// supervisor, in one transaction with its audit row.
func (m *Manager) recordStart(id string, ident Identity) error {
	return m.Store.Tx(context.Background(), func(tx *sqlTx) error {
		now := store.TS(m.Store.Now())
		res, err := tx.Exec(`UPDATE tasks SET state = ?, pid = ?, pid_start_time = ?, boot_id = ?, started_at = ?,
			updated_at = ? WHERE task_id = ? AND state = ?`, Running, ident.PID, int64(ident.StartTime), ident.BootID,
			now, now, id, Starting)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return abi.Errorf(abi.EEXIST, "task %s left starting concurrently", id)
		}
		return audit.Write(context.Background(), tx, now, m.Actor, audit.Entry{Action: "task.start", EntityKind: "task",
			EntityID: id, From: string(Starting), To: string(Running), Outcome: "ok",
			Detail: map[string]any{"pid": ident.PID, "pid_start_time": ident.StartTime, "boot_id": ident.BootID}})
	})
}
