package toolsrc

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tool"
)

// ToolSpec is one tool as its source offers it, before projection.
type ToolSpec struct {
	Original    string          // the source's own name (called with it)
	Description string          //
	Input       json.RawMessage // JSON Schema of the arguments
	Output      json.RawMessage // JSON Schema of structured output, or nil
	Effects     []tool.Effect   //
	TimeoutSecs int             // 0: the caller's default
	Caps        []string        // descriptive words for .d/cap
	Origin      []abi.KV        // extra facts for .d/origin
}

// Source states, as `ctx tool sources` shows them.
const (
	StateStarting    = "starting"    // first attempt under way
	StateReady       = "ready"       // tools listed, calls served
	StateUnavailable = "unavailable" // down; restarting with backoff
	StateFailed      = "failed"      // its configuration is refused; not retried until it changes
	StateNotServed   = "not_served"  // no cortexfsd serves this tier (listing only)
)

// CallRequest is one call as the daemon received it.
type CallRequest struct {
	Input      json.RawMessage
	Invocation Invocation
	DryRun     bool
}

// Result is a tool's result as canonical tool output: Output is the
// source's own result object (an MCP CallToolResult's content and
// structuredContent, or a plugin's ToolResult); IsError says the tool ran
// and reported failure (MCP isError, plugin is_error), which is not a
// transport failure.
type Result struct {
	Output  json.RawMessage `json:"output"`
	IsError bool            `json:"is_error"`
	// DaemonLogged is set by Call when cortexfsd handled the call (and
	// wrote its .d/log line), so the runner does not log it again.
	DaemonLogged bool `json:"-"`
}

// source is one MCP server or plugin of a tier.
type source interface {
	key() string         // "mcp:NAME" or "plugin:NAME"
	name() string        // NAME
	prefix() string      // PrefixMCP or PrefixPlugin
	kind() string        // KindMCP, KindNative, KindProcess
	fingerprint() string // changes when its configuration does
	start(warm bool)     // begin (warm: keep running; else list once)
	stop()               //
	firstDone() <-chan struct{}
	status() SourceStatus
	// tools returns the known tools; listed is false until the source has
	// listed them once in this process (its projection on disk is kept
	// meanwhile).
	tools() (specs []ToolSpec, listed bool)
	call(ctx context.Context, spec ToolSpec, req CallRequest) (Result, error)
}

// SourceStatus is the state part of a source report.
type SourceStatus struct {
	State    string    `json:"state"`
	Error    string    `json:"error,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Restarts int       `json:"restarts"`
	Since    time.Time `json:"since"`
}

// life is the common state machine of warm sources: state, error,
// restarts, the first-attempt signal and the stop signal.
type life struct {
	mu       sync.Mutex
	st       SourceStatus
	specs    []ToolSpec
	listed   bool
	first    chan struct{}
	firstOne sync.Once
	stopCh   chan struct{}
	stopOne  sync.Once
	changed  func() // tell the tier to re-project
}

func newLife(changed func()) life {
	return life{st: SourceStatus{State: StateStarting, Since: time.Now().UTC()}, first: make(chan struct{}),
		stopCh: make(chan struct{}), changed: changed}
}

func (l *life) firstDone() <-chan struct{} { return l.first }

func (l *life) status() SourceStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

func (l *life) tools() ([]ToolSpec, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.specs, l.listed
}

// set records a state; tools (when non-nil) replaces the tool list. The
// first call closes firstDone; every call tells the tier.
func (l *life) set(state string, err error, pid int, specs []ToolSpec, listed bool) {
	l.mu.Lock()
	if l.st.State != state {
		l.st.Since = time.Now().UTC()
	}
	l.st.State, l.st.PID = state, pid
	l.st.Error = ""
	if err != nil {
		l.st.Error = err.Error()
	}
	if listed {
		l.specs, l.listed = specs, true
	}
	l.mu.Unlock()
	l.firstOne.Do(func() { close(l.first) })
	if l.changed != nil {
		l.changed()
	}
}

func (l *life) restarted() {
	l.mu.Lock()
	l.st.Restarts++
	l.mu.Unlock()
}

func (l *life) stop() { l.stopOne.Do(func() { close(l.stopCh) }) }

func (l *life) stopped() bool {
	select {
	case <-l.stopCh:
		return true
	default:
		return false
	}
}

// Restart backoff of warm sources: doubling from BackoffMin to BackoffMax,
// back to BackoffMin after a run that stayed up for BackoffReset.
var (
	BackoffMin   = 500 * time.Millisecond
	BackoffMax   = 30 * time.Second
	BackoffReset = time.Minute
)

type backoff struct{ d time.Duration }

func (b *backoff) next(upFor time.Duration) time.Duration {
	if b.d == 0 || upFor >= BackoffReset {
		b.d = BackoffMin
	} else if b.d *= 2; b.d > BackoffMax {
		b.d = BackoffMax
	}
	return b.d
}

// wait sleeps d or until the source is stopped (false).
func (l *life) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.stopCh:
		return false
	}
}
