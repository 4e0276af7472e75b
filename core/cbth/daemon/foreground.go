package daemon

import (
	"context"
	"io"
	"log"
	"os/signal"
	"syscall"

	"github.com/cortexfs/cortexfs/core/cbth/home"
)

// RunForeground runs the daemon until SIGTERM/SIGINT, a stop request or
// idle exit, logging to logw.
func RunForeground(ctx context.Context, h home.Home, version string, logw io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A closed terminal must not kill a detached daemon.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	return Run(ctx, h, version, log.New(logw, "cbth-daemon ", log.LstdFlags|log.LUTC|log.Lmicroseconds))
}
