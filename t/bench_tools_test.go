package t

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func init() { addBench("TS1", benchMCPCall); addBench("TS2", benchNativeCall) }

// TS1 (issue 13): one call of mcp.everything.echo through the runner with
// the server kept warm by cortexfsd, against the same server called
// directly over its stdio by a tiny client (a small static program that
// sends the tools/call line to a relay holding the warm server's stdio and
// prints the answer): both pay one process start per call.
func benchMCPCall(t *testing.T, f floors) {
	root := newRoot(t)
	mustOK(t, sh(t, "ctx", "mcp", "add", "everything", "--root", root, "--", everythingBin(t)))
	toolDaemon(t, root)
	waitSource(t, root, "everything", "ready")
	echo := filepath.Join(root, "tool", "mcp.everything.echo")
	ours := medianWall(t, 60, echo, `{"message":"bench"}`)

	relay, inproc := stdioRelay(t, everythingBin(t))
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench"}}}`
	direct := medianWall(t, 60, mcpFixture(t), "call", relay, req)
	addRow(row{figure: "TS1 mcp.everything.echo via runner, warm server", ours: ms(ours), floor: ms(direct), goal: ratioAtMost(1.5),
		note: "floor: a tiny static client sends the same tools/call line to a relay holding the warm server's stdio; both start one process per call"})
	addRow(row{figure: "TS1 same call in process over the server's stdio", ours: ms(inproc), note: "no process start: what the server itself costs"})
}

// TS2 (issue 13): a native plugin tool (C, through the plugin host) against
// the built-in fs.read, both through the runner.
func benchNativeCall(t *testing.T, f floors) {
	root := newRoot(t)
	mustOK(t, sh(t, "ctx", "plugin", "install", cPluginDir(t, "hello-c", ""), "--root", root))
	toolDaemon(t, root)
	waitSource(t, root, "hello-c", "ready")
	native := medianWall(t, 60, filepath.Join(root, "tool", "plugin.hello-c.word_count"), `{"text":"one two three"}`)
	builtin := medianWall(t, 60, filepath.Join(root, "tool", "fs.read"), `{"path":"`+filepath.Join(root, "tool", "fs.read.d", "name")+`"}`)
	addRow(row{figure: "TS2 native plugin tool via runner (C, plugin host)", ours: ms(native), floor: ms(builtin),
		note: "floor: the built-in fs.read through the runner"})
	addRow(row{figure: "TS2 built-in fs.read via runner", ours: ms(builtin), floor: ms(f.exec), note: "floor: cortexfs --version"})
}

// stdioRelay starts a server, initializes it over its stdio, and serves a
// Unix socket where each connection sends one JSON-RPC request line and
// gets the server's answer line. It also returns the median in-process
// round trip of 200 echo calls.
func stdioRelay(t *testing.T, server string) (sock string, inproc time.Duration) {
	t.Helper()
	cmd := exec.Command(server)
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(outPipe)
	var mu sync.Mutex
	id := 100
	// roundTrip sends one request (its id replaced) and returns the answer
	// with that id, skipping notifications.
	roundTrip := func(line []byte) []byte {
		mu.Lock()
		defer mu.Unlock()
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			return nil
		}
		id++
		m["id"] = id
		b, _ := json.Marshal(m)
		in.Write(append(b, '\n'))
		for {
			resp, err := out.ReadBytes('\n')
			if err != nil {
				return nil
			}
			var r struct {
				ID any `json:"id"`
			}
			if json.Unmarshal(resp, &r) == nil && r.ID == float64(id) {
				return resp
			}
		}
	}
	if roundTrip([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)) == nil {
		t.Fatal("relay: initialize failed")
	}
	in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench"}}}`)
	var ds []time.Duration
	for i := 0; i < 200; i++ {
		start := time.Now()
		if roundTrip(req) == nil {
			t.Fatal("relay: echo failed")
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	sock = filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadBytes('\n')
				if err != nil && err != io.EOF {
					return
				}
				c.Write(roundTrip(line))
			}()
		}
	}()
	return sock, ds[len(ds)/2]
}
