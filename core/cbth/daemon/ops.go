package daemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/cbth/tasks"
	"github.com/cortexfs/cortexfs/wire/ipc"
	"github.com/cortexfs/cortexfs/wire/peer"
)

type sqlTx = sql.Tx

// Operation names of the internal protocol.
const (
	OpPing        = "daemon.ping"
	OpStatus      = "daemon.status"
	OpStop        = "daemon.stop"
	OpSweep       = "daemon.sweep"
	OpDoctor      = "daemon.doctor"
	OpJobSubmit   = "job.submit"
	OpJobComplete = "job.complete"
	OpJobFail     = "job.fail"
	OpJobCancel   = "job.cancel"
	OpJobQuery    = "job.query"
	OpJobList     = "job.list"
	OpArtifactPin = "artifact.pin"
	OpInspectHead = "batch.inspect_head"
	OpInspect     = "batch.inspect"
	OpCloseHead   = "batch.close_head"
	OpAuditList   = "audit.list"
	OpTaskRun     = "task.run"
	OpTaskList    = "task.list"
	OpTaskInspect = "task.inspect"
	OpTaskCancel  = "task.cancel"
)

// IDArgs names one object.
type IDArgs struct {
	ID string `json:"id"`
}

// byID is an operation on one named object; an empty id is EINVAL.
func byID(fn func(ctx context.Context, d *Daemon, a audit.Actor, id string) (any, error)) opFunc {
	return typed(func(ctx context.Context, d *Daemon, a audit.Actor, r IDArgs) (any, error) {
		if r.ID == "" {
			return nil, abi.Errorf(abi.EINVAL, "an id is required")
		}
		return fn(ctx, d, a, r.ID)
	})
}

// ThreadArgs names a thread.
type ThreadArgs struct {
	SourceThreadID string `json:"source_thread_id"`
	Reason         string `json:"reason,omitempty"`
	Limit          int    `json:"limit,omitempty"`
}

// HeadResult is inspect-head's answer: the batch, or none.
type HeadResult struct {
	SourceThreadID string          `json:"source_thread_id"`
	Batch          *delivery.Batch `json:"batch"`
}

// CloseHeadResult is close-head's answer.
type CloseHeadResult struct {
	SourceThreadID string           `json:"source_thread_id"`
	BatchID        string           `json:"batch_id,omitempty"`
	Outcome        delivery.Outcome `json:"outcome"`
	Batch          *delivery.Batch  `json:"batch,omitempty"`
}

// Status is daemon.status.
type Status struct {
	Running       bool    `json:"running"`
	PID           int     `json:"pid"`
	StartedAt     string  `json:"started_at"`
	Version       *string `json:"version"` // the daemon's; null when none runs
	ClientVersion string  `json:"client_version,omitempty"`
	Protocol      int     `json:"protocol"`
	Home          string  `json:"home"`
	Socket        string  `json:"socket"`
	ActiveClients int64   `json:"active_clients"`
	ActiveJobs    int     `json:"active_jobs"`
	RunningTasks  int     `json:"running_tasks"`
	IdleTimeout   int64   `json:"idle_timeout_seconds"`
	SchemaVersion int     `json:"schema_version"`
	LastSweep     any     `json:"last_sweep"`
	// StoreCommits counts this daemon's durable commits (one fsync each);
	// StoreWrites the transactions they made durable (group commit puts
	// many in one).
	StoreCommits int64 `json:"store_commits"`
	StoreWrites  int64 `json:"store_writes"`
}

func decode(args json.RawMessage, v any) error {
	if len(args) == 0 {
		return nil
	}
	if err := json.Unmarshal(args, v); err != nil {
		return abi.Errorf(abi.EINVAL, "bad arguments: %v", err)
	}
	return nil
}

type opFunc func(ctx context.Context, d *Daemon, a audit.Actor, args json.RawMessage) (any, error)

var ops map[string]opFunc

