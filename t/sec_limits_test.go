package t

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// words is n distinct words (the echo model counts words as tokens).
func words(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(prefix + strconv.Itoa(i))
	}
	return b.String()
}

// Issue 15, defect 6: a session's history grew without bound (memory, and
// each turn replayed everything). What a turn replays is now bounded in
// turns and bytes — history_turns and history_bytes in .d/default, with
// defaults — and read from disk, so a turn's input stops growing.
func TestSecuritySessionHistoryBounded(t *testing.T) {
	root := newRoot(t)
	def := filepath.Join(root, "model/debug/echo.d/default")
	if err := os.WriteFile(def, []byte("history_turns=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, root)
	c := dial(t, d.sock)
	var tok []int
	for i := range 6 {
		c.send(sendReq("m"+strconv.Itoa(i), "s", words("w", 10)))
		fs := c.untilDone()
		if last := fs[len(fs)-1]; last.Status != "ok" {
			t.Fatalf("turn %d: %s", i, types(fs))
		}
		tok = append(tok, inTok(fs))
	}
	// 10 words in, 10 echoed back per turn: turn i replays min(i, 3) turns.
	for i, want := range []int{10, 30, 50, 70, 70, 70} {
		if tok[i] != want {
			t.Errorf("history_turns=3: turn %d input_tokens %d, want %d (all: %v)", i, tok[i], want, tok)
		}
	}

	// The default byte bound: 700 KB inputs (one frame each, too big to
	// be echoed back as a message) replay at most 4 MiB of history.
	if err := os.WriteFile(def, []byte("# defaults\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := words("x", 150000)[:700<<10]
	big = big[:strings.LastIndexByte(big, ' ')]
	per := len(strings.Fields(big))
	for i := range 8 {
		c.send(sendReq("b"+strconv.Itoa(i), "big", big))
		fs := c.untilDone()
		if last := fs[len(fs)-1]; last.Status != "ok" {
			t.Fatalf("big turn %d: %s", i, types(fs))
		}
		if got, max := inTok(fs), per*(1+(4<<20)/(700<<10)); got > max {
			t.Errorf("big turn %d: input_tokens %d, more than the 4 MiB default allows (%d)", i, got, max)
		}
	}
	if err := os.WriteFile(def, []byte("history_turns=-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.send(sendReq("bad", "s", "x"))
	if fs := c.untilDone(); !strings.Contains(types(fs), "error") {
		t.Errorf("an invalid history_turns was accepted: %s", types(fs))
	}
}

// startDaemonArgs is startDaemon with extra cortexfsd flags.
func startDaemonArgs(t *testing.T, root string, args ...string) *daemon {
	t.Helper()
	d := &daemon{root: root, sock: filepath.Join(root, "model/debug/echo.sock")}
	d.cmd = exec.Command(applet("cortexfsd"), append([]string{"--root", root}, args...)...)
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", d.sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			d.cmd.Process.Kill()
			t.Fatalf("cortexfsd did not serve %s", d.sock)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { d.stop(t) })
	return d
}

// Issue 15, defect 7: one local user exhausted the daemon's descriptors
// with idle connections (root's ping then timed out) and filled the disk
// with one send (params.repeat near 2^30). Connections are capped per uid
// (root exempt), idle ones are closed, session logs have quotas (ENOSPC,
// the log still ends with done), and the debug driver's parameters are
// capped.
func TestSecurityDaemonResourceLimits(t *testing.T) {
	a := attacker(t, "ctxt15b")
	base := publicDir(t, actor{})
	root := filepath.Join(base, "ctx")
	mustOK(t, sh(t, "ctx", "init", "--root", root, "--runner", applet("cortexfs-object-runner")))
	d := startDaemonArgs(t, root, "--max-conns-per-uid", "8", "--idle-timeout", "2s", "--session-quota", "1048576")
	home := filepath.Join(root, "home", strconv.Itoa(a.uid()))
	os.MkdirAll(home, 0o755)
	chownTree(t, home, a)

	// The attacker opens 40 connections as its own uid, and pings on
	// each at once (before the idle timeout can free any).
	conns := dialAs(t, a, d.sock, 40)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	pongs, busy := 0, 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(`{"op":"ping"}` + "\n"))
		b := make([]byte, 256)
		n, _ := c.Read(b)
		switch s := string(b[:n]); {
		case strings.Contains(s, `"EBUSY"`):
			busy++
		case strings.Contains(s, `"pong"`):
			pongs++
		}
	}
	if pongs > 8 || busy < len(conns)-8 {
		t.Errorf("uid %d: %d connections answered, %d refused EBUSY of %d; the cap is 8", a.uid(), pongs, busy, len(conns))
	}
	if os.Geteuid() == 0 {
		c := dial(t, d.sock)
		c.send(map[string]any{"op": "ping"})
		if f := c.next(); f.Type != "pong" {
			t.Errorf("root's ping while a user is at the cap: %+v", f)
		}
	}
	// Idle connections are closed after the idle timeout.
	time.Sleep(3 * time.Second)
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			closed++
		}
	}
	if closed != len(conns) {
		t.Errorf("%d of %d idle connections still open after the idle timeout", len(conns)-closed, len(conns))
	}

	// The debug driver's parameters are capped before anything is written.
	c := dial(t, d.sock)
	c.send(map[string]any{"op": "send", "id": "huge", "session": "q", "input": map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": "spam spam"}}, "params": map[string]any{"repeat": 1 << 30}}})
	fs := c.untilDone()
	if !strings.Contains(types(fs), "error") {
		t.Errorf("repeat=2^30 was accepted: %s", types(fs))
	}
	// The session quota stops a run that fills it, with its done frame.
	c.send(map[string]any{"op": "send", "id": "fill", "session": "q", "input": map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("word ", 2000)}}, "params": map[string]any{"repeat": 1000}}})
	fs = c.untilDone()
	if fs[len(fs)-1].Status != "error" || !strings.Contains(fmt.Sprint(fs[len(fs)-2]), "ENOSPC") {
		t.Errorf("a run past the session quota: %s, want an ENOSPC error then done", types(fs[max(0, len(fs)-3):]))
	}
	ev := filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "session/model/debug/echo/q/events.jsonl")
	if fi, err := os.Stat(ev); err != nil || fi.Size() > 1<<20 {
		t.Errorf("session log: %v, %d bytes (quota 1 MiB)", err, fi.Size())
	}
}

