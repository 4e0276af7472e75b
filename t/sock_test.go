package t

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemon is a running cortexfsd over a temp root.
type daemon struct {
	root string
	cmd  *exec.Cmd
	sock string
}

func startDaemon(t *testing.T, root string) *daemon {
	t.Helper()
	d := &daemon{root: root, sock: filepath.Join(root, "model/debug/echo.sock")}
	d.cmd = exec.Command(applet("cortexfsd"), "--root", root)
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

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop(t *testing.T) {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cortexfsd exited uncleanly after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		t.Errorf("cortexfsd ignored SIGTERM")
	}
}

// conn is a raw JSONL connection to a socket.
type conn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func dial(t *testing.T, path string) *conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{t: t, c: c, rd: bufio.NewReaderSize(c, 64<<10)}
}

func (c *conn) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	c.raw(string(b))
}

func (c *conn) raw(line string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

func (c *conn) next() frame {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := c.rd.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		c.t.Fatalf("bad frame %q: %v", line, err)
	}
	return f
}

// untilDone reads frames up to and including the done of a run.
func (c *conn) untilDone() []frame {
	c.t.Helper()
	var fs []frame
	for {
		f := c.next()
		fs = append(fs, f)
		if f.Type == "done" {
			return fs
		}
	}
}

func sendReq(id, session string, input any) map[string]any {
	return map[string]any{"op": "send", "id": id, "session": session, "input": input}
}

