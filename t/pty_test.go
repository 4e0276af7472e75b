package t

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ptyProc is a process whose stdin, stdout and stderr are a fresh pty.
type ptyProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	eof    chan struct{} // closed when the master reads EOF/EIO: all output is in
}

func startPTY(t *testing.T, path string, args ...string) *ptyProc {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pty available: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyProc{t: t, master: master, eof: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = slave, slave, slave
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() {
		defer close(p.eof)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return // EIO once every slave fd is closed and the buffer drained
			}
		}
	}()
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait(); master.Close() })
	return p
}

func (p *ptyProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// expect waits until the screen output contains s.
func (p *ptyProc) expect(s string) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.output(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("pty output never showed %q; got:\n%s", s, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *ptyProc) wait() int {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
		// The child's last output may still sit in the pty: read it all.
		select {
		case <-p.eof:
		case <-time.After(5 * time.Second):
			p.t.Fatalf("pty output not drained after exit; got:\n%s", p.output())
		}
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		p.t.Fatalf("process on pty did not exit; output:\n%s", p.output())
		return -1
	}
}

// TTY rules of object-abi: a bare tool on a terminal prints usage and exits;
// a bare model on a terminal runs a small REPL with human-readable output.
func TestObjectsTTYRules(t *testing.T) {
	root := newRoot(t)
	tool := startPTY(t, filepath.Join(root, "tool/fs.read"))
	if code := tool.wait(); code != 0 {
		t.Fatalf("bare tool on a tty exited %d:\n%s", code, tool.output())
	}
	if out := tool.output(); !strings.Contains(out, "usage:") || !strings.Contains(out, `"path"`) {
		t.Errorf("bare tool on a tty did not print usage:\n%s", out)
	}

	repl := startPTY(t, filepath.Join(root, "model/main"))
	repl.expect("debug/echo> ")
	repl.master.Write([]byte("hello from a terminal\n"))
	// Once as the terminal's echo of the typed line, once from the model,
	// then the prompt again.
	repl.expect("hello from a terminal\r\nhello from a terminal\r\ndebug/echo> ")
	if strings.Contains(repl.output(), `"type":"delta"`) {
		t.Errorf("REPL on a tty printed JSONL instead of text:\n%s", repl.output())
	}
	repl.master.Write([]byte{4}) // Ctrl-D ends the REPL
	if code := repl.wait(); code != 0 {
		t.Errorf("REPL exit %d:\n%s", code, repl.output())
	}
}
