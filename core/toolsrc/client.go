package toolsrc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tool"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/ipc"
)

// ask sends one request to the tier's socket and decodes the result. A
// socket nobody serves is ECONNREFUSED ("is cortexfsd running?"); a
// cancelled ctx hangs up, which cancels the request in the daemon.
func ask(ctx context.Context, ref TierRef, op string, args, out any) error {
	_, err := askDaemon(ctx, ref, op, args, out)
	return err
}

// askDaemon is ask that also says whether the daemon answered (its answer
// may be an error): then it has handled, and logged, the request.
func askDaemon(ctx context.Context, ref TierRef, op string, args, out any) (answered bool, err error) {
	c, err := ipc.Dial(ctx, ref.Socket())
	if err != nil {
		if ctx.Err() != nil {
			return false, abi.Errorf(abi.CodeOf(ctx.Err()), "%v", ctx.Err())
		}
		if errors.Is(err, fs.ErrPermission) {
			// The kernel refused the connect: the socket (a home tier's)
			// belongs to another user.
			return false, abi.Errorf(abi.EACCES, "the tool sources of %s are not yours to call (%s): %v", ref.Name(), ref.Socket(), shortErr(err))
		}
		return false, abi.Errorf(abi.ECONNREFUSED, "no cortexfsd serves the tool sources of %s (%s): %v", ref.Name(), ref.Socket(), shortErr(err))
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	err = c.Call(ctx, op, args, out)
	if err != nil && ctx.Err() != nil {
		return true, abi.Errorf(abi.CodeOf(ctx.Err()), "%s: %v", op, ctx.Err())
	}
	if abi.CodeOf(err) == abi.ECONNREFUSED {
		return false, abi.Errorf(abi.EHOSTDOWN, "cortexfsd hung up during %s: %v", op, err)
	}
	return true, err
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// Served reports whether a daemon answers on the tier's socket.
func Served(ctx context.Context, ref TierRef) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return ask(ctx, ref, "ping", nil, nil) == nil
}

// Sources asks the tier's daemon for its report.
func Sources(ctx context.Context, ref TierRef) (TierReport, error) {
	var r TierReport
	err := ask(ctx, ref, "sources", nil, &r)
	return r, err
}

// Refresh re-reads a tier's configuration: through its daemon when one
// serves it (servers start warm), else here and now (each source is
// listed once; MCP and native tools stay unavailable until a daemon
// serves them).
func Refresh(ctx context.Context, ref TierRef) (TierReport, error) {
	if !ref.System && !Served(ctx, ref) && Served(ctx, SystemTier(ref.Root)) {
		// A daemon runs; it starts serving a home tier within a poll of
		// its first configuration.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && !Served(ctx, ref) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if Served(ctx, ref) {
		var r TierReport
		err := ask(ctx, ref, "refresh", nil, &r)
		return r, err
	}
	t := NewTier(ref, false, nil)
	defer t.Close()
	err := t.Refresh(ctx, true)
	return t.Report(), err
}

// Inspect reports a tier without a daemon and without starting anything:
// its configuration and what is projected on disk.
func Inspect(ref TierRef) TierReport {
	r := TierReport{Tier: ref.Name(), Path: ref.Path}
	t := NewTier(ref, false, nil)
	defer t.Close()
	ws, problems, err := t.readConfig()
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	r.Problems = problems
	disk := map[string]diskEntry{}
	if d, _, err := openTier(ref); err == nil {
		if td, err := d.OpenDir(tree.ToolDir); err == nil {
			disk, _ = scanToolDir(td)
			td.Close()
		}
		d.Close()
	}
	for _, w := range ws {
		s := w.make()
		sr := SourceReport{Tier: ref.Name(), Kind: s.kind(), Name: s.name(), SourceStatus: SourceStatus{State: StateNotServed}}
		if f, ok := s.(*failedSource); ok {
			sr.State, sr.Error = StateFailed, f.err.Error()
		}
		if m, ok := s.(*mcpSource); ok {
			sr.Transport = m.cfg.Transport
			if m.cfg.Err != nil {
				sr.State, sr.Error = StateFailed, m.cfg.Err.Error()
			}
		}
		if s.kind() == KindProcess {
			sr.State = StateReady
		}
		for n, e := range disk {
			if e.ours && e.sourceKey == s.key() {
				st, _ := os.ReadFile(filepath.Join(ref.ToolDir(), n+abi.CtlSuffix, "status"))
				sr.Tools = append(sr.Tools, ToolReport{Name: n, Original: e.original, Status: strings.TrimSpace(string(st))})
			}
		}
		sortTools(sr.Tools)
		r.Sources = append(r.Sources, sr)
	}
	return r
}

func sortTools(ts []ToolReport) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
}

