package cbth

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	corecli "github.com/cortexfs/cortexfs/core/cbth/cli"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
)

// runFlags are `cbth cli run`'s flags.
type runFlags struct {
	bind, codexBin, approval, network, write, policy string
	newThread, steer                                 bool
}

func (c *common) runFlags(r *runFlags, withMode bool) {
	if withMode {
		c.fs.StringVar(&r.bind, "bind-thread-id", "", "existing-thread mode: bind this Codex thread id")
		c.fs.BoolVar(&r.newThread, "new-thread", false, "fresh-thread mode: bind the id of the first thread/started")
	}
	c.fs.StringVar(&r.codexBin, "codex-bin", "", "codex binary (default $CBTH_CODEX_BIN, else codex on PATH)")
	c.fs.StringVar(&r.approval, "session-allows-approval", "auto", "auto|true|false")
	c.fs.StringVar(&r.network, "session-allows-network", "auto", "auto|true|false")
	c.fs.StringVar(&r.write, "session-allows-write-access", "auto", "auto|true|false")
	c.fs.StringVar(&r.policy, "auto-delivery-policy", corecli.PolicyStrictSafe, "strict-safe or trusted-all (explicit opt-in)")
	c.fs.BoolVar(&r.steer, "enable-turn-steer", false, "allow turn/steer (off: an active turn means waiting for idle)")
}

const runDesc = `Run the Codex TUI (codex --remote) in this terminal against a daemon-owned
app-server for a managed session, holding a lease while it runs. Background
job results for the bound thread are delivered with turn/start when the
thread is idle. Arguments after -- go to codex.`

func cliRun(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "cli run",
		"cbth cli run --bind-thread-id ID | --new-thread [FLAGS] [-- CODEX_ARGS...]", runDesc)
	var r runFlags
	c.runFlags(&r, true)
	return runForeground(ctx, c, &r, args)
}

func newCmd(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "new", "cbth new [FLAGS] [-- CODEX_ARGS...]", "Short for cbth cli run --new-thread.\n\n"+runDesc)
	r := runFlags{newThread: true}
	c.runFlags(&r, false)
	return runForeground(ctx, c, &r, args)
}

func resumeCmd(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "resume", "cbth resume ID [FLAGS] [-- CODEX_ARGS...]",
		"Short for cbth cli run --bind-thread-id ID.\n\n"+runDesc)
	var r runFlags
	c.runFlags(&r, false)
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		r.bind, args = args[0], args[1:]
	}
	if r.bind == "" && !hasHelp(args) {
		return fail(env, args, usagef("a thread id is required: cbth resume THREAD_ID (see cbth resume --help)"))
	}
	return runForeground(ctx, c, &r, args)
}

