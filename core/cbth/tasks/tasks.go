// Package tasks supervises commands the daemon runs for `cbth task run`.
// The job and the task row are created in one transaction; the command is
// started behind a supervisor (the task shim) whose pid and start time are
// durable before the command may run; output is spooled under
// $CBTH_HOME/tasks/<id>/ with caps and true tails; when the command ends,
// the task row and its job (completed, failed or cancelled) change in one
// transaction. A daemon restart reconciles every job/task pairing and
// signals only a process it can prove is its own.
package tasks

import (
	"bytes"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/inputs"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
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

// Output formats: plain text, or the canonical CortexFS event stream
// (JSONL frames of model-abi.md) whose final assistant message becomes the
// job's summary.
const (
	FormatText   = "text"
	FormatEvents = "events"
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
	// Self is the binary re-executed as the task shim (/proc/self/exe).
	Self string

	mu      sync.Mutex
	live    map[string]*proc
	closing bool
	wg      sync.WaitGroup
}

// RunRequest is `cbth task run`. Argv, the environment and the working
// directory are the requesting client's, byte for byte (base64 in JSON, so
// non-UTF-8 bytes survive).
type RunRequest struct {
	SourceThreadID string           `json:"source_thread_id"`
	Summary        string           `json:"summary"`
	Target         string           `json:"target,omitempty"`
	Policy         jobs.PolicyInput `json:"delivery_policy"`
	Cwd            []byte           `json:"cwd"`
	TimeoutSeconds int64            `json:"timeout_seconds,omitempty"`
	Argv           [][]byte         `json:"argv"`
	Env            [][]byte         `json:"env"`
	// Format is text (default) or events: the command speaks the canonical
	// event stream (an object run through the runner, or --jsonl-events).
	Format string `json:"output_format,omitempty"`
}

// Task is a task row as list/inspect show it.
type Task struct {
	TaskID          string   `json:"task_id"`
	JobID           string   `json:"job_id"`
	SourceThreadID  string   `json:"source_thread_id"`
	Argv            []string `json:"argv"`
	Cwd             string   `json:"cwd"`
	State           State    `json:"state"`
	PID             *int64   `json:"pid"`
	PIDStartTime    *int64   `json:"pid_start_time"`
	ExitStatus      *int64   `json:"exit_status"`
	Signal          *string  `json:"signal"`
	Reason          *string  `json:"reason"`
	TimeoutSeconds  *int64   `json:"timeout_seconds"`
	OutputFormat    string   `json:"output_format"`
	SpoolDir        string   `json:"spool_dir"`
	SpoolCollected  *string  `json:"spool_collected_at"`
	CreatedAt       string   `json:"created_at"`
	StartedAt       *string  `json:"started_at"`
	EndedAt         *string  `json:"ended_at"`
	StdoutTail      string   `json:"stdout_tail,omitempty"`
	StderrTail      string   `json:"stderr_tail,omitempty"`
	StdoutTruncated bool     `json:"stdout_truncated"`
	StderrTruncated bool     `json:"stderr_truncated"`
	JobStatus       string   `json:"job_status,omitempty"`

	tailsRecorded bool // a row written before tails were recorded has none
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

// MaxTimeoutSeconds bounds --timeout-seconds: a year.
const MaxTimeoutSeconds = 366 * 24 * 3600

func (r *RunRequest) validate(maxRunning int64, running int) error {
	if len(r.Argv) == 0 || len(r.Argv[0]) == 0 {
		return abi.Errorf(abi.EINVAL, "task run needs a command after --")
	}
	for _, a := range r.Argv {
		if bytes.IndexByte(a, 0) >= 0 {
			return abi.Errorf(abi.EINVAL, "an argument contains a NUL byte")
		}
	}
	for _, e := range r.Env {
		if bytes.IndexByte(e, 0) >= 0 || bytes.IndexByte(e, '=') <= 0 {
			return abi.Errorf(abi.EINVAL, "environment entry %q is not NAME=VALUE", clipBytes(e, 40))
		}
	}
	if r.TimeoutSeconds < 0 || r.TimeoutSeconds > MaxTimeoutSeconds {
		// Beyond the bound, N seconds overflows a time.Duration: a huge
		// timeout would wrap to a short one, or to none.
		return abi.Errorf(abi.EINVAL, "--timeout-seconds must be 0 (none) to %d (a year)", MaxTimeoutSeconds)
	}
	if len(r.Cwd) == 0 || !filepath.IsAbs(string(r.Cwd)) || bytes.IndexByte(r.Cwd, 0) >= 0 {
		return abi.Errorf(abi.EINVAL, "the working directory must be an absolute path")
	}
	switch r.Format {
	case "":
		r.Format = FormatText
	case FormatText, FormatEvents:
	default:
		return abi.Errorf(abi.EINVAL, "output format must be text or events, not %q", r.Format)
	}
	if r.Target == "" {
		r.Target = "cli"
	}
	if int64(running) >= maxRunning {
		return abi.Errorf(abi.EBUSY, "%d tasks already run under this daemon ([tasks] max_running = %d); "+
			"wait for one to end or cancel one", running, maxRunning)
	}
	return nil
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// display renders argv for humans and JSON: exact when valid UTF-8.
func display(argv [][]byte) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if utf8.Valid(a) {
			out[i] = string(a)
		} else {
			out[i] = string(bytes.ToValidUTF8(a, []byte("\uFFFD")))
		}
	}
	return out
}

// NewRequest builds a run request from this (client) process's view: the
// exact argv bytes, its environment and its working directory.
func NewRequest(argv []string, cwd string, env []string) RunRequest {
	r := RunRequest{Cwd: []byte(cwd)}
	for _, a := range argv {
		r.Argv = append(r.Argv, []byte(a))
	}
	for _, e := range env {
		r.Env = append(r.Env, []byte(e))
	}
	return r
}

// RunnerInterpreter is the shebang interpreter of CortexFS objects.
const RunnerInterpreter = "cortexfs-object-runner"

// SpeaksEvents reports whether argv0 (resolved on PATH like the shell
// would, in the caller's view) is a CortexFS object: an executable whose
// shebang names the object runner, whose stdout is the canonical event
// stream when it is not a terminal.
func SpeaksEvents(argv0, path string) bool {
	p := argv0
	if !strings.Contains(p, "/") {
		p = ""
		for _, dir := range filepath.SplitList(path) {
			if dir == "" {
				dir = "."
			}
			cand := filepath.Join(dir, argv0)
			if fi, err := os.Stat(cand); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				p = cand
				break
			}
		}
		if p == "" {
			return false
		}
	}
	f, err := inputs.Open(p, 1<<40)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, _, _ := strings.Cut(string(head[:n]), "\n")
	if !strings.HasPrefix(line, "#!") {
		return false
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	return len(fields) > 0 && filepath.Base(fields[0]) == RunnerInterpreter
}
