package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/home"
)

// Foreground is one `cbth cli run`: attach, run the codex TUI against the
// daemon-owned app-server in this terminal, hold the lease, detach.
type Foreground struct {
	Home      home.Home
	Request   AttachRequest
	CodexArgs []string
	// OnBound is called once with the thread id of a --new-thread session.
	OnBound func(threadID string)
	// OnWarning receives drift and other warnings for stderr.
	OnWarning func(string)
	// OnAttached is called with the session before codex starts.
	OnAttached func(*Session)
}

// Run returns codex's exit status.
func (f *Foreground) Run(ctx context.Context) (int, error) {
	c, err := daemon.Connect(ctx, f.Home)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var res LeaseResult
	if err := c.Call(ctx, OpAttach, f.Request, &res); err != nil {
		return 0, err
	}
	s := res.Session
	if f.OnAttached != nil {
		f.OnAttached(s)
	}
	if s.AppServerURL == nil {
		return 0, abi.Errorf(abi.EIO, "managed session %s has no app-server", s.ManagedSessionID)
	}
	args := []string{"--remote", *s.AppServerURL}
	if f.Request.BindThreadID != "" {
		args = append(args, "resume", f.Request.BindThreadID)
	}
	cmd := exec.Command(f.Request.CodexBin, append(args, f.CodexArgs...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Dir, cmd.Env = f.Request.Cwd, f.Request.Env
	// The terminal's signals are the TUI's; the wrapper only waits.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Reset(syscall.SIGINT, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		return 0, abi.Errorf(abi.EIO, "cannot start %s: %v", f.Request.CodexBin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	werr := f.hold(ctx, c, s, done)
	code := 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		code = ee.ExitCode()
	} else if werr != nil {
		return 0, werr
	}
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Call(dctx, OpDetach, LeaseRequest{ManagedSessionID: s.ManagedSessionID, LeaseID: res.LeaseID}, nil)
	return code, nil
}

// hold renews the lease until codex exits; a --new-thread session reports
// its bound thread id as soon as the daemon has it.
func (f *Foreground) hold(ctx context.Context, c interface {
	Call(ctx context.Context, op string, args, out any) error
}, s *Session, done <-chan error) error {
	bound := s.BoundThreadID != nil
	lease := LeaseRequest{ManagedSessionID: s.ManagedSessionID, LeaseID: *s.LeaseID}
	for {
		every := 2 * time.Second
		if !bound {
			every = 100 * time.Millisecond
		}
		select {
		case err := <-done:
			return err
		case <-time.After(every):
		}
		var r LeaseResult
		if err := c.Call(ctx, OpRenew, lease, &r); err != nil {
			if f.OnWarning != nil {
				f.OnWarning("lease renewal failed: " + err.Error())
			}
			continue
		}
		for _, w := range r.Warnings {
			if f.OnWarning != nil {
				f.OnWarning(w)
			}
		}
		if !bound && r.Session != nil && r.Session.BoundThreadID != nil {
			bound = true
			if f.OnBound != nil {
				f.OnBound(*r.Session.BoundThreadID)
			}
		}
	}
}
