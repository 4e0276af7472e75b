package ns

import (
	"bufio"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the init passes on to the payload's process
// group. As pid 1 of its namespace the init gets from inside it only the
// signals it has handlers for, and SIGKILL and SIGSTOP only from outside.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// reap waits for every process of the namespace (orphans are re-parented
// to pid 1 and would otherwise stay zombies) until the payload exits, and
// returns the payload's status (128+N for a signal). Signals are forwarded
// to the payload's group; EOF on the spec pipe — the launcher closed it or
// died — kills the payload.
func reap(pid int, life *bufio.Reader) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	go func() {
		for s := range sigs {
			_ = unix.Kill(-pid, s.(syscall.Signal))
		}
	}()
	go func() {
		_, _ = io.Copy(io.Discard, life)
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = unix.Kill(pid, unix.SIGKILL)
	}()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1 // ECHILD: cannot happen while the payload lives
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
