package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/ns"
)

// RuntimeArgv is how the launcher executes the agent runtime inside the
// sandbox: the launcher applet's hidden subcommand.
var RuntimeArgv = []string{LauncherName, "runtime"}

// runtimeReadyTimeout bounds how long Launch waits for the runtime inside
// the sandbox to say it is up.
const runtimeReadyTimeout = 30 * time.Second

// Runtime is an agent runtime running in its sandbox. The launcher that
// started it holds the other end of its control socket and runs turns on
// it; the runtime holds no credential and reaches nothing but what the
// sandbox shows and what the launcher answers.
type Runtime struct {
	// Approve answers the turns' tool calls that need confirmation (nil:
	// nobody can; they are refused).
	Approve Approver

	agent   *Agent
	sandbox *Sandbox
	proc    *ns.Process
	control *net.UnixConn
}

// LaunchOptions tune Launch.
type LaunchOptions struct {
	// Stderr receives the runtime's diagnostics (nil: discarded).
	Stderr io.Writer
	// Exe is the binary to run as the sandbox's init and the runtime ("":
	// this one).
	Exe string
}

// Launch follows the seed's "Agent startup" for a: its control files were
// read (1); CTX_ROOT, CTX_HOME, CTX_PATH and HOME are set as the sandbox
// names them (2) with .d/env merged (3); the identity comes from the
// profile (4); then, in the init, the mount namespace (5), the binds of
// .d/mount in order (6), pivot_root into .d/root (7), cd to .d/cwd (8),
// and the runtime is executed (9). A sandbox that cannot be built is an
// error with its reason: the agent never runs unconfined.
func Launch(ctx context.Context, a *Agent, o LaunchOptions) (*Runtime, error) {
	sb, err := a.PlanSandbox(os.Geteuid(), os.Getegid())
	if err != nil {
		return nil, err
	}
	spec := sb.spec
	spec.Mounts = append([]ns.Mount(nil), sb.spec.Mounts...)
	unview, warn, err := a.projectTree(&spec)
	if err != nil {
		return nil, err
	}
	if warn != "" && o.Stderr != nil {
		fmt.Fprintln(o.Stderr, warn)
	}
	ours, theirs, err := socketPair()
	if err != nil {
		unview()
		return nil, err
	}
	control, err := controlConn(ours)
	if err != nil {
		theirs.Close()
		unview()
		return nil, err
	}
	spec.Hostname = a.Name
	spec.Network = sb.Network
	spec.Cwd = sb.Cwd
	spec.Argv = RuntimeArgv
	spec.Env = a.insideAgent(sb).Environ()
	opts := sb.opts
	opts.Exe = o.Exe
	opts.Stderr = o.Stderr
	opts.ExtraFiles = []*os.File{theirs}
	proc, err := ns.Start(&spec, opts)
	theirs.Close()
	// The sandbox has bound the view (or failed): the host's own mount of
	// it goes now. The sandbox's bind keeps the view served for as long as
	// the sandbox lives, and nothing is left on the host if this process
	// dies with it (a dead FUSE mount would stay behind).
	unview()
	if err != nil {
		control.Close()
		return nil, abi.Errorf(abi.CodeOf(err), "agent %s: %w", a.Name, err)
	}
	rt := &Runtime{agent: a, sandbox: sb, proc: proc, control: control}
	if err := rt.awaitReady(ctx); err != nil {
		rt.Close()
		return nil, abi.Errorf(abi.CodeOf(err), "agent %s: runtime: %w", a.Name, err)
	}
	return rt, nil
}

// awaitReady waits for the runtime's one-byte hello on the control socket.
func (rt *Runtime) awaitReady(ctx context.Context) error {
	_ = rt.control.SetReadDeadline(time.Now().Add(runtimeReadyTimeout))
	defer rt.control.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = rt.control.SetReadDeadline(time.Now()) })
	defer stop()
	b := make([]byte, 1)
	if n, err := rt.control.Read(b); n != 1 || b[0] != 'r' {
		if ctx.Err() != nil {
			return abi.Errorf(abi.ECANCELED, "start cancelled")
		}
		return abi.Errorf(abi.EIO, "did not come up (%v; exit status %d)", err, rt.exitStatus())
	}
	return nil
}

