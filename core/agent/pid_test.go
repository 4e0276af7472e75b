package agent

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestStatStartTime(t *testing.T) {
	for _, c := range []struct {
		line string
		want uint64
		ok   bool
	}{
		{"1234 (sleep) S 1 1234 1234 0 -1 4194560 92 0 0 0 0 0 0 0 20 0 1 0 98765 2273280 128 18446744073709551615", 98765, true},
		// A command name with spaces and parentheses of its own.
		{"7 (a) b) (c d) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0", 42, true},
		{"7 (x) R 1 2 3", 0, false},
		{"no parenthesis at all", 0, false},
		{"7 (x) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0", 0, false},
	} {
		got, ok := statStartTime([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("statStartTime(%q) = %d, %v; want %d, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// startedBy against real processes: this one started before now, a
// process started after a given instant did not start by it.
func TestStartedBy(t *testing.T) {
	if !startedBy(os.Getpid(), time.Now()) {
		t.Error("this process did not start by now")
	}
	before := time.Now().Add(-time.Second)
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if startedBy(cmd.Process.Pid, before) {
		t.Errorf("a process started now counts as started a second ago")
	}
	if !startedBy(cmd.Process.Pid, time.Now()) {
		t.Errorf("a process started just now does not count as started by now")
	}
	if startedBy(1<<22+1, time.Now()) {
		t.Errorf("no such pid: %d", 1<<22+1)
	}
}

func FuzzStatStartTime(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"))
	f.Add([]byte("7 (a) b) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		statStartTime(b) // must not panic
	})
}
