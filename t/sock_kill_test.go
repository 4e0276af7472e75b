package t

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ackRun is what a client saw of one send before the daemon died: the run
// it started and, if the done frame arrived, its status.
type ackRun struct {
	session, id, run, status string
}

// SIGKILL cortexfsd while 8 connections run turns in sessions of their
// own, then restart it on the same tree: every send whose done a client
// saw is on disk (a retry with the same id replays that run, status
// included, without running it again), every send the client saw start
// is either replayed as done or closed as interrupted, and every session
// log reads back whole (ids increasing, one done per run).
func TestCortexfsdSIGKILLUnderLoadKeepsAcknowledged(t *testing.T) {
	root := newRoot(t)
	dm := startDaemon(t, root)
	for round := range 3 {
		dm = killUnderLoad(t, root, dm, round)
	}
}

// killUnderLoad runs one load, SIGKILL, restart and check cycle and
// returns the restarted daemon.
func killUnderLoad(t *testing.T, root string, dm *daemon, round int) *daemon {
	const conns = 8
	var mu sync.Mutex
	var runs []ackRun
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("unix", dm.sock)
			if err != nil {
				return
			}
			defer nc.Close()
			rd := bufio.NewReader(nc)
			session := fmt.Sprintf("k%d", c)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("r%d-c%d-%d", round, c, i)
				b, _ := json.Marshal(sendReq(id, session, "hi "+id))
				if _, err := nc.Write(append(b, '\n')); err != nil {
					return
				}
				r := ackRun{session: session, id: id}
				for {
					nc.SetReadDeadline(time.Now().Add(20 * time.Second))
					line, err := rd.ReadBytes('\n')
					if err != nil {
						if r.run != "" {
							mu.Lock()
							runs = append(runs, r)
							mu.Unlock()
						}
						return
					}
					var f frame
					json.Unmarshal(line, &f)
					if f.Type == "start" {
						r.run = f.Run
					}
					if f.Type == "done" {
						r.status = f.Status
						break
					}
				}
				mu.Lock()
				runs = append(runs, r)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(400 * time.Millisecond)
	dm.cmd.Process.Kill() // mid-commit: turns are being written and synced
	dm.cmd.Wait()
	close(stop)
	wg.Wait()

	acked := 0
	for _, r := range runs {
		if r.status != "" {
			acked++
		}
	}
	if acked < 20 {
		t.Fatalf("only %d turns were acknowledged before the kill", acked)
	}
	dm = startDaemon(t, root)
	c := dial(t, dm.sock)
	for _, r := range runs {
		c.send(sendReq(r.id, r.session, "hi "+r.id))
		fs := c.untilDone()
		got := fs[len(fs)-1]
		switch {
		case r.status != "" && (got.Run != r.run || got.Status != r.status):
			t.Fatalf("acknowledged send %s/%s (run %s, %s) came back after SIGKILL as run %s, %s", r.session, r.id, r.run,
				r.status, got.Run, got.Status)
		case r.status != "" && len(fs) < 3:
			t.Fatalf("replay of acknowledged %s holds only %d frames", r.id, len(fs))
		case got.Run == r.run && got.Status != "ok" && got.Status != "error":
			t.Fatalf("unacknowledged send %s: its run %s came back %q", r.id, r.run, got.Status)
		}
	}
	// Every session log reads back whole: resume from the first frame and
	// read until the daemon has had nothing more to say for a while (a
	// pong could overtake the replay, so it is no end marker).
	for s := range conns {
		nc, err := net.Dial("unix", dm.sock)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"op": "resume", "session": fmt.Sprintf("k%d", s), "after": "0"})
		nc.Write(append(b, '\n'))
		rd := bufio.NewReaderSize(nc, 64<<10)
		var last uint64
		open, done := map[string]bool{}, map[string]bool{}
		var prev frame
		for {
			nc.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
			line, err := rd.ReadBytes('\n')
			if err != nil {
				break
			}
			var f frame
			if err := json.Unmarshal(line, &f); err != nil {
				t.Fatalf("session k%d: bad frame %q", s, line)
			}
			id, err := strconv.ParseUint(f.ID, 10, 64)
			if err != nil || id <= last {
				t.Fatalf("session k%d: event id %q after %d", s, f.ID, last)
			}
			last = id
			switch f.Type {
			case "start":
				open[f.Run] = true
			case "done":
				// A run the crash cut before its start frame is closed on
				// restart by the server's error and done frames alone.
				cut := prev.Type == "error" && prev.Run == f.Run && prev.Code == "EIO"
				if done[f.Run] || (!open[f.Run] && !cut) {
					t.Fatalf("session k%d: done of run %s without its start, or twice", s, f.Run)
				}
				done[f.Run] = true
				delete(open, f.Run)
			}
			prev = f
		}
		nc.Close()
		if len(open) != 0 {
			t.Fatalf("session k%d: runs without a done after restart: %v", s, open)
		}
	}
	t.Logf("round %d: %d sends, %d acknowledged before SIGKILL; all acknowledged ones replayed", round, len(runs), acked)
	return dm
}
