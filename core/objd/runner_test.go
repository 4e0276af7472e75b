package objd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// turn sends one socket turn and returns its frame types and the done
// status (or the error code).
func turn(t *testing.T, path, id string) (types []string, end string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := json.Marshal(map[string]any{"op": "send", "id": id, "session": "s", "input": "hi"})
	c.Write(append(b, '\n'))
	rd := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("turn %s: %v after %v", id, err, types)
		}
		var f struct{ Type, Status, Code string }
		json.Unmarshal([]byte(line), &f)
		types = append(types, f.Type)
		if f.Type == "error" {
			end = f.Code
		}
		if f.Type == "done" {
			if end == "" {
				end = f.Status
			}
			return types, end
		}
	}
}

// The daemon keeps a model it read while nothing that steers it changed,
// and an edit or a trust violation still applies at the very next turn:
// a rewritten .d/default changes what the echo does, a .d/default made
// writable by others is EACCES, and undoing that serves again.
func TestModelReadOncePerChange(t *testing.T) {
	o := echoObject(t)
	d := &Daemon{Root: o.Root, Logf: func(string, ...any) {}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	path := o.Path + ".sock"
	for range 200 {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(1100 * time.Millisecond) // older than the stamp margin: the model is kept
	deltas := func(types []string) int { return strings.Count(strings.Join(types, " "), "delta") }
	for i := range 2 {
		if types, end := turn(t, path, fmt.Sprint("a", i)); end != "ok" || deltas(types) != 1 {
			t.Fatalf("turn %d: %v %s", i, types, end)
		}
	}
	if err := os.WriteFile(o.Ctl("default"), []byte("repeat=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if types, end := turn(t, path, "b"); end != "ok" || deltas(types) != 3 {
		t.Fatalf("after .d/default says repeat=3: %v %s", types, end)
	}
	os.Chmod(o.Ctl("default"), 0o666)
	if _, end := turn(t, path, "c"); end != "EACCES" {
		t.Fatalf("a .d/default writable by others still served: %s", end)
	}
	os.Chmod(o.Ctl("default"), 0o644)
	if types, end := turn(t, path, "d"); end != "ok" || deltas(types) != 3 {
		t.Fatalf("trusted again: %v %s", types, end)
	}
}
