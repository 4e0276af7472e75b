// Package cortexfsd is the CortexFS daemon: it serves the socket entry of
// every model object that declares .d/session = socket.
package cortexfsd

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/objd"
	"github.com/cortexfs/cortexfs/core/toolsrc"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/sock"
)

func init() {
	applets.Register(applets.Applet{Name: "cortexfsd", Summary: "CortexFS daemon: model sockets with durable sessions; MCP servers and plugins as tools", Run: run})
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "cortexfsd", "cortexfsd [--root DIR]",
		`Serve <model>.sock for every model (system tier and home tiers) whose
.d/session is "socket". Sessions are private to the connecting uid (from
SO_PEERCRED) and kept under home/<uid>/session/model/, so a restart keeps
their history. Stale socket files are replaced; a socket served by another
daemon is EBUSY. SIGTERM or SIGINT stops cleanly; SIGHUP rescans the tree.
Runs in the foreground and logs to stderr.

Each peer uid (root exempt from the connection cap) is bounded: open
connections per socket, idle time, bytes of one session's log and of all
its session logs; past a quota a send is refused and a run stops with
ENOSPC, its log ending with its done frame. 0 takes the default shown,
-1 switches a limit off.

It also serves the tool sources of every tier it may (as root: the system
tier and each home/<uid>, whose sources run as that uid; otherwise the
tiers this user owns): MCP servers from <tier>/.mcp.json kept warm and
restarted with backoff, native plugins from <tier>/plugins/ in plugin host
processes; their tools are projected as tool/mcp.<server>.<tool> and
tool/plugin.<plugin>.<tool>, and calls are served on <tier>/.tools.sock.
Configuration edits are picked up within a second.`)
	root := fs.String("root", "", "CortexFS root (default $CTX_ROOT, then /ctx)")
	conns := fs.Int("max-conns-per-uid", sock.DefaultLimits.MaxConnsPerUID, "open connections per uid and socket")
	idle := fs.Duration("idle-timeout", sock.DefaultLimits.IdleTimeout, "close a connection idle (or not reading) this long")
	sessQuota := fs.Int64("session-quota", sock.DefaultLimits.MaxSessionBytes, "bytes of one session's log")
	uidQuota := fs.Int64("uid-quota", sock.DefaultLimits.MaxUIDBytes, "bytes of all of one uid's session logs")
	_, err := cli.ParseN(fs, args, 0)
	if err != nil {
		return err
	}
	limits := sock.Limits{MaxConnsPerUID: *conns, IdleTimeout: *idle, MaxSessionBytes: *sessQuota, MaxUIDBytes: *uidQuota}
	r := tree.Root(tree.DefaultRoot())
	if *root != "" {
		r = tree.Root(strings.TrimRight(*root, "/"))
	}
	if err := r.Check(); err != nil {
		return err // nothing to serve: say so instead of waiting for a signal
	}
	logger := log.New(env.Stderr, "cortexfsd: ", log.LstdFlags|log.LUTC)
	stop := make(chan os.Signal, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(stop)
	defer signal.Stop(hup)
	tools := &toolsrc.Manager{Root: r, Logf: logger.Printf}
	toolsCtx, stopTools := context.WithCancel(ctx)
	toolsDone := make(chan error, 1)
	go func() { toolsDone <- tools.Run(toolsCtx) }()
	defer func() {
		stopTools()
		<-toolsDone
	}()
	for {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- (&objd.Daemon{Root: r, Logf: logger.Printf, Limits: limits}).Run(runCtx) }()
		select {
		case err := <-done:
			cancel()
			return err
		case s := <-stop:
			logger.Printf("%v: shutting down", s)
			cancel()
			return <-done
		case <-hup:
			logger.Printf("SIGHUP: rescanning %s", r)
			go tools.RefreshAll(ctx)
			cancel()
			if err := <-done; err != nil {
				return fmt.Errorf("restart after SIGHUP: %w", err)
			}
		}
	}
}