func (rt *Runtime) exitStatus() int {
	select {
	case <-rt.proc.Done():
		return rt.proc.Wait()
	case <-time.After(100 * time.Millisecond):
		return -1
	}
}

// Sandbox is the confinement the runtime runs in.
func (rt *Runtime) Sandbox() *Sandbox { return rt.sandbox }

// Pid is the sandbox's init as this process sees it.
func (rt *Runtime) Pid() int { return rt.proc.Pid() }

// Done is closed when the sandbox has ended.
func (rt *Runtime) Done() <-chan struct{} { return rt.proc.Done() }

// Close stops the runtime: closing the control socket asks it to end, and
// the sandbox (every process in it) is killed if it has not within a few
// seconds.
func (rt *Runtime) Close() {
	rt.control.Close()
	rt.proc.Stop(5 * time.Second)
}

// openTurn makes a connection for one turn and hands the runtime its end.
func (rt *Runtime) openTurn() (*conn, error) {
	ours, theirs, err := socketPair()
	if err != nil {
		return nil, err
	}
	defer theirs.Close()
	if err := sendFile(rt.control, theirs); err != nil {
		ours.Close()
		return nil, err
	}
	return newConn(ours), nil
}

// runtimeConfig is the agent as the runtime inside the sandbox sees it,
// sent with every turn (so policy edits apply at once, as they always
// did): names and paths are the sandbox's, the policy is the tree's.
type runtimeConfig struct {
	Name   string   `json:"name"`
	Object string   `json:"object"`
	Label  string   `json:"label"`
	Owner  int      `json:"owner"`
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Groups []int    `json:"groups,omitempty"`
	Iso    string   `json:"iso"`
	Cwd    string   `json:"cwd"`
	Env    []abi.KV `json:"env,omitempty"`
	Path   []string `json:"path"`
	Models []string `json:"models"`
	Policy string   `json:"policy"`
}

// insideAgent is a as its runtime sees it inside sb.
func (a *Agent) insideAgent(sb *Sandbox) *Agent {
	in := *a
	in.Root = SandboxRoot
	in.Path = sb.CtxPath
	in.Cwd = sb.Cwd
	if p, ok := a.inside(a.Object.Path); ok {
		in.Object.Path = p
	}
	return &in
}

func (a *Agent) runtimeConfig(sb *Sandbox) *runtimeConfig {
	in := a.insideAgent(sb)
	return &runtimeConfig{Name: a.Name, Object: in.Object.Path, Label: a.Label, Owner: a.Owner, UID: a.UID, GID: a.GID,
		Groups: a.Groups, Iso: a.Iso, Cwd: in.Cwd, Env: a.Env, Path: in.Path, Models: a.Models, Policy: string(a.Policy.Format())}
}

// agent rebuilds the Agent a turn runs as, inside the sandbox.
func (c *runtimeConfig) agent() (*Agent, error) {
	if err := abi.ValidName(c.Name); err != nil {
		return nil, err
	}
	typ, err := policy.SubjectType(c.Label)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Parse([]byte(c.Policy))
	if err != nil {
		return nil, err
	}
	for _, p := range c.Path {
		if !strings.HasPrefix(p, "/") {
			return nil, abi.Errorf(abi.EINVAL, "CTX_PATH entry %q is not absolute", p)
		}
	}
	a := &Agent{Name: c.Name, Root: SandboxRoot, Owner: c.Owner, UID: c.UID, GID: c.GID, Groups: c.Groups,
		Label: c.Label, Type: typ, Iso: c.Iso, Cwd: c.Cwd, Env: c.Env, Path: c.Path, Models: c.Models, Policy: pol}
	a.Object.Path, a.Object.Name = c.Object, c.Name
	return a, nil
}

// RunOnce is a one-shot run (`agent/<name> TASK` through the runner): the
// same sandbox as the agent process, built for this one turn and torn down
// after it.
func RunOnce(ctx context.Context, a *Agent, sess *Session, run string, input []model.Message, emit func(abi.Event) error, approve Approver) error {
	rt, err := Launch(ctx, a, LaunchOptions{Stderr: os.Stderr})
	if err != nil {
		return err
	}
	defer rt.Close()
	rt.Approve = approve
	return rt.Turn(ctx, a, sess, run, input, emit)
}
