package cli

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/proc"
)

// decoy starts a process whose command line says app-server, in a group
// of its own, as a pid reused by another codex app-server would look.
func decoy(t *testing.T) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("sleep(1) stands in for an app-server here and is not on PATH: %v", err)
	}
	cmd := &exec.Cmd{Path: sleep, Args: []string{"codex-app-server-decoy", "60"},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// A daemon restart ends the app-server a previous daemon recorded, and
// only that one: a process that holds the recorded pid but started after
// the row's app_server_started_at got the pid later (the recorded one
// exited) and is left alone, whatever its command line says.
func TestStopPIDOnlyTheRecordedProcess(t *testing.T) {
	stranger := decoy(t)
	pid := int64(stranger.Process.Pid)
	earlier := store.TS(time.Now().Add(-time.Minute))
	stopPID(pid, &earlier)
	stopPID(pid, nil)
	time.Sleep(100 * time.Millisecond)
	// A killed child stays a zombie until waited for: read its state.
	if st, err := proc.ReadStat(stranger.Process.Pid); err != nil || st.State == "Z" {
		t.Fatalf("stopPID killed a process that started after the app-server it recorded (%+v, %v)", st, err)
	}

	recorded := decoy(t)
	now := store.TS(time.Now())
	stopPID(int64(recorded.Process.Pid), &now)
	done := make(chan error, 1)
	go func() { done <- recorded.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stopPID left the app-server it recorded running")
	}
}
