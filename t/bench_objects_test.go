package t

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func init() { addBench("PF2", benchPF2); addBench("PF7", benchPF7) }

// PF2: send→done runs per second on one connection vs a raw JSONL echo
// over a Unix socket measured in the same run.
func benchPF2(t *testing.T, f floors) {
	root := newRoot(t)
	dm := startDaemon(t, root)
	c := dial(t, dm.sock)
	const n = 300
	start := time.Now()
	for i := 0; i < n; i++ {
		// A fresh session every 50 turns keeps history replay short.
		c.send(sendReq("b"+strconv.Itoa(i), "bench"+strconv.Itoa(i/50), "hi"))
		c.untilDone()
	}
	ours := float64(n) / time.Since(start).Seconds()
	raw := rawEchoRate(t, n*5)
	addRow(row{figure: "PF2 socket send->done, one connection", ours: per(ours, "runs/s"), floor: per(raw, "runs/s"),
		goal: ratioAtLeast(0.5), note: "floor: a goroutine echoing JSONL lines on a Unix socket, same run"})
}

// rawEchoRate is the floor: a goroutine echoing JSONL lines on a Unix socket.
func rawEchoRate(t *testing.T, n int) float64 {
	p := filepath.Join(t.TempDir(), "raw.sock")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		rd := bufio.NewReader(s)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return
			}
			var v map[string]any
			json.Unmarshal(line, &v)
			b, _ := json.Marshal(v)
			s.Write(append(b, '\n'))
		}
	}()
	c := dial(t, p)
	start := time.Now()
	for i := 0; i < n; i++ {
		c.send(sendReq("b"+strconv.Itoa(i), "raw", "hi"))
		c.rd.ReadBytes('\n')
	}
	return float64(n) / time.Since(start).Seconds()
}

// PF7: daemon RSS growth while a client that does not read has a run that
// streams 1 GiB (64 KiB × 16384 deltas); the client reads only afterwards.
func benchPF7(t *testing.T, f floors) {
	root := newRoot(t)
	dm := startDaemon(t, root)
	before := rssKiB(t, dm.cmd.Process.Pid)
	c := dial(t, dm.sock)
	word := strings.Repeat("x", 64<<10)
	c.send(map[string]any{"op": "send", "id": "big", "session": "pf7", "input": map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": word}}, "params": map[string]any{"repeat": 16384}}})
	peak := before
	for i := 0; i < 20; i++ { // 2 s of not reading
		time.Sleep(100 * time.Millisecond)
		peak = max(peak, rssKiB(t, dm.cmd.Process.Pid))
	}
	done := make(chan int64)
	go func() {
		var total int64
		for {
			line, err := c.rd.ReadBytes('\n')
			if err != nil {
				done <- -1
				return
			}
			total += int64(len(line))
			if strings.Contains(string(line[:min(len(line), 40)]), `"type":"done"`) {
				done <- total
				return
			}
		}
	}()
	var total int64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case total = <-done:
			break wait
		case <-tick.C:
			peak = max(peak, rssKiB(t, dm.cmd.Process.Pid))
		}
	}
	addRow(row{figure: "PF7 cortexfsd RSS growth, 1 GiB to a non-reading client", ours: mib(peak - before), goal: atMost(16, "MiB"),
		note: fmt.Sprintf("64 KiB x 16384 deltas; the client reads only after a 2 s stall (read %.2f GiB)", float64(total)/(1<<30))})
}

func rssKiB(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	return 0
}
