package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/proc"
	"github.com/cortexfs/cortexfs/wire/codex"
)

// appServer is one daemon-owned `codex app-server --listen
// ws://127.0.0.1:0`, in its own process group so the npm launcher and the
// native binary it spawns stop together.
type appServer struct {
	cmd     *exec.Cmd
	pid     int
	url     string
	exited  chan struct{}
	mu      sync.Mutex
	stderr  []string
	stopped bool
}

// startAppServer starts the app-server in cwd, learns its loopback URL from
// stderr and waits for /readyz.
func startAppServer(ctx context.Context, bin, cwd string, env []string) (*appServer, error) {
	cmd := exec.Command(bin, "app-server", "--listen", "ws://127.0.0.1:0")
	cmd.Dir, cmd.Env = cwd, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	cmd.Stdin, cmd.Stdout = null, nil
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s app-server: %w", bin, err)
	}
	a := &appServer{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		u, _ := codex.ScanListenURL(pipe, a.note)
		urlc <- u
		if u == "" {
			io.Copy(io.Discard, pipe)
		}
	}()
	go func() { cmd.Wait(); close(a.exited) }()
	select {
	case a.url = <-urlc:
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	if a.url == "" {
		a.stop()
		return nil, fmt.Errorf("app-server did not report its listen URL: %s", a.tail())
	}
	if err := waitReady(ctx, a); err != nil {
		a.stop()
		return nil, err
	}
	return a, nil
}

func (a *appServer) note(line string) {
	a.mu.Lock()
	a.stderr = append(a.stderr, line)
	if len(a.stderr) > 20 {
		a.stderr = a.stderr[len(a.stderr)-20:]
	}
	a.mu.Unlock()
}

func (a *appServer) tail() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.stderr, " | ")
}

// waitReady polls GET /readyz (no Origin header) until 200.
func waitReady(ctx context.Context, a *appServer) error {
	ready := "http://" + strings.TrimPrefix(a.url, "ws://") + "/readyz"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-a.exited:
			return fmt.Errorf("app-server exited before ready: %s", a.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("app-server %s not ready within 30s", a.url)
}

// alive reports the process group still running.
func (a *appServer) alive() bool {
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// stop ends the process group: SIGTERM, then SIGKILL after 3s.
func (a *appServer) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	_ = syscall.Kill(-a.pid, syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(3 * time.Second):
	}
	// The native binary may outlive its launcher; the group goes in any case.
	_ = syscall.Kill(-a.pid, syscall.SIGKILL)
}

// stopPID ends an app-server group a previous daemon left behind, only
// when the pid still names the process it recorded: /proc shows a codex
// app-server there that started no later than the row's
// app_server_started_at (written just after the start). A process that
// got the pid after the recorded one exited started later, and a row
// without that time proves nothing: neither is signalled.
func stopPID(pid int64, startedAt *string) {
	if startedAt == nil {
		return
	}
	at, err := store.ParseTS(*startedAt)
	if err != nil {
		return
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(b), "app-server") || !proc.StartedBy(int(pid), at) {
		return
	}
	_ = syscall.Kill(-int(pid), syscall.SIGKILL)
}