// dialAs opens n connections to a Unix socket as the actor's uid: a
// helper process of that uid connects and passes the sockets back over a
// socketpair, so SO_PEERCRED shows the actor. Connections that fail are
// missing from the result.
func dialAs(t *testing.T, a actor, path string, n int) []net.Conn {
	t.Helper()
	if a.u == nil {
		var out []net.Conn
		for range n {
			if c, err := net.Dial("unix", path); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	parent, child := os.NewFile(uintptr(pair[0]), "parent"), os.NewFile(uintptr(pair[1]), "child")
	defer parent.Close()
	cmd := exec.Command(helperBin(t), "-test.run=^TestHelperDialAs$")
	cmd.Env = append(os.Environ(), "CTXT15_DIAL="+path, "CTXT15_DIAL_N="+strconv.Itoa(n))
	cmd.ExtraFiles = []*os.File{child}
	cmd.SysProcAttr = a.u.Cred()
	if err := cmd.Start(); err != nil {
		child.Close()
		t.Fatal(err)
	}
	child.Close()
	defer cmd.Wait()
	uc, err := net.FileConn(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	var out []net.Conn
	for {
		buf, oob := make([]byte, 8), make([]byte, syscall.CmsgSpace(4))
		_, oobn, _, _, err := uc.(*net.UnixConn).ReadMsgUnix(buf, oob)
		if err != nil || oobn == 0 {
			return out
		}
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return out
		}
		fds, err := syscall.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			return out
		}
		f := os.NewFile(uintptr(fds[0]), "conn")
		c, err := net.FileConn(f)
		f.Close()
		if err == nil {
			out = append(out, c)
		}
	}
}

var (
	helperOnce sync.Once
	helperPath string
)

// helperBin is a copy of the test binary another uid may execute (the
// original lives in a private build directory).
func helperBin(t *testing.T) string {
	helperOnce.Do(func() {
		b, err := os.ReadFile("/proc/self/exe")
		if err != nil {
			return
		}
		p := filepath.Join(prefix, "t-helper")
		if os.WriteFile(p, b, 0o755) == nil {
			helperPath = p
		}
	})
	if helperPath == "" {
		t.Fatal("cannot copy the test binary for a helper process")
	}
	return helperPath
}

// TestHelperDialAs is not a test: dialAs runs the test binary as another
// uid with CTXT15_DIAL set, and this connects and hands the socket back.
func TestHelperDialAs(t *testing.T) {
	path := os.Getenv("CTXT15_DIAL")
	if path == "" {
		t.Skip("helper process only")
	}
	back := os.NewFile(3, "back")
	uc, err := net.FileConn(back)
	if err != nil {
		os.Exit(1)
	}
	n, _ := strconv.Atoi(os.Getenv("CTXT15_DIAL_N"))
	for range n {
		c, err := net.Dial("unix", path)
		if err != nil {
			continue
		}
		f, _ := c.(*net.UnixConn).File()
		uc.(*net.UnixConn).WriteMsgUnix([]byte("c"), syscall.UnixRights(int(f.Fd())), nil)
		f.Close()
		c.Close()
	}
	os.Exit(0)
}