// threadIDRE is a Codex thread id: a UUID, optionally urn:uuid:-prefixed.
// It is compiled on first use, not before main: every applet of the binary
// would pay for it at start.
var threadIDRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(urn:uuid:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

func hasHelp(args []string) bool {
	for _, a := range args {
		if a == "--help" || a == "-h" {
			return true
		}
	}
	return false
}

func runForeground(ctx context.Context, c *common, r *runFlags, args []string) error {
	codexArgs := []string{}
	for i, a := range args {
		if a == "--" {
			args, codexArgs = args[:i], args[i+1:]
			break
		}
	}
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	if r.bind != "" && !threadIDRE().MatchString(r.bind) {
		return c.out().Fail(usagef("%q is not a Codex thread id (a UUID such as the one cbth new prints)", r.bind))
	}
	// The codex TUI needs a terminal; without one it dies mid-start and
	// leaves a session behind. Refuse before anything is created.
	if !cli.IsTTY(os.Stdin) || !cli.IsTTY(os.Stdout) {
		return c.out().Fail(usagef("the Codex TUI needs a terminal on stdin and stdout: run %s in an interactive "+
			"terminal (background work: cbth job submit, cbth task run)", c.fs.Name()))
	}
	environ := os.Environ()
	bin, err := corecli.ResolveCodexBin(r.codexBin, environ)
	if err != nil {
		return c.out().Fail(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return c.out().Fail(err)
	}
	bound, attached := "", false
	f := &corecli.Foreground{Home: h, CodexArgs: codexArgs, Request: corecli.AttachRequest{BindThreadID: r.bind,
		NewThread: r.newThread, CodexBin: bin, Cwd: cwd, Env: environ, AllowsApproval: r.approval,
		AllowsNetwork: r.network, AllowsWriteAccess: r.write, AutoDeliveryPolicy: r.policy,
		EnableTurnSteer: r.steer, PID: int64(os.Getpid())},
		OnBound: func(id string) {
			bound = id
			fmt.Fprintf(c.env.Stderr, "cbth: bound thread id: %s\n", id)
		},
		OnWarning: func(w string) { fmt.Fprintf(c.env.Stderr, "cbth: warning: %s\n", w) },
		OnAttached: func(s *corecli.Session) {
			attached = true
			if s.CapabilityState != "ok" && s.CapabilityReason != nil {
				fmt.Fprintf(c.env.Stderr, "cbth: warning: %s\n", *s.CapabilityReason)
			}
		}}
	code, err := f.Run(ctx)
	if bound == "" {
		bound = r.bind
	}
	if attached && bound != "" {
		// Codex owned the alternate screen while it ran and wiped what was
		// printed then: say it again now that the terminal is ours.
		fmt.Fprintf(c.env.Stderr, "cbth: thread %s; continue it with: cbth resume %s\n", bound, bound)
	}
	if err != nil {
		return c.out().Fail(err)
	}
	if code != 0 {
		return exitStatus(code)
	}
	return nil
}

func printSession(w io.Writer, s *corecli.Session) {
	printKV(w, "managed_session_id", s.ManagedSessionID, "bound_thread_id", s.BoundThreadID,
		"session_state", s.SessionState, "session_epoch", s.SessionEpoch, "capability_state", s.CapabilityState,
		"capability_reason", s.CapabilityReason, "auto_delivery_policy", s.AutoDeliveryPolicy,
		"session_allows", fmt.Sprintf("approval=%s network=%s write_access=%s", tri(s.SessionAllowsApproval),
			tri(s.SessionAllowsNetwork), tri(s.SessionAllowsWriteAccess)),
		"delivery_blocked_reason", s.DeliveryBlockedReason, "app_server_url", s.AppServerURL)
}

func tri(b *bool) string {
	if b == nil {
		return "unknown"
	}
	return fmt.Sprint(*b)
}

func cliSessionList(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "cli session list", "cbth cli session list [--all] [--json]",
		`List managed CLI sessions (retired ones with --all): state, epoch, the bound
thread (cbth resume THREAD continues it) and why delivery is blocked, if it is.`)
	all := c.fs.Bool("all", false, "include retired sessions")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var ss []*corecli.Session
	if err := daemon.Call(ctx, h, corecli.OpList, nil, &ss); err != nil {
		return c.out().Fail(err)
	}
	shown := []*corecli.Session{}
	for _, s := range ss {
		if *all || s.SessionState != corecli.StateRetired {
			shown = append(shown, s)
		}
	}
	return c.out().Result(shown, func(w io.Writer) {
		for _, s := range shown {
			fmt.Fprintf(w, "%s %-8s epoch %d thread %s capability %s\n", s.ManagedSessionID, s.SessionState,
				s.SessionEpoch, deref(s.BoundThreadID), s.CapabilityState)
			if s.DeliveryBlockedReason != nil {
				fmt.Fprintf(w, "    delivery blocked: %s\n", *s.DeliveryBlockedReason)
			}
		}
	})
}

func cliSessionForget(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "cli session forget", "cbth cli session forget ID [--json]",
		`Retire a managed session nothing needs any more: codex never started or has
exited (no live foreground) and its thread has no unresolved delivery work.
Its app-server, if any, is stopped; cbth resume THREAD starts a new one.`)
	pos, h, err := c.parse(args, 1)
	if err != nil {
		return c.out().Fail(err)
	}
	var s corecli.Session
	if err := daemon.Call(ctx, h, corecli.OpForget, corecli.ForgetRequest{ManagedSessionID: pos[0]}, &s); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(&s, func(w io.Writer) { printSession(w, &s) })
}

