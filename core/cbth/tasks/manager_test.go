package tasks

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"

	procfs "github.com/cortexfs/cortexfs/core/proc"
)

func newManager(t *testing.T) *Manager {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(context.Background(), filepath.Join(dir, "cbth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, d := range []string{"artifacts", "tasks"} {
		os.Mkdir(filepath.Join(dir, d), 0o700)
	}
	cfg := config.Default()
	js := &jobs.Service{Store: s, Cfg: cfg, ArtifactsDir: filepath.Join(dir, "artifacts")}
	return &Manager{Store: s, Jobs: js, Cfg: cfg, Dir: filepath.Join(dir, "tasks"), Instance: "test",
		Actor: audit.Actor{Name: "task"}}
}

// insert records a job and its task row in one transaction, as Run does.
func (m *Manager) insert(t *testing.T, id string, state State) string {
	t.Helper()
	p, err := m.Jobs.Prepare(jobs.SubmitRequest{TargetKind: "cli", SourceThreadID: "T", TaskKind: "task", Summary: "s", TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	var job string
	err = delivery.Run(context.Background(), m.Store, m.Cfg, m.Actor, func(o *delivery.Op) (err error) {
		if job, _, err = p.Insert(o); err != nil {
			return err
		}
		_, err = o.Tx.Exec(`INSERT INTO tasks(task_id, job_id, source_thread_id, argv_json, cwd, state, spool_dir,
			daemon_instance, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)`, id, job, "T", `["x"]`, "/",
			state, filepath.Join(m.Dir, id), "old", o.At(), o.At())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// The start CAS (starting -> running with the identity) is stale on a task
// that left starting, and changes nothing.
func TestRecordStartStale(t *testing.T) {
	m := newManager(t)
	m.insert(t, "task_a", Running)
	err := m.recordStart("task_a", Identity{PID: 42, StartTime: 7, BootID: "b"})
	if abi.CodeOf(err) != abi.EEXIST {
		t.Fatalf("recordStart on a running task: %v", err)
	}
	tk, err := m.Inspect(context.Background(), "task_a")
	if err != nil || tk.PID != nil {
		t.Fatalf("stale start changed the row: %+v %v", tk, err)
	}
}

// The end CAS is a no-op on a task already ended: its job is not touched.
func TestFinishStale(t *testing.T) {
	m := newManager(t)
	job := m.insert(t, "task_b", Exited)
	m.finish(context.Background(), "task_b", job, outcome{state: Failed, status: -1, reason: "late", format: FormatText})
	j, err := jobs.Get(context.Background(), m.Store.DB, job)
	if err != nil || j.Status != jobs.Running {
		t.Fatalf("a stale end changed the job: %+v %v", j, err)
	}
}

// Recovery ends both halves of every pairing a dead daemon left, and never
// signals a recorded pid that now names another process.
func TestReconcileNeverSignalsStrangers(t *testing.T) {
	m := newManager(t)
	never := m.insert(t, "task_c", Starting)
	gone := m.insert(t, "task_d", Running)
	// task_d's recorded identity is this test process's pid with another
	// start time: a reused pid. Signalling it would kill the test.
	self, _ := procfs.ReadStat(os.Getpid())
	m.Store.DB.Exec(`UPDATE tasks SET pid = ?, pid_start_time = ?, boot_id = ? WHERE task_id = 'task_d'`,
		os.Getpid(), int64(self.StartTime)+1, procfs.BootID())
	if err := m.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id, job := range map[string]string{"task_c": never, "task_d": gone} {
		tk, _ := m.Inspect(context.Background(), id)
		j, _ := jobs.Get(context.Background(), m.Store.DB, job)
		if tk.State != Failed || j.Status != jobs.Failed {
			t.Errorf("%s after recovery: task %s job %s", id, tk.State, j.Status)
		}
	}
	tk, _ := m.Inspect(context.Background(), "task_c")
	if tk.Reason == nil || *tk.Reason != reasonNeverStarted {
		t.Errorf("never-started reason %v", tk.Reason)
	}
}
