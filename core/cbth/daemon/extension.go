package daemon

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Extension is an integration adapter the daemon hosts (the CLI adapter):
// it starts after the startup sweep, is kicked after every served request
// (so delivery reacts at once to a completed job), keeps the daemon alive
// while Busy, and is stopped before the daemon exits.
type Extension interface {
	Name() string
	Start(ctx context.Context, d *Daemon) error
	Kick()
	Busy(ctx context.Context) (string, bool)
	Stop()
}

// OpFunc serves one IPC operation.
type OpFunc func(ctx context.Context, d *Daemon, a audit.Actor, args json.RawMessage) (any, error)

var extensionFactories []func() Extension

// InspectHook completes `cbth batch inspect --batch-id`'s answer (the
// Desktop adapter adds the boundary recovery envelope and an operator
// artifact recovery lease).
type InspectHook func(ctx context.Context, d *Daemon, a audit.Actor, b *delivery.Batch) error

var inspectHooks []InspectHook

// RegisterInspectHook adds a hook; call it at init.
func RegisterInspectHook(h InspectHook) { inspectHooks = append(inspectHooks, h) }

// BlockedHook says why an open batch is not delivered automatically ("" when
// nothing blocks it): `cbth batch inspect-head`, `batch inspect` and `job
// query` show it as delivery_blocked_reason.
type BlockedHook func(ctx context.Context, d *Daemon, b *delivery.Batch) (string, error)

var blockedHooks []BlockedHook

// RegisterBlockedHook adds a hook; call it at init.
func RegisterBlockedHook(h BlockedHook) { blockedHooks = append(blockedHooks, h) }

// blocked fills b's delivery_blocked_reason from the hooks.
func (d *Daemon) blocked(ctx context.Context, b *delivery.Batch) error {
	if b == nil {
		return nil
	}
	for _, h := range blockedHooks {
		why, err := h(ctx, d, b)
		if err != nil {
			return err
		}
		if why != "" {
			b.DeliveryBlockedReason = &why
			return nil
		}
	}
	return nil
}

// DoctorHook adds checks to `cbth doctor`, with the daemon running (s is
// its store) or not (the doctor opened the store itself).
type DoctorHook func(ctx context.Context, s *store.Store, h home.Home, cfg config.Config) []Check

var doctorHooks []DoctorHook

// RegisterDoctorHook adds a hook; call it at init.
func RegisterDoctorHook(h DoctorHook) { doctorHooks = append(doctorHooks, h) }

// RegisterExtension adds an adapter every daemon instance creates.
func RegisterExtension(f func() Extension) { extensionFactories = append(extensionFactories, f) }

// RegisterOp adds an IPC operation; a duplicate name panics (at init).
func RegisterOp(name string, fn OpFunc) {
	if _, dup := ops[name]; dup {
		panic(fmt.Sprintf("daemon: operation %q registered twice", name))
	}
	ops[name] = opFunc(fn)
}

// Extension returns this daemon's adapter of that name, or nil.
func (d *Daemon) Extension(name string) Extension {
	for _, e := range d.exts {
		if e.Name() == name {
			return e
		}
	}
	return nil
}

// Actor returns the audit actor for the daemon acting on its own.
func Actor(name string) audit.Actor { return self(name) }

func (d *Daemon) startExtensions(ctx context.Context) error {
	for _, f := range extensionFactories {
		e := f()
		if err := e.Start(ctx, d); err != nil {
			return fmt.Errorf("start %s adapter: %w", e.Name(), err)
		}
		d.exts = append(d.exts, e)
	}
	return nil
}

func (d *Daemon) kickExtensions() {
	for _, e := range d.exts {
		e.Kick()
	}
}

func (d *Daemon) stopExtensions() {
	for _, e := range d.exts {
		e.Stop()
	}
}

func (d *Daemon) extensionsBusy(ctx context.Context) (string, bool) {
	for _, e := range d.exts {
		if why, busy := e.Busy(ctx); busy {
			return why, true
		}
	}
	return "", false
}