func init() {
	ops = map[string]opFunc{
		OpPing: func(ctx context.Context, d *Daemon, a audit.Actor, _ json.RawMessage) (any, error) {
			return map[string]any{"pong": true, "pid": os.Getpid(), "protocol": ipc.Version}, nil
		},
		OpStatus: func(ctx context.Context, d *Daemon, a audit.Actor, _ json.RawMessage) (any, error) {
			return d.status(ctx)
		},
		OpStop: opStop,
		OpSweep: func(ctx context.Context, d *Daemon, a audit.Actor, _ json.RawMessage) (any, error) {
			r, err := d.Sweeper.Run(ctx, false)
			d.setSweep(r)
			return r, err
		},
		OpDoctor: func(ctx context.Context, d *Daemon, a audit.Actor, _ json.RawMessage) (any, error) {
			return d.doctor(ctx)
		},
		OpJobSubmit: typed(func(ctx context.Context, d *Daemon, a audit.Actor, r jobs.SubmitRequest) (any, error) {
			var err error
			if r.Metadata, err = oneFile(ctx, r.MetadataFile); err != nil {
				return nil, err
			}
			return d.Jobs.Submit(ctx, a, r)
		}),
		OpJobSubmitMany: typed(func(ctx context.Context, d *Daemon, a audit.Actor, r jobs.BulkRequest) (any, error) {
			return d.Jobs.SubmitMany(ctx, a, r.Items)
		}),
		OpJobComplete: typed(func(ctx context.Context, d *Daemon, a audit.Actor, r jobs.CompleteRequest) (any, error) {
			var err error
			if r.Result, err = oneFile(ctx, r.ResultFile); err != nil {
				return nil, err
			}
			return d.Jobs.Complete(ctx, a, r)
		}),
		OpJobFail: typed(func(ctx context.Context, d *Daemon, a audit.Actor, r jobs.FailRequest) (any, error) {
			var err error
			if r.Result, err = oneFile(ctx, r.ResultFile); err != nil {
				return nil, err
			}
			return d.Jobs.Fail(ctx, a, r)
		}),
		OpJobCancel: typed(jobCancel),
		OpJobQuery:  byID(jobQuery),
		OpJobList: typed(func(ctx context.Context, d *Daemon, a audit.Actor, f jobs.ListFilter) (any, error) {
			return jobs.List(ctx, d.Store.DB, f)
		}),
		OpArtifactPin: typed(artifactPin),
		OpInspectHead: typed(inspectHead),
		OpInspect: byID(func(ctx context.Context, d *Daemon, a audit.Actor, id string) (any, error) {
			b, err := delivery.Inspect(ctx, d.Store.DB, id)
			for _, h := range inspectHooks {
				if err == nil {
					err = h(ctx, d, a, b)
				}
			}
			if err == nil {
				err = d.blocked(ctx, b)
			}
			return b, err
		}),
		OpCloseHead: typed(closeHead),
		OpAuditList: typed(func(ctx context.Context, d *Daemon, a audit.Actor, f audit.Filter) (any, error) {
			return audit.List(ctx, d.Store, f)
		}),
		OpTaskRun: typed(func(ctx context.Context, d *Daemon, a audit.Actor, r tasks.RunRequest) (any, error) {
			return d.Tasks.Run(ctx, a, r)
		}),
		OpTaskList: typed(func(ctx context.Context, d *Daemon, a audit.Actor, r ThreadArgs) (any, error) {
			return d.Tasks.List(ctx, r.SourceThreadID, r.Limit)
		}),
		OpTaskInspect: byID(func(ctx context.Context, d *Daemon, a audit.Actor, id string) (any, error) {
			return d.Tasks.Inspect(ctx, id)
		}),
		OpTaskCancel: byID(func(ctx context.Context, d *Daemon, a audit.Actor, id string) (any, error) {
			return d.Tasks.Cancel(ctx, a, id)
		}),
	}
}

// oneFile is the descriptor a request carries for the file the client
// named: exactly one when it named one, none otherwise. The daemon never
// opens the name itself (it sees another mount view than the client).
func oneFile(ctx context.Context, name string) (*os.File, error) {
	files := ipc.Files(ctx)
	switch {
	case name == "" && len(files) == 0:
		return nil, nil
	case name != "" && len(files) == 1:
		return files[0], nil
	}
	return nil, abi.Errorf(abi.EINVAL, "request names file %q but carries %d descriptors", name, len(files))
}

func typed[T any](fn func(ctx context.Context, d *Daemon, a audit.Actor, r T) (any, error)) opFunc {
	return func(ctx context.Context, d *Daemon, a audit.Actor, args json.RawMessage) (any, error) {
		var r T
		if err := decode(args, &r); err != nil {
			return nil, err
		}
		return fn(ctx, d, a, r)
	}
}

// handle serves one authenticated request.
func (d *Daemon) handle(ctx context.Context, from peer.Cred, op string, args json.RawMessage) (any, error) {
	d.touch()
	defer d.touch()
	defer d.kickExtensions()
	fn, ok := ops[op]
	if !ok {
		return nil, abi.Errorf(abi.ENOTSUP, "unknown operation %q", op)
	}
	// The home stays private for the daemon's whole life, not only at its
	// start: a home or run dir someone widened fails closed at once.
	if err := d.Home.CheckPrivate(); err != nil {
		return nil, err
	}
	return fn(ctx, d, audit.Actor{Name: "client", UID: int64(from.UID), PID: int64(from.PID)}, args)
}

func opStop(ctx context.Context, d *Daemon, a audit.Actor, _ json.RawMessage) (any, error) {
	_ = d.Store.Tx(ctx, func(tx *sqlTx) error {
		return audit.Write(ctx, tx, store.TS(time.Now()), a, audit.Entry{Action: "daemon.stop", EntityKind: "daemon",
			EntityID: d.instance, Outcome: "ok"})
	})
	d.setReason("stop requested")
	// Answer first, then stop accepting; running tasks are cancelled.
	time.AfterFunc(50*time.Millisecond, d.stop)
	return map[string]any{"stopping": true, "pid": os.Getpid(), "running_tasks": d.Tasks.Running()}, nil
}

