// Package desktop is cbth's Desktop integration: the installation state and
// thread bindings, bridge-preflight and its revisioned snapshots, the
// bridge's read helpers, the writeback CAS helpers with their leases, the
// boundary handoff and its recovery envelope, operator artifact recovery,
// the transcript relay, and the reconcile that keeps all of it fail-closed.
// Attempt and batch transitions go through package delivery; this package
// adds the binding and installation gates around them.
package desktop

import (
	"context"
	"log"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/cbth/sweep"
)

// ReadTransport is the installation-wide delivery-envelope read transport.
type ReadTransport string

const (
	DirectFileRead ReadTransport = "direct_file_read"
	HelperCLIRead  ReadTransport = "helper_cli_read"
)

// ReadTransports is both, in the seed's order.
var ReadTransports = []ReadTransport{DirectFileRead, HelperCLIRead}

// Capability is a validated-or-not conclusion about one capability.
type Capability string

const (
	CapUnknown     Capability = "unknown"
	CapValidated   Capability = "validated"
	CapUnavailable Capability = "unavailable"
)

// Capabilities is the seed's three values.
var Capabilities = []Capability{CapUnknown, CapValidated, CapUnavailable}

func validCapability(c Capability) bool {
	return c == CapUnknown || c == CapValidated || c == CapUnavailable
}

// BindingState is desktop_bindings.binding_state.
type BindingState string

const (
	Unbound  BindingState = "unbound"
	Bound    BindingState = "bound"
	Degraded BindingState = "degraded"
)

// BindingStates is the seed's three states.
var BindingStates = []BindingState{Unbound, Bound, Degraded}

// Resolution is how reconcile-arm (and arm_pending expiry) settled an arm
// whose note-arm response was lost, in the seed's order.
type Resolution string

const (
	ResolvedArmSucceeded     Resolution = "arm_succeeded"
	ResolvedBoundaryCrossed  Resolution = "boundary_crossed"
	ResolvedAbandonedReplay  Resolution = "abandoned_replay_automatic"
	ResolvedManualResolution Resolution = "manual_resolution_only"
)

// Resolutions lists them in the order reconcile tries them.
var Resolutions = []Resolution{ResolvedArmSucceeded, ResolvedBoundaryCrossed, ResolvedAbandonedReplay, ResolvedManualResolution}

// HelperSurfaceRevision is the compatibility revision of the `cbth desktop`
// helper surface; the validation fingerprint covers it, so a binary with
// another surface never inherits validated conclusions.
const HelperSurfaceRevision = "cbth-desktop-helpers/1"

// ID prefixes.
const (
	BindingPrefix  = "bnd_"
	SnapshotPrefix = "snap_"
	LeasePrefix    = "arl_"
	MarkerPrefix   = "mrk_"
)

// Service runs the Desktop operations against one daemon's store.
type Service struct {
	Store *store.Store
	Cfg   config.Config
	Home  home.Home
	// Sweep runs the daemon's overdue sweep (bridge-preflight calls it).
	Sweep func(ctx context.Context) (sweep.Report, error)
	// Observe reads the current fingerprint inputs; tests may replace it.
	Observe func() FingerprintInputs
	Log     *log.Logger

	publish sync.Mutex // one snapshot publication at a time, in revision order
}

// NewService wires a service for a daemon.
func NewService(s *store.Store, cfg config.Config, h home.Home, logw *log.Logger) *Service {
	sv := &Service{Store: s, Cfg: cfg, Home: h, Log: logw}
	sv.Observe = func() FingerprintInputs { return ObserveFingerprint(cfg, h) }
	return sv
}

// Inbox is $CBTH_HOME/inbox, where the Desktop bridge reads.
func (sv *Service) Inbox() string { return filepath.Join(sv.Home.Root, "inbox") }

func (sv *Service) run(ctx context.Context, a audit.Actor, fn func(o *delivery.Op) error) error {
	return delivery.Run(ctx, sv.Store, sv.Cfg, a, fn)
}

func errInvalid(format string, args ...any) error { return abi.Errorf(abi.EINVAL, format, args...) }

// validID checks an id-like argument: non-empty, bounded, printable, no
// surrounding space.
func validID(flag, s string) error {
	if s == "" {
		return errInvalid("%s is required", flag)
	}
	if len(s) > 256 {
		return errInvalid("%s is longer than 256 bytes", flag)
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f || r == '\uFFFD' {
			return errInvalid("%s %q has spaces, control characters or invalid UTF-8", flag, s)
		}
	}
	return nil
}

func validToken(tok delivery.Token) error {
	if err := validID("--source-thread-id", tok.SourceThreadID); err != nil {
		return err
	}
	if err := validID("--attempt-id", tok.AttemptID); err != nil {
		return err
	}
	if tok.BatchID != "" {
		if err := validID("--batch-id", tok.BatchID); err != nil {
			return err
		}
	}
	if tok.Generation < 1 {
		return errInvalid("--generation must be a positive integer")
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}
