package toolsrc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tool"
)

// processSource is a process-isolated JSON plugin. Nothing of it runs in
// the daemon: its tools come from its manifest, and each call runs its
// command as a child of the caller (RunProcessTool). An edited manifest
// is picked up by the next call at once and re-projected by the next
// refresh, without restarting anything.
type processSource struct {
	life
	man Manifest
	fp  string
}

func newProcessSource(man Manifest, fp string, changed func()) *processSource {
	return &processSource{life: newLife(changed), man: man, fp: fp}
}

func (s *processSource) key() string         { return "plugin:" + s.man.Name }
func (s *processSource) name() string        { return s.man.Name }
func (s *processSource) prefix() string      { return PrefixPlugin }
func (s *processSource) kind() string        { return KindProcess }
func (s *processSource) fingerprint() string { return s.fp }

func (s *processSource) start(warm bool) {
	specs := make([]ToolSpec, 0, len(s.man.Tools))
	for _, t := range s.man.Tools {
		in, _ := t.Schema()
		out, _ := t.OutSchema()
		timeout := t.TimeoutSecs
		if timeout == 0 {
			timeout = s.man.Process.TimeoutSecs
		}
		specs = append(specs, ToolSpec{Original: t.Name, Description: t.Description, Input: in, Output: out,
			Effects: t.Effects, TimeoutSecs: timeout})
	}
	// Ready either way: a call needs no daemon.
	s.set(StateReady, nil, 0, specs, true)
}

func (s *processSource) call(context.Context, ToolSpec, CallRequest) (Result, error) {
	return Result{}, abi.Errorf(abi.ENOTSUP, "plugin %s is a process plugin: its tools run in the caller, not in cortexfsd", s.man.Name)
}

// MaxProcessOutput bounds a process plugin's stdout.
const MaxProcessOutput = 1 << 20

// DefaultTimeout applies to a call whose tool and caller set none.
const DefaultTimeout = 120 * time.Second

// ProcessCall is one call of a process plugin's tool.
type ProcessCall struct {
	Tier       TierRef
	Plugin     string
	Tool       string // the plugin's own tool name
	Input      json.RawMessage
	Invocation Invocation
	DryRun     bool
	Timeout    time.Duration       // 0: the tool's timeout_secs, else DefaultTimeout
	Credential *syscall.Credential // run the command as (nil: as this process)
}

// RunProcessTool runs one call of a process plugin as a child of the
// caller, with the caller's rights: the current manifest is read (so an
// edit applies at once), the input checked against the tool's schema,
// the command proven trusted, started in its own process group with a
// scrubbed environment, fed {"tool_name","input","invocation","dry_run"}
// on stdin and read for one ToolResult on stdout.
func RunProcessTool(ctx context.Context, c ProcessCall) (Result, error) {
	d, owner, err := openTier(c.Tier)
	if err != nil {
		return Result{}, err
	}
	defer d.Close()
	dir := path.Join(PluginsDir, c.Plugin)
	for _, p := range []string{PluginsDir, dir} {
		if err := checkTrustedDir(d, p, owner.UID); err != nil {
			return Result{}, err
		}
	}
	raw, _, err := readTrusted(d, path.Join(dir, ManifestFile), owner.UID, MaxConfigFile)
	if err != nil {
		return Result{}, err
	}
	if raw == nil {
		return Result{}, abi.Errorf(abi.ENOENT, "plugin %s: no %s (removed?)", c.Plugin, ManifestFile)
	}
	man, err := ParseManifest(raw)
	if err != nil {
		return Result{}, err
	}
	if man.Name != c.Plugin || man.Process == nil {
		return Result{}, abi.Errorf(abi.ENOENT, "plugin %s: its manifest no longer describes this process plugin", c.Plugin)
	}
	var mt *ManifestTool
	for i := range man.Tools {
		if man.Tools[i].Name == c.Tool {
			mt = &man.Tools[i]
		}
	}
	if mt == nil {
		return Result{}, abi.Errorf(abi.ENOENT, "plugin %s: tool %q is no longer in its manifest", c.Plugin, trunc(c.Tool))
	}
	schema, _ := mt.Schema()
	if err := tool.ValidateExternal(schema, c.Input); err != nil {
		return Result{}, err
	}
	if c.DryRun && !tool.CanDryRun(mt.Effects) {
		return Result{}, abi.Errorf(abi.ENOTSUP, "plugin %s: tool %s declares no dry run", c.Plugin, c.Tool)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		switch {
		case mt.TimeoutSecs > 0:
			timeout = time.Duration(mt.TimeoutSecs) * time.Second
		case man.Process.TimeoutSecs > 0:
			timeout = time.Duration(man.Process.TimeoutSecs) * time.Second
		default:
			timeout = DefaultTimeout
		}
	}
	cmd, closeCmd, err := processCommand(d, dir, owner.UID, man.Process)
	if err != nil {
		return Result{}, err
	}
	defer closeCmd()
	cmd.Dir = filepath.Join(c.Tier.Path, dir)
	who := lookupOwner(os.Getuid(), os.Getgid())
	if c.Credential != nil {
		who = lookupOwner(int(c.Credential.Uid), int(c.Credential.Gid))
	}
	cmd.Env = serverEnv(who, man.Process.Env)
	inv := c.Invocation
	inv.ToolName, inv.DryRun = c.Tool, c.DryRun
	req, err := json.Marshal(struct {
		ToolName   string          `json:"tool_name"`
		Input      json.RawMessage `json:"input"`
		Invocation Invocation      `json:"invocation"`
		DryRun     bool            `json:"dry_run"`
	}{c.Tool, c.Input, inv, c.DryRun})
	if err != nil {
		return Result{}, abi.Errorf(abi.EINVAL, "encode request: %v", err)
	}
	return runChild(ctx, cmd, req, timeout, c.Plugin+"."+c.Tool, c.Credential)
}

