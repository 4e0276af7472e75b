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
	"sync"
	"testing"
	"time"
)

func init() {
	addBench("SOCKD", benchSockd)
	addBench("MEM", benchIdleMemory)
}

// sockTurns runs n send->done turns of 1-token echo on one connection of
// its own, rotating sessions every 50 turns (history replay stays short),
// and returns how many finished.
func sockTurns(path, tag string, n int) (int, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rd := bufio.NewReaderSize(c, 64<<10)
	for i := range n {
		b, _ := json.Marshal(sendReq(tag+strconv.Itoa(i), tag+"-"+strconv.Itoa(i/50), "hi"))
		if _, err := c.Write(append(b, '\n')); err != nil {
			return i, err
		}
		for {
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return i, err
			}
			if strings.Contains(string(line), `"type":"done"`) {
				break
			}
		}
	}
	return n, nil
}

// fsyncFloor does what the daemon makes durable for one run with no
// protocol around it: one send record appended and fsync'd, then the
// run's frames appended and fsync'd, in a session directory of its own.
func fsyncFloor(t *testing.T, n int) float64 {
	dir := t.TempDir()
	sends, err := os.OpenFile(filepath.Join(dir, "sends.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer sends.Close()
	events, err := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	rec := []byte(`{"id":"b1","run":"r01M83XF3VF2VHVZQMTHAHSKCRC","input":{"messages":[{"role":"user","content":"hi"}]}}` + "\n")
	frames := []byte(strings.Repeat(`{"type":"delta","run":"r01M83XF3VF2VHVZQMTHAHSKCRC","text":"hi"}`+"\n", 5))
	start := time.Now()
	for range n {
		if _, err := sends.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := sends.Sync(); err != nil {
			t.Fatal(err)
		}
		if _, err := events.Write(frames); err != nil {
			t.Fatal(err)
		}
		if err := events.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// SOCKD: cortexfsd send->done with 1-token echo turns, on one connection
// against the same fsyncs without a protocol, and on 16 connections at
// once.
func benchSockd(t *testing.T, f floors) {
	root := newRoot(t)
	dm := startDaemon(t, root)
	// A tree in use is older than a second; a model whose control files
	// changed within the last second is read again at every turn (see
	// tree.TrustStamp), which a tree made just now would measure instead.
	time.Sleep(1100 * time.Millisecond)
	const one = 300
	start := time.Now()
	if n, err := sockTurns(dm.sock, "one", one); err != nil {
		t.Fatalf("after %d turns: %v", n, err)
	}
	ours := float64(one) / time.Since(start).Seconds()
	floor := fsyncFloor(t, one)
	addRow(row{figure: "SOCKD cortexfsd send->done, one connection", ours: per(ours, "runs/s"), floor: per(floor, "runs/s"),
		goal: ratioAtLeast(0.8), note: "floor: the same two fsyncs per run (send record, then the run's frames) " +
			"in two files, no protocol, same filesystem"})

	const conns, each = 16, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	done, failed := 0, 0
	start = time.Now()
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := sockTurns(dm.sock, fmt.Sprintf("c%d", c), each)
			mu.Lock()
			done += n
			if err != nil {
				failed++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	agg := float64(done) / time.Since(start).Seconds()
	addRow(row{figure: "SOCKD cortexfsd 16 connections, aggregate", ours: per(agg, "runs/s"), floor: per(floor, "runs/s"),
		goal: atLeast(5000, "runs/s"), note: fmt.Sprintf("1-token echo turns, %d per connection, each connection its own "+
			"sessions; %d connections failed; floor as above", each, failed)})
}

// MEM: cortexfsd's resident memory with 64 sessions used once and 500
// idle connections open.
func benchIdleMemory(t *testing.T, f floors) {
	root := newRoot(t)
	dm := startDaemonArgs(t, root, "--max-conns-per-uid", "2000")
	base := rssKiB(t, dm.cmd.Process.Pid)
	for s := range 64 {
		if n, err := sockTurns(dm.sock, fmt.Sprintf("m%d-", s), 1); err != nil {
			t.Fatalf("session %d: %d turns, %v", s, n, err)
		}
	}
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range 500 {
		c, err := net.Dial("unix", dm.sock)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	// Let the daemon accept them all and settle.
	time.Sleep(2 * time.Second)
	rss := rssKiB(t, dm.cmd.Process.Pid)
	addRow(row{figure: "MEM cortexfsd RSS, 500 idle connections + 64 sessions", ours: mib(rss), goal: atMost(64, "MiB"),
		note: fmt.Sprintf("VmRSS after 64 one-turn sessions and 500 open idle connections; %.1f MiB right after start", float64(base)/1024)})
}