func deref(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

func cliSessionInspect(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "cli session inspect", "cbth cli session inspect ID | --thread-id ID [--json]",
		"Show a managed session: epoch, state, permission profile, capability and fail-closed reasons.")
	var r corecli.InspectRequest
	c.fs.StringVar(&r.ThreadID, "thread-id", "", "the bound thread instead of a session id")
	pos, h, err := c.parse(args, -100)
	if err != nil {
		return c.out().Fail(err)
	}
	if len(pos) > 0 {
		r.ManagedSessionID = pos[0]
	}
	var v corecli.SessionView
	if err := daemon.Call(ctx, h, corecli.OpInspect, r, &v); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(v, func(w io.Writer) { printSession(w, v.Session) })
}

func cliAppServers(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "cli app-servers", "cbth cli app-servers [--json]", "List the daemon-owned Codex app-servers.")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	as := []corecli.AppServer{} // no daemon, no app-server: never start one to say so
	if _, err := daemon.CallIfRunning(ctx, h, corecli.OpAppServers, nil, &as); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(as, func(w io.Writer) {
		for _, a := range as {
			fmt.Fprintf(w, "%s pid %d %s epoch %d thread %s running=%t\n", a.ManagedSessionID, a.PID, a.URL,
				a.SessionEpoch, deref(a.BoundThreadID), a.Running)
		}
	})
}

func doctorCLI(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "doctor cli", "cbth doctor cli [--codex-bin PATH] [--json]",
		"Probe the codex binary's app-server protocol for what CLI delivery needs; list sessions that fail closed.")
	bin := c.fs.String("codex-bin", "", "codex binary (default $CBTH_CODEX_BIN, else codex on PATH)")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	environ := os.Environ()
	var rep corecli.DoctorReport
	path, err := corecli.ResolveCodexBin(*bin, environ)
	if err != nil {
		// No codex to probe is the first failure, with its fix; the
		// sessions are still listed.
		rep.ProbeError = err.Error()
		if err := daemon.Call(ctx, h, corecli.OpList, nil, &rep.Sessions); err != nil {
			return c.out().Fail(err)
		}
	} else if err := daemon.Call(ctx, h, corecli.OpDoctor, corecli.DoctorRequest{CodexBin: path, Env: environ}, &rep); err != nil {
		return c.out().Fail(err)
	}
	if err := c.out().Result(rep, func(w io.Writer) { printDoctorCLI(w, &rep) }); err != nil {
		return err
	}
	if !rep.OK {
		return exitStatus(1)
	}
	return nil
}

func printDoctorCLI(w io.Writer, rep *corecli.DoctorReport) {
	mark := "ok  "
	if !rep.OK {
		mark = "FAIL"
	}
	detail := "every method, notification and field delivery relies on"
	if rep.ProbeError != "" {
		detail = rep.ProbeError
	} else if rep.Capabilities != nil && !rep.Capabilities.OK() {
		detail = rep.Capabilities.Reason()
	}
	probe := "codex capability probe"
	if rep.CodexBin == "" {
		probe = "codex binary"
	}
	fmt.Fprintf(w, "%s %-36s %s\n", mark, probe, detail)
	if c := rep.Capabilities; c != nil {
		version := c.Version
		if version == "" {
			version = "unknown (codex --version said none)"
		}
		fmt.Fprintf(w, "info %-36s %s (supported: %s or later; probed with experimentalApi=%t)\n", "codex version",
			version, c.MinVersion, c.Experimental)
		fmt.Fprintf(w, "info %-36s thread/turns/list=%t permission profiles=%t turn/steer=%t\n", "codex optional features",
			c.Features.TurnsList, c.Features.PermissionProfile, c.Features.TurnSteer)
	}
	for _, s := range rep.Sessions {
		if s.CapabilityState == "missing" || s.DeliveryBlockedReason != nil {
			fmt.Fprintf(w, "warn %-36s %s %s\n", s.ManagedSessionID, deref(s.CapabilityReason), deref(s.DeliveryBlockedReason))
		}
	}
	for _, b := range rep.Blocked {
		fmt.Fprintf(w, "warn %-36s %s\n", "batch "+b.BatchID, b.Reason)
	}
}
