// Package proc identifies processes by more than their pid, from /proc:
// a pid is reused once its process is reaped, so anything that signals a
// process named in a file or a database row proves first that the pid
// still names the process it recorded (same start time, same boot) or
// one that started no later than the record was written.
package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Stat is what /proc/PID/stat tells about a process: enough to prove a pid
// still names the process recorded (same start time) and to walk a tree.
type Stat struct {
	PID       int
	State     string
	PPID      int
	PGRP      int
	Session   int
	StartTime uint64 // clock ticks after boot
}

// ReadStat parses /proc/PID/stat; the command name may hold spaces and
// parentheses, so fields are counted from the last ')'.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(pid, b)
}

// ParseStat parses the content of /proc/PID/stat.
func ParseStat(pid int, b []byte) (Stat, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("stat of %d: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("stat of %d: %d fields", pid, len(f)+2)
	}
	st := Stat{PID: pid, State: f[0]}
	var err error
	for _, p := range []struct {
		dst *int
		i   int
	}{{&st.PPID, 1}, {&st.PGRP, 2}, {&st.Session, 3}} {
		if *p.dst, err = strconv.Atoi(f[p.i]); err != nil {
			return Stat{}, fmt.Errorf("stat of %d: field %d: %v", pid, p.i+3, err)
		}
	}
	if st.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat of %d: starttime: %v", pid, err)
	}
	return st, nil
}

// BootID identifies this boot; start times are only comparable within one.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// clockTick is USER_HZ, the unit of starttime: 100 on every Linux
// architecture (the kernel converts its own HZ for userspace).
const clockTick = time.Second / 100

// Started is when the process with pid started, on the wall clock. Its
// start is field 22 of /proc/PID/stat, in clock ticks since boot on the
// boot-time clock (Linux >= 5.5; before that the monotonic clock, which
// only makes a process look older after a suspend). The boot instant on
// the wall clock is the realtime clock minus the boot-time clock.
func Started(pid int) (time.Time, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return time.Time{}, err
	}
	var rt, bt unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &rt); err != nil {
		return time.Time{}, err
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &bt); err != nil {
		return time.Time{}, err
	}
	boot := time.Unix(rt.Unix()).Add(-time.Duration(bt.Nano()))
	return boot.Add(time.Duration(st.StartTime) * clockTick), nil
}

// Slack is how much later than a record its process may seem to have
// started and still be the one recorded. It absorbs the clocks'
// granularity (file and row times come from coarse clocks, a start time is
// in clock ticks) and a step of the wall clock between the record and the
// check (the start is converted at check time; a clock stepped forward by
// NTP makes a process look that much younger). A stranger must have got
// the pid within Slack of the record to pass: the recorded process held
// the pid then, unless it died within Slack of writing its record.
const Slack = 2 * time.Second

// StartedBy reports whether a live, non-zombie process holds pid and
// started no later than t (plus Slack): the test for a pid recorded at t
// by or after the start of its process. A process that got the pid after
// the recorded one exited started after t.
func StartedBy(pid int, t time.Time) bool {
	st, err := ReadStat(pid)
	if err != nil || st.State == "Z" {
		return false
	}
	start, err := Started(pid)
	return err == nil && !start.After(t.Add(Slack))
}
