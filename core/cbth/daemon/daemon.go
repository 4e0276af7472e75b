// Package daemon is cbth's on-demand per-user daemon: lifecycle (single
// instance lock, startup overdue sweep before serving, periodic sweep, idle
// exit), the IPC operations it serves, and the client side that starts it
// on demand.
package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/cbth/sweep"
	"github.com/cortexfs/cortexfs/core/cbth/tasks"
	"github.com/cortexfs/cortexfs/wire/ipc"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// Daemon is one running instance.
type Daemon struct {
	Home    home.Home
	Cfg     config.Config
	Store   *store.Store
	Jobs    *jobs.Service
	Sweeper *sweep.Sweeper
	Tasks   *tasks.Manager
	Log     *log.Logger
	Version string

	started      time.Time
	instance     string
	clients      atomic.Int64
	lastActivity atomic.Int64 // unix nanos
	stop         context.CancelFunc
	mu           sync.Mutex
	lastSweep    sweep.Report
	exitReason   string
	exts         []Extension
}

// self is the daemon acting on its own (sweeps, task supervision).
func self(name string) audit.Actor {
	return audit.Actor{Name: name, UID: int64(os.Getuid()), PID: int64(os.Getpid())}
}

// PIDInfo is run/daemon.pid.
type PIDInfo struct {
	PID       int    `json:"pid"`
	StartedAt string `json:"started_at"`
	Version   string `json:"version"`
	Protocol  int    `json:"protocol"`
}

// Run runs the daemon in the foreground until ctx ends, a stop request
// arrives or the idle rules let it exit. Before the socket exists it takes
// the single-instance lock and runs the startup overdue sweep, so no
// request is ever served before the sweep.
func Run(ctx context.Context, h home.Home, version string, logw *log.Logger) (err error) {
	syscall.Umask(0o077)
	if err := h.Ensure(); err != nil {
		writeStartError(h, err)
		return err
	}
	lock, err := TryLock(h.DaemonLock())
	if err != nil {
		return abi.Errorf(abi.EBUSY, "a cbth daemon already runs for %s", h.Root)
	}
	defer lock.Unlock()
	serving := false
	defer func() {
		if err != nil && !serving {
			// The client that started us reads why, with its code.
			writeStartError(h, err)
		}
	}()
	os.Remove(h.StartError())
	if _, err := os.Stat(h.DB()); os.IsNotExist(err) {
		// First start: a commented config.ini that documents every key and
		// changes nothing (never replacing one the user wrote).
		if err := config.WriteSample(h.Config()); err != nil {
			logw.Printf("cannot write a sample %s: %v", h.Config(), err)
		}
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, h.DB())
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &Daemon{Home: h, Cfg: cfg, Store: st, Log: logw, Version: version, started: time.Now().UTC(),
		stop: cancel, instance: fmt.Sprintf("%d@%d", os.Getpid(), time.Now().UnixNano())}
	d.Jobs = &jobs.Service{Store: st, Cfg: cfg, ArtifactsDir: h.Artifacts()}
	d.Sweeper = &sweep.Sweeper{Store: st, Cfg: cfg, ArtifactsDir: h.Artifacts(), Actor: self("sweep")}
	d.Tasks = &tasks.Manager{Store: st, Jobs: d.Jobs, Cfg: cfg, Dir: h.Tasks(), Instance: d.instance,
		Actor: self("task"), Log: logw, OnChange: d.touch}
	d.touch()
	if err := d.startup(ctx); err != nil {
		return err
	}
	if err := d.startExtensions(ctx); err != nil {
		return err
	}
	defer d.stopExtensions()
	ln, err := ipc.Listen(h.Socket())
	if err != nil {
		return err
	}
	defer os.Remove(h.PIDFile())
	defer os.Remove(h.Socket())
	srv := &ipc.Server{OwnerUID: uint32(os.Getuid()), Handler: d.handle, OnRefuse: d.refused, OnConn: d.onConn}
	serving = true
	go d.loop(ctx)
	d.Log.Printf("serving %s (pid %d)", h.Socket(), os.Getpid())
	err = srv.Serve(ctx, ln)
	// No task outlives its supervision: each is cancelled with its job.
	if n := d.Tasks.CancelAll(context.Background(), "cbth daemon stopped ("+d.reason()+"); "+
		"the task's process tree was ended"); n > 0 {
		d.Log.Printf("cancelled %d running tasks", n)
	}
	d.Tasks.Wait(5 * time.Second)
	d.Log.Printf("exiting: %s", d.reason())
	return err
}