// processCommand builds the command: a path inside the plugin directory is
// opened fd-relative and executed through /proc/self/fd (what runs is the
// file that was checked); an absolute command must be trusted where it is.
func processCommand(d *safefs.Dir, dir string, owner int, p *Process) (*exec.Cmd, func(), error) {
	if strings.HasPrefix(p.Command, "/") {
		fi, err := os.Stat(p.Command)
		if err != nil {
			return nil, nil, abi.Errorf(abi.CodeOf(err), "process.command: %v", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if err := trustedStat(unix.Stat_t{Uid: st.Uid, Mode: st.Mode}, p.Command, owner); err != nil {
			return nil, nil, err
		}
		cmd := exec.Command(p.Command, p.Args...)
		return cmd, func() {}, nil
	}
	rel := path.Join(dir, p.Command)
	parts := strings.Split(path.Dir(rel), "/")
	for i := range parts {
		if err := checkTrustedDir(d, path.Join(parts[:i+1]...), owner); err != nil {
			return nil, nil, err
		}
	}
	f, err := d.Open(rel)
	if err != nil {
		return nil, nil, abi.Errorf(abi.CodeOf(err), "process.command: %v", err)
	}
	st, err := safefs.Fstat(f)
	if err == nil {
		err = trustedStat(st, f.Name(), owner)
	}
	if err == nil && st.Mode&0o111 == 0 {
		err = abi.Errorf(abi.EACCES, "process.command %s is not executable", f.Name())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	// The child gets the checked file as fd 3 and executes it from there
	// (for a #! script the interpreter reads /proc/self/fd/3, still open).
	cmd := exec.Command("/proc/self/fd/3", p.Args...)
	cmd.Args[0] = path.Base(p.Command)
	cmd.ExtraFiles = []*os.File{f}
	return cmd, func() { f.Close() }, nil
}

// runChild feeds req on stdin and reads one ToolResult from stdout.
func runChild(ctx context.Context, cmd *exec.Cmd, req []byte, timeout time.Duration, what string, cred *syscall.Credential) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd.Stdin = bytes.NewReader(req)
	out := &capBuffer{max: MaxProcessOutput}
	stderr := newTail(2048, nil)
	cmd.Stdout, cmd.Stderr = out, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		return Result{}, abi.Errorf(abi.CodeOf(err), "plugin %s: start: %v", what, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	stop()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever it left behind
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Result{}, abi.Errorf(abi.ETIMEDOUT, "plugin %s: no result within %v; killed", what, timeout)
	case ctx.Err() != nil:
		return Result{}, abi.Errorf(abi.ECANCELED, "plugin %s: cancelled", what)
	case out.over:
		return Result{}, abi.Errorf(abi.EMSGSIZE, "plugin %s: output larger than %d bytes", what, MaxProcessOutput)
	}
	r, derr := DecodeToolResult(bytes.TrimSpace(out.b.Bytes()))
	if err != nil && derr != nil {
		return Result{}, abi.Errorf(abi.EIO, "plugin %s failed: %v: %s", what, err, oneLine(lastLine(strings.TrimSpace(stderr.String())), 300))
	}
	if derr != nil {
		return Result{}, abi.Errorf(abi.EPROTO, "plugin %s: %v", what, derr)
	}
	return Result{Output: r.Encode(), IsError: r.IsError}, nil
}

// capBuffer keeps up to max bytes and notes overflow.
type capBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		c.over = true
		c.b.Write(p[:max(0, c.max-c.b.Len())])
		return len(p), nil
	}
	return c.b.Write(p)
}