// IsProjected reports whether a tool object is a projection of a tool
// source (its metadata has "source").
func IsProjected(o tree.Object) bool { return o.Meta.Get("source") != "" }

// CallOptions are the caller's side of one call through the runner.
type CallOptions struct {
	// Credential runs a process plugin as someone else (a root launcher
	// calling for an agent); nil: as this process.
	Credential *syscall.Credential
	Run        string // the runner's run id, for the daemon's .d/log line
	DryRun     bool
	Timeout    time.Duration // 0: the tool's .d/timeout, else DefaultTimeout
	Invocation Invocation
}

// Call runs a projected tool for the object runner: its input checked
// against .d/schema first (nothing unchecked is sent), then an MCP or
// native tool through the tier's daemon, a process plugin's command as a
// child of this process.
func Call(ctx context.Context, o tree.Object, input json.RawMessage, opt CallOptions) (Result, error) {
	ctl, err := o.CtlDir() // once: each name below is read beneath it
	if err != nil {
		return Result{}, abi.Errorf(abi.ENOTSUP, "tool %s: projected, but its .d/ is unreadable: %v", o.Name, err)
	}
	defer ctl.Close()
	readCtl := func(f string) []byte {
		b, _ := ctl.ReadFile(f, abi.MaxControlFile) // missing or unreadable is empty
		return b
	}
	ob, err := ctl.ReadFile("origin", abi.MaxControlFile)
	if err != nil {
		return Result{}, abi.Errorf(abi.ENOTSUP, "tool %s: projected, but its .d/origin is unreadable: %v", o.Name, err)
	}
	origin, err := abi.ParseKV(ob)
	if err != nil {
		return Result{}, abi.Errorf(abi.EINVAL, "tool %s: .d/origin: %v", o.Name, err)
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	effects, err := tool.ParseEffects(readCtl("effects"))
	if err != nil {
		return Result{}, abi.Errorf(abi.EINVAL, "tool %s: .d/%v", o.Name, err)
	}
	if opt.DryRun && !tool.CanDryRun(effects) {
		return Result{}, abi.Errorf(abi.ENOTSUP, "tool %s declares no dry run", o.Name)
	}
	if opt.Timeout <= 0 {
		if n, err := strconv.Atoi(strings.TrimSpace(string(readCtl("timeout")))); err == nil && n > 0 {
			opt.Timeout = time.Duration(n) * time.Second
		}
	}
	ref := tierOf(o)
	if kvGet(origin, "source") == PrefixPlugin && kvGet(origin, "kind") == KindProcess {
		return RunProcessTool(ctx, ProcessCall{Tier: ref, Plugin: kvGet(origin, "plugin"), Tool: kvGet(origin, "tool"),
			Input: input, Invocation: opt.Invocation, DryRun: opt.DryRun, Timeout: opt.Timeout, Credential: opt.Credential})
	}
	// The daemon validates the input against the tool's schema (compiled
	// once per projection) before its source sees anything; checking it
	// here too would only repeat that on every call.
	if err := tool.StrictJSON(input); err != nil {
		return Result{}, abi.Errorf(abi.EINVAL, "%s: %v", o.Name, err)
	}
	var res Result
	args := CallArgs{Run: opt.Run, Tool: o.Name, Input: input, Invocation: opt.Invocation, DryRun: opt.DryRun, TimeoutMS: opt.Timeout.Milliseconds()}
	answered, err := askDaemon(ctx, ref, "call", args, &res)
	res.DaemonLogged = answered
	if abi.CodeOf(err) == abi.ECONNREFUSED {
		return res, abi.Errorf(abi.EHOSTDOWN, "tool %s is unavailable: %v", o.Name, err)
	}
	return res, err
}

// tierOf is the tier that holds a tool object.
func tierOf(o tree.Object) TierRef {
	if filepath.Clean(o.Tier) == filepath.Clean(string(o.Root)) {
		return SystemTier(o.Root)
	}
	uid, _ := strconv.Atoi(filepath.Base(o.Tier))
	return HomeTier(o.Root, uid)
}
