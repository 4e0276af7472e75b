package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	line := "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	st, err := ParseStat(1234, []byte(line))
	if err != nil || st.PPID != 1 || st.PGRP != 1234 || st.Session != 1234 || st.StartTime != 987654 || st.State != "S" {
		t.Fatalf("ParseStat = %+v %v", st, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S a b c d e f g h i j k l m n o p q r s t u",
		"7 (x) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0"} {
		if _, err := ParseStat(1, []byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) accepted", bad)
		}
	}
	self, err := ReadStat(os.Getpid())
	if err != nil || self.StartTime == 0 || self.PPID != os.Getppid() {
		t.Fatalf("own stat %+v %v", self, err)
	}
	if BootID() == "" {
		t.Error("no boot id")
	}
}

// StartedBy against real processes: this one started by now; a process
// started now did not start a second ago; no process holds an unused pid.
func TestStartedBy(t *testing.T) {
	if !StartedBy(os.Getpid(), time.Now()) {
		t.Error("this process did not start by now")
	}
	before := time.Now().Add(-Slack - time.Second)
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if StartedBy(cmd.Process.Pid, before) {
		t.Error("a process started now counts as started before Slack and a second ago")
	}
	if !StartedBy(cmd.Process.Pid, time.Now()) {
		t.Error("a process started just now does not count as started by now")
	}
	cmd.Process.Kill()
	time.Sleep(50 * time.Millisecond) // a zombie until reaped: not started by anything
	if StartedBy(cmd.Process.Pid, time.Now()) {
		t.Error("a zombie counts as a live process")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 5 0 0"))
	f.Add([]byte("7 ()) ) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 99 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStat(42, b)
		if err == nil && st.PID != 42 {
			t.Fatalf("pid %d", st.PID)
		}
	})
}