func jobCancel(ctx context.Context, d *Daemon, a audit.Actor, r jobs.CancelRequest) (any, error) {
	j, err := jobs.Get(ctx, d.Store.DB, r.JobID)
	if err != nil {
		return nil, err
	}
	if j.TaskID != nil && j.Status == jobs.Running {
		if _, err := d.Tasks.Cancel(ctx, a, *j.TaskID); err == nil {
			return jobs.Get(ctx, d.Store.DB, r.JobID)
		}
	}
	return d.Jobs.Cancel(ctx, a, r)
}

// artifactPin sets or clears an artifact's operator_pin_until (the seed's
// retention lever for the operator) and recomputes gc_eligible_at.
func artifactPin(ctx context.Context, d *Daemon, a audit.Actor, r artifacts.PinRequest) (any, error) {
	until, err := r.Validate(d.Store.Now())
	if err != nil {
		return nil, err
	}
	err = delivery.Run(ctx, d.Store, d.Cfg, a, func(o *delivery.Op) error {
		if err := artifacts.Pin(ctx, o.Tx, r.ArtifactID, until, d.Cfg); err != nil {
			return err
		}
		to := "cleared"
		if !until.IsZero() {
			to = store.TS(until)
		}
		return o.Audit(audit.Entry{Action: "artifact.pin", EntityKind: "artifact", EntityID: r.ArtifactID, To: to,
			Outcome: string(delivery.OutcomeOK)})
	})
	if err != nil {
		return nil, err
	}
	return artifacts.Get(ctx, d.Store.DB, r.ArtifactID)
}

func inspectHead(ctx context.Context, d *Daemon, a audit.Actor, r ThreadArgs) (any, error) {
	if r.SourceThreadID == "" {
		return nil, abi.Errorf(abi.EINVAL, "--source-thread-id is required")
	}
	// A head whose max_wait_window has passed is materialized first, so the
	// operator sees what the scheduler would deliver now.
	err := delivery.Run(ctx, d.Store, d.Cfg, self("daemon"), func(o *delivery.Op) error {
		_, err := delivery.MaterializeHead(o, r.SourceThreadID)
		return err
	})
	if err != nil {
		return nil, err
	}
	b, err := delivery.InspectHead(ctx, d.Store.DB, r.SourceThreadID)
	if err == nil {
		err = d.blocked(ctx, b)
	}
	return HeadResult{SourceThreadID: r.SourceThreadID, Batch: b}, err
}

// JobView is `cbth job query`'s answer: the job and, while its batch is
// open, why that batch is not delivered automatically.
type JobView struct {
	*jobs.Job
	DeliveryBlockedReason *string `json:"delivery_blocked_reason"`
}

func jobQuery(ctx context.Context, d *Daemon, a audit.Actor, id string) (any, error) {
	j, err := jobs.Get(ctx, d.Store.DB, id)
	if err != nil {
		return nil, err
	}
	v := JobView{Job: j}
	if j.BatchID != nil {
		b, err := delivery.Inspect(ctx, d.Store.DB, *j.BatchID)
		if err == nil {
			err = d.blocked(ctx, b)
		}
		if err != nil {
			return nil, err
		}
		v.DeliveryBlockedReason = b.DeliveryBlockedReason
	}
	return v, nil
}

func closeHead(ctx context.Context, d *Daemon, a audit.Actor, r ThreadArgs) (any, error) {
	if r.SourceThreadID == "" {
		return nil, abi.Errorf(abi.EINVAL, "--source-thread-id is required")
	}
	res := CloseHeadResult{SourceThreadID: r.SourceThreadID}
	err := delivery.Run(ctx, d.Store, d.Cfg, a, func(o *delivery.Op) (err error) {
		res.BatchID, res.Outcome, err = delivery.CloseHead(o, r.SourceThreadID, delivery.CloseReason(r.Reason))
		return err
	})
	if err != nil {
		return nil, err
	}
	if res.BatchID != "" {
		res.Batch, err = delivery.Inspect(ctx, d.Store.DB, res.BatchID)
	}
	return res, err
}

func (d *Daemon) status(ctx context.Context) (*Status, error) {
	n, err := jobs.ActiveCount(ctx, d.Store.DB)
	if err != nil {
		return nil, err
	}
	v, err := d.Store.Version(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	last := d.lastSweep
	d.mu.Unlock()
	commits, writes := d.Store.CommitStats()
	return &Status{StoreCommits: commits, StoreWrites: writes, Running: true, PID: os.Getpid(), StartedAt: store.TS(d.started), Version: &d.Version,
		Protocol: ipc.Version, Home: d.Home.Root, Socket: d.Home.Socket(), ActiveClients: d.clients.Load(),
		ActiveJobs: n, RunningTasks: d.Tasks.Running(), IdleTimeout: int64(d.Cfg.IdleTimeout / time.Second),
		SchemaVersion: v, LastSweep: last}, nil
}