// startup records the start, runs the deterministic overdue sweep and the
// task reconcile, and publishes the pid file, all before listening.
func (d *Daemon) startup(ctx context.Context) error {
	err := d.Store.Tx(ctx, func(tx *sqlTx) error {
		return audit.Write(ctx, tx, store.TS(d.started), self("daemon"), audit.Entry{Action: "daemon.start",
			EntityKind: "daemon", EntityID: d.instance, Outcome: "ok",
			Detail: map[string]any{"version": d.Version, "protocol": ipc.Version}})
	})
	if err != nil {
		return err
	}
	if err := d.Tasks.Reconcile(ctx); err != nil {
		return err
	}
	r, err := d.Sweeper.Run(ctx, true)
	if err != nil {
		return fmt.Errorf("startup sweep: %w", err)
	}
	d.setSweep(r)
	d.Log.Printf("startup sweep: %s", mustJSON(r))
	info := PIDInfo{PID: os.Getpid(), StartedAt: store.TS(d.started), Version: d.Version, Protocol: ipc.Version}
	return atomicfile.WriteFile(d.Home.PIDFile(), append(mustJSON(info), '\n'), 0o600)
}

// StartError is run/start-error.json: why a daemon could not start.
type StartError struct {
	Code    abi.Code `json:"code"`
	Message string   `json:"message"`
	At      string   `json:"at"`
}

func writeStartError(h home.Home, err error) {
	b := mustJSON(StartError{Code: abi.CodeOf(err), Message: err.Error(), At: store.TS(time.Now())})
	_ = atomicfile.WriteFile(h.StartError(), append(b, '\n'), 0o600)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (d *Daemon) setSweep(r sweep.Report) {
	d.mu.Lock()
	d.lastSweep = r
	d.mu.Unlock()
}

func (d *Daemon) touch() { d.lastActivity.Store(time.Now().UnixNano()) }

func (d *Daemon) setReason(why string) {
	d.mu.Lock()
	d.exitReason = why
	d.mu.Unlock()
}

func (d *Daemon) reason() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.exitReason == "" {
		return "signal"
	}
	return d.exitReason
}

func (d *Daemon) onConn(delta int) {
	d.clients.Add(int64(delta))
	d.touch()
}

func (d *Daemon) refused(from peer.Cred, why error) {
	d.Log.Printf("refused peer %s: %v", from, why)
	_ = d.Store.Tx(context.Background(), func(tx *sqlTx) error {
		return audit.Write(context.Background(), tx, store.TS(time.Now()),
			audit.Actor{Name: "peer", UID: int64(from.UID), PID: int64(from.PID)},
			audit.Entry{Action: "ipc.refused", EntityKind: "peer", Reason: why.Error(), Outcome: string(abi.EACCES),
				Detail: map[string]any{"uid": from.UID, "gid": from.GID, "pid": from.PID}})
	})
}

// loop runs the periodic sweep and applies the idle exit rule.
func (d *Daemon) loop(ctx context.Context) {
	tick := time.NewTicker(min(d.Cfg.SweepInterval, time.Second))
	defer tick.Stop()
	nextSweep := time.Now().Add(d.Cfg.SweepInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Now().After(nextSweep) {
			nextSweep = time.Now().Add(d.Cfg.SweepInterval)
			r, err := d.Sweeper.Run(ctx, false)
			if err != nil {
				d.Log.Printf("sweep: %v", err)
			} else {
				d.setSweep(r)
			}
			if _, err := d.Tasks.Collect(ctx); err != nil {
				d.Log.Printf("task spool collection: %v", err)
			}
		}
		if why, ok := d.idle(ctx); ok {
			d.setReason(why)
			d.stop()
			return
		}
	}
}

// idle applies the seed's rule: exit only with no active jobs, no live
// clients and no near-term delivery work within the idle timeout, after
// the idle timeout has passed since the last activity.
func (d *Daemon) idle(ctx context.Context) (string, bool) {
	quiet := time.Since(time.Unix(0, d.lastActivity.Load()))
	if quiet < d.Cfg.IdleTimeout || d.clients.Load() > 0 || d.Tasks.Running() > 0 {
		return "", false
	}
	if n, err := jobs.ActiveCount(ctx, d.Store.DB); err != nil || n > 0 {
		return "", false
	}
	if near, _, err := sweep.NearTerm(ctx, d.Store, d.Cfg, d.Cfg.IdleTimeout); err != nil || near {
		return "", false
	}
	if _, busy := d.extensionsBusy(ctx); busy {
		return "", false
	}
	return fmt.Sprintf("idle for %v with no active jobs, clients or near-term work", quiet.Round(time.Second)), true
}
