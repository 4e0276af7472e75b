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
	"github.com/cortexfs/cortexfs/core/tree"
)

func init() {
	applets.Register(applets.Applet{Name: "cortexfsd", Summary: "CortexFS daemon: serves model sockets (<model>.sock) with durable sessions", Run: run})
}

func run(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "cortexfsd", "cortexfsd [--root DIR]",
		`Serve <model>.sock for every model (system tier and home tiers) whose
.d/session is "socket". Sessions are private to the connecting uid (from
SO_PEERCRED) and kept under home/<uid>/session/model/, so a restart keeps
their history. Stale socket files are replaced; a socket served by another
daemon is EBUSY. SIGTERM or SIGINT stops cleanly; SIGHUP rescans the tree.
Runs in the foreground and logs to stderr.`)
	root := fs.String("root", "", "CortexFS root (default $CTX_ROOT, then /ctx)")
	_, err := cli.ParseN(fs, args, 0)
	if err != nil {
		return err
	}
	r := tree.Root(tree.DefaultRoot())
	if *root != "" {
		r = tree.Root(strings.TrimRight(*root, "/"))
	}
	logger := log.New(env.Stderr, "cortexfsd: ", log.LstdFlags|log.LUTC)
	stop := make(chan os.Signal, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(stop)
	defer signal.Stop(hup)
	for {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- (&objd.Daemon{Root: r, Logf: logger.Printf}).Run(runCtx) }()
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
			cancel()
			if err := <-done; err != nil {
				return fmt.Errorf("restart after SIGHUP: %w", err)
			}
		}
	}
}
