// Package tasks supervises commands the daemon runs for `cbth task run`:
// each in its own process group, output spooled under
// $CBTH_HOME/tasks/<id>/ with size caps and tails, and on exit the task's
// job is completed (exit 0) or failed (non-zero, timeout, killed).
package tasks

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// Prefix of task ids.
const Prefix = "task_"

// State of a task.
type State string

const (
	Starting  State = "starting"
	Running   State = "running"
	Exited    State = "exited"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// Manager runs and tracks tasks for one daemon instance.
type Manager struct {
	Store    *store.Store
	Jobs     *jobs.Service
	Cfg      config.Config
	Dir      string
	Instance string
	Actor    audit.Actor
	Log      *log.Logger
	OnChange func()

	mu   sync.Mutex
	live map[string]*proc
	wg   sync.WaitGroup
}

type proc struct {
	pid       int
	cancelled bool
	done      chan struct{}
}

// RunRequest is `cbth task run`.
type RunRequest struct {
	SourceThreadID string           `json:"source_thread_id"`
	Summary        string           `json:"summary"`
	Target         string           `json:"target,omitempty"`
	Policy         jobs.PolicyInput `json:"delivery_policy"`
	Cwd            string           `json:"cwd,omitempty"`
	TimeoutSeconds int64            `json:"timeout_seconds,omitempty"`
	Argv           []string         `json:"argv"`
	Env            []string         `json:"env,omitempty"`
}

// Task is a task row as list/inspect show it.
type Task struct {
	TaskID         string   `json:"task_id"`
	JobID          string   `json:"job_id"`
	SourceThreadID string   `json:"source_thread_id"`
	Argv           []string `json:"argv"`
	Cwd            string   `json:"cwd"`
	State          State    `json:"state"`
	PID            *int64   `json:"pid"`
	ExitStatus     *int64   `json:"exit_status"`
	Signal         *string  `json:"signal"`
	Reason         *string  `json:"reason"`
	TimeoutSeconds *int64   `json:"timeout_seconds"`
	SpoolDir       string   `json:"spool_dir"`
	CreatedAt      string   `json:"created_at"`
	StartedAt      *string  `json:"started_at"`
	EndedAt        *string  `json:"ended_at"`
	StdoutTail     string   `json:"stdout_tail,omitempty"`
	StderrTail     string   `json:"stderr_tail,omitempty"`
	JobStatus      string   `json:"job_status,omitempty"`
}

func (m *Manager) changed() {
	if m.OnChange != nil {
		m.OnChange()
	}
}

// Running is the number of supervised processes still alive.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// Wait waits up to d for supervisors to finish recording.
func (m *Manager) Wait(d time.Duration) {
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

func (r *RunRequest) validate() error {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return abi.Errorf(abi.EINVAL, "task run needs a command after --")
	}
	if r.TimeoutSeconds < 0 {
		return abi.Errorf(abi.EINVAL, "--timeout-seconds must not be negative")
	}
	if r.Cwd != "" && !filepath.IsAbs(r.Cwd) {
		return abi.Errorf(abi.EINVAL, "--cwd must be absolute")
	}
	if r.Target == "" {
		r.Target = "cli"
	}
	return nil
}

// Run submits the task's job, records the task and starts the command. It
// returns at once; the supervisor finishes the job when the command ends.
func (m *Manager) Run(ctx context.Context, actor audit.Actor, r RunRequest) (*Task, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if r.Cwd != "" {
		if fi, err := os.Stat(r.Cwd); err != nil || !fi.IsDir() {
			return nil, abi.Errorf(abi.EINVAL, "--cwd %s is not a directory", r.Cwd)
		}
	}
	id := ids.New(Prefix)
	job, err := m.Jobs.Submit(ctx, actor, jobs.SubmitRequest{TargetKind: r.Target, SourceThreadID: r.SourceThreadID,
		TaskKind: "task", Summary: r.Summary, Policy: r.Policy, TaskID: id})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(m.Dir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, abi.Errorf(abi.EIO, "task dir: %v", err)
	}
	argv, _ := json.Marshal(r.Argv)
	now := store.TS(m.Store.Now())
	err = m.Store.Tx(ctx, func(tx *sqlTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tasks(task_id, job_id, source_thread_id, argv_json, cwd, state,
			timeout_seconds, spool_dir, daemon_instance, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
			id, job.JobID, r.SourceThreadID, string(argv), r.Cwd, Starting, r.TimeoutSeconds, dir, m.Instance, now, now); err != nil {
			return err
		}
		return audit.Write(ctx, tx, now, actor, audit.Entry{Action: "task.run", EntityKind: "task", EntityID: id,
			SourceThreadID: r.SourceThreadID, To: string(Starting), Outcome: "ok", Detail: map[string]any{"job_id": job.JobID, "argv": r.Argv}})
	})
	if err != nil {
		return nil, err
	}
	if err := m.start(id, job.JobID, dir, r); err != nil {
		m.finish(context.Background(), id, job.JobID, outcome{state: Failed, reason: "cannot start: " + err.Error(), status: -1})
		return m.Inspect(ctx, id)
	}
	return m.Inspect(ctx, id)
}