func TestSocketProtocolAgainstDaemon(t *testing.T) {
	root := newRoot(t)
	d := startDaemon(t, root)
	c := dial(t, d.sock)

	c.send(map[string]any{"op": "ping", "future_field": true})
	if f := c.next(); f.Type != "pong" {
		t.Fatalf("ping: %+v", f)
	}
	c.send(map[string]any{"op": "frobnicate"})
	if f := c.next(); f.Type != "error" || f.Code != "EINVAL" {
		t.Fatalf("unknown op: %+v", f)
	}
	c.raw(`{"op":"send","id":"x","input":"` + strings.Repeat("a", 1<<20) + `"}`) // > 1 MiB
	if f := c.next(); f.Type != "error" || f.Code != "EMSGSIZE" {
		t.Fatalf("oversize frame: %+v", f)
	}
	// The connection survives and ids increase through a run.
	c.send(sendReq("m1", "s1", "hello there"))
	fs := c.untilDone()
	if fs[0].Type != "start" || fs[len(fs)-1].Status != "ok" {
		t.Fatalf("run: %s", types(fs))
	}
	last := 0
	for _, f := range fs {
		n, err := strconv.Atoi(f.ID)
		if err != nil || n <= last {
			t.Fatalf("event ids not increasing: %+v", fs)
		}
		last = n
	}
	firstRun := fs[0].Run

	// Idempotent retry: same client id → the original run, no second run.
	c.send(sendReq("m1", "s1", "hello there"))
	again := c.untilDone()
	if again[0].Run != firstRun || len(again) != len(fs) {
		t.Fatalf("retry started a new run or differs: %s vs %s", again[0].Run, firstRun)
	}
	// A second turn sees the first turn's history (the input grew).
	c.send(sendReq("m2", "s1", "next"))
	second := c.untilDone()
	if inTok(second) <= inTok(fs) {
		t.Errorf("second turn input_tokens %d not above first %d: history not replayed", inTok(second), inTok(fs))
	}
	// Resume after reconnect gets exactly the frames after a given id.
	mid := fs[1].ID
	c2 := dial(t, d.sock)
	c2.send(map[string]any{"op": "resume", "session": "s1", "after": mid})
	var replay []frame
	for len(replay) < len(fs)-2+len(second) {
		replay = append(replay, c2.next())
	}
	if replay[0].ID != fs[2].ID || replay[len(replay)-1].ID != second[len(second)-1].ID {
		t.Errorf("resume after %s returned %s..%s, want %s..%s", mid, replay[0].ID, replay[len(replay)-1].ID, fs[2].ID, second[len(second)-1].ID)
	}

	// Cancel a slow run: done status cancelled.
	c.send(map[string]any{"op": "send", "id": "slow", "session": "s2", "input": map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": "a b c d e f g h"}}, "params": map[string]any{"delay_ms": 300, "repeat": 50}}})
	start := c.next()
	c.send(map[string]any{"op": "cancel", "id": start.Run})
	rest := c.untilDone()
	if rest[len(rest)-1].Status != "cancelled" {
		t.Errorf("cancel: %s", types(rest))
	}

	// History survives a daemon restart.
	d.stop(t)
	d = startDaemon(t, root)
	c3 := dial(t, d.sock)
	c3.send(sendReq("m3", "s1", "after restart"))
	third := c3.untilDone()
	if inTok(third) <= inTok(second) {
		t.Errorf("after restart input_tokens %d not above %d: history lost", inTok(third), inTok(second))
	}
}

func inTok(fs []frame) int {
	for _, f := range fs {
		if f.Type == "usage" && f.InputTokens != nil {
			return *f.InputTokens
		}
	}
	return -1
}

// ctx send streams a turn; with the daemon down a declared socket is
// ECONNREFUSED (exit 69).
func TestCtxSend(t *testing.T) {
	root := newRoot(t)
	echo := filepath.Join(root, "model/debug/echo")
	r := run(t, runOpts{}, applet("ctx"), "send", echo, "hi")
	if r.code != 69 || !strings.Contains(r.stderr, "(ECONNREFUSED)") {
		t.Errorf("send with daemon down: want exit 69 ECONNREFUSED, got %s", r)
	}
	startDaemon(t, root)
	r = mustOK(t, run(t, runOpts{}, applet("ctx"), "send", "--session", "x", echo, "hi", "there"))
	fs := parseFrames(t, r.stdout)
	if fs[0].Type != "start" || fs[len(fs)-1].Status != "ok" || fs[0].ID == "" {
		t.Errorf("ctx send: %s", r.stdout)
	}
	st := mustOK(t, run(t, runOpts{}, applet("ctx"), "status", "--root", root, "--json"))
	if !strings.Contains(st.stdout, `"daemon":"running"`) {
		t.Errorf("ctx status: %s", st.stdout)
	}
	doc := mustOK(t, run(t, runOpts{}, applet("ctx"), "doctor", "--root", root, "--verbose"))
	if !strings.Contains(doc.stdout, "answers ping") {
		t.Errorf("ctx doctor: %s", doc.stdout)
	}
}

// A client that stops reading blocks its run instead of growing the
// daemon's memory: 128 MiB of deltas, 1.5 s without reading, then all of it.
func TestSocketNonReadingClientBoundedMemory(t *testing.T) {
	root := newRoot(t)
	d := startDaemon(t, root)
	c := dial(t, d.sock)
	before := rssKiB(t, d.cmd.Process.Pid)
	word := strings.Repeat("y", 64<<10)
	c.send(map[string]any{"op": "send", "id": "big", "session": "mem", "input": map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": word}}, "params": map[string]any{"repeat": 2048}}})
	time.Sleep(1500 * time.Millisecond)
	stalled := rssKiB(t, d.cmd.Process.Pid)
	var total int
	for {
		c.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := c.rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read: %v after %d bytes", err, total)
		}
		total += len(line)
		if strings.HasPrefix(string(line), `{"type":"done"`) {
			if !strings.Contains(string(line), `"status":"ok"`) {
				t.Fatalf("run ended %s", line)
			}
			break
		}
	}
	if growth := stalled - before; growth > 48<<10 {
		t.Errorf("daemon RSS grew %d KiB while the client did not read (want bounded, << 128 MiB)", growth)
	}
	if total < 128<<20 {
		t.Errorf("read %d bytes, want at least 128 MiB", total)
	}
}

// The first SIGINT of ctx send cancels the run (done status cancelled,
// exit 1); the client keeps reading until that done.
func TestCtxSendSIGINTCancels(t *testing.T) {
	root := newRoot(t)
	startDaemon(t, root)
	if err := os.WriteFile(filepath.Join(root, "model/debug/echo.d/default"), []byte("delay_ms=200\nrepeat=100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(applet("ctx"), "send", "--session", "sig", filepath.Join(root, "model/debug/echo"), "slow", "words")
	var out lockedBuffer
	cmd.Stdout = &out
	pr, pw, _ := os.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"type":"delta"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no delta before SIGINT: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case <-errc:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("ctx send did not finish after one SIGINT")
	}
	stderr, _ := io.ReadAll(pr)
	fs := parseFrames(t, out.String())
	if last := fs[len(fs)-1]; last.Type != "done" || last.Status != "cancelled" || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("after SIGINT: last frame %+v, exit %d, stderr %s", last, cmd.ProcessState.ExitCode(), stderr)
	}
	if !strings.Contains(string(stderr), "cancelling") {
		t.Errorf("no cancel notice on stderr: %s", stderr)
	}
}

// cortexfsd sends its own credentials where .d/default points, so it never
// serves a model that another user could steer: a control file writable by
// others keeps the socket away (and says why), SIGHUP serves it once fixed,
// and a file made writable later refuses the next turn with EACCES. Another
// uid's home models are not served at all.
func TestDaemonServesOnlyTrustedModels(t *testing.T) {
	root := newRoot(t)
	def := filepath.Join(root, "model/debug/echo.d/default")
	if err := os.Chmod(def, 0o666); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(root, "home/4242/model/evil/x")
	if err := os.MkdirAll(evil+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(evil, []byte("#!"+applet("cortexfs-object-runner")+"\ncortexfs.object=model\n"), 0o755)
	os.WriteFile(evil+".d/driver", []byte("debug\n"), 0o644)
	os.WriteFile(evil+".d/session", []byte("socket\n"), 0o644)
	os.Chown(evil, 4242, 4242)

	cmd := exec.Command(applet("cortexfsd"), "--root", root)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sock := filepath.Join(root, "model/debug/echo.sock")
	waitUntil(t, "the refusal in the daemon log", func() bool {
		return strings.Contains(stderr.String(), "not serving debug/echo") && strings.Contains(stderr.String(), "writable by group or others")
	})
	if _, err := os.Lstat(sock); err == nil {
		t.Fatal("served a model whose .d/default others can write")
	}
	if _, err := os.Lstat(evil + ".sock"); err == nil {
		t.Fatal("served another uid's home model")
	}
	os.Chmod(def, 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "echo.sock after SIGHUP", func() bool { _, err := os.Lstat(sock); return err == nil })

	c := dial(t, sock)
	c.send(sendReq("t1", "trust", "hello"))
	if fs := c.untilDone(); fs[len(fs)-1].Status != "ok" {
		t.Fatalf("trusted turn: %s", types(fs))
	}
	os.Chmod(def, 0o666)
	c.send(sendReq("t2", "trust", "again"))
	fs := c.untilDone()
	if fs[len(fs)-1].Status != "error" || fs[len(fs)-2].Code != "EACCES" {
		t.Fatalf("turn after .d/default became writable by others: %+v", fs)
	}
	if _, err := os.Lstat(evil + ".sock"); err == nil {
		t.Fatal("served another uid's home model after SIGHUP")
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
