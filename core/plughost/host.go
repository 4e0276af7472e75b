// Package plughost runs trusted native plugins (the seed's C ABI v1,
// cortex_plugin_init) in the plugin host: a small dynamically linked C
// program embedded in this static binary, executed from a sealed memfd,
// that loads one plugin library and passes the ABI's JSON buffers over a
// pipe. A plugin that crashes kills its host, never the caller.
package plughost

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

//go:embed all:bin
var embedded embed.FS

const programName = "bin/cortexfs-plugin-host"

// Program returns the embedded host program. A binary built without it
// (plain `go build`, not `make build`) cannot run native plugins: ENOTSUP.
func Program() ([]byte, error) {
	b, err := fs.ReadFile(embedded, programName)
	if err != nil || len(b) == 0 {
		return nil, abi.Errorf(abi.ENOTSUP, "this cortexfs binary was built without the native plugin host (build with `make build`, which compiles core/plughost/host with gcc)")
	}
	return b, nil
}

// Options start one host.
type Options struct {
	Program    []byte              // the host ELF; nil means the embedded one
	Library    *os.File            // the plugin library, opened and checked by the caller
	Credential *syscall.Credential // run as (nil: as the caller)
	Env        []string            // the host's whole environment
	Dir        string              // working directory ("" is /)
	Stderr     io.Writer           // plugin and host diagnostics (nil: discarded)
}

// Host is one running plugin host with its plugin loaded.
type Host struct {
	// Info is the plugin's plugin_info JSON; Descriptors one
	// tool_descriptor JSON per tool, in index order.
	Info        []byte
	Descriptors [][]byte

	cmd     *exec.Cmd
	in      io.WriteCloser
	outFile *os.File
	out     *bufio.Reader
	mu      sync.Mutex // one call at a time: the pipe carries one request
	done    chan struct{}
	werr    error // why the process ended, once done is closed
}

var (
	memfdOnce sync.Once
	memfd     *os.File
	memfdErr  error
)

// programFile returns a sealed memfd holding prog (the embedded program's
// memfd is made once per process), at a descriptor number no child's
// stdio or ExtraFiles can land on.
func programFile(prog []byte) (*os.File, error) {
	if prog != nil {
		return sealedMemfd(prog)
	}
	memfdOnce.Do(func() {
		var b []byte
		if b, memfdErr = Program(); memfdErr == nil {
			memfd, memfdErr = sealedMemfd(b)
		}
	})
	return memfd, memfdErr
}

// sealedMemfd writes b into an anonymous memory file and seals it, so the
// program that runs is exactly these bytes: nothing on disk to swap, no
// write possible after the seal (F_SEAL_WRITE also fails while a writable
// mapping exists, and there is none).
func sealedMemfd(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("cortexfs-plugin-host", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, abi.Errorf(abi.ENOTSUP, "memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), "cortexfs-plugin-host")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, abi.Errorf(abi.EIO, "write plugin host: %v", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, abi.Errorf(abi.EIO, "seal plugin host: %v", err)
	}
	// Move it above every descriptor a child gets by number (0-3): the
	// child dup2()s its stdio and ExtraFiles before execve, and execve
	// resolves /proc/self/fd/N in the child.
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 100)
	f.Close()
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "plugin host fd: %v", err)
	}
	return os.NewFile(uintptr(high), "cortexfs-plugin-host"), nil
}

// Start runs a host for o.Library and waits for the plugin to load: its
// ABI version checked both ways, its function table complete, its info and
// descriptors read (every returned buffer freed by the plugin's
// buffer_free). A refused plugin is an error with the host's stable code
// (ENOTSUP for another ABI version).
func Start(ctx context.Context, o Options) (*Host, error) {
	prog, err := programFile(o.Program)
	if err != nil {
		return nil, err
	}
	if o.Program != nil {
		defer prog.Close() // the child holds its own reference once started
	}
	if o.Library == nil {
		return nil, abi.Errorf(abi.EINVAL, "plugin host: no library")
	}
	cmd := exec.Command(fmt.Sprintf("/proc/self/fd/%d", prog.Fd()), "/proc/self/fd/3")
	cmd.Args[0] = "cortexfs-plugin-host"
	cmd.ExtraFiles = []*os.File{o.Library}
	cmd.Env = o.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = o.Dir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Stderr = o.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: o.Credential}
	// Own pipes, not cmd.StdoutPipe: Wait (which runs concurrently to
	// notice a crash) would close that one under a pending read.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, abi.Errorf(abi.CodeOf(err), "start plugin host: %v", err)
	}
	h := &Host{cmd: cmd, in: inW, outFile: outR, out: bufio.NewReaderSize(outR, 64<<10), done: make(chan struct{})}
	go func() {
		h.werr = cmd.Wait()
		close(h.done)
	}()
	stop := context.AfterFunc(ctx, h.kill)
	f, err := readFrame(h.out)
	stop()
	if err != nil {
		h.kill()
		<-h.done
		h.release()
		if ctx.Err() != nil {
			return nil, abi.Errorf(abi.CodeOf(ctx.Err()), "plugin host did not load the plugin in time: %v", ctx.Err())
		}
		return nil, abi.Errorf(abi.EIO, "plugin host died while loading the plugin (%s): %v", h.exitText(), err)
	}
	switch {
	case f.op == opFail && len(f.parts) == 2:
		h.kill()
		<-h.done
		h.release()
		return nil, hostError(f.parts)
	case f.op != opHello || len(f.parts) < 1:
		h.kill()
		<-h.done
		h.release()
		return nil, abi.Errorf(abi.EPROTO, "plugin host: unexpected %q frame while loading", f.op)
	}
	h.Info, h.Descriptors = f.parts[0], f.parts[1:]
	return h, nil
}

// hostError turns an 'F' or 'E' frame into an error with its code.
func hostError(parts [][]byte) error {
	code := abi.Code(parts[0])
	if !code.Known() {
		code = abi.EIO
	}
	msg := string(parts[1])
	if !utf8.ValidString(msg) || len(msg) > 2048 {
		msg = "(unprintable message)"
	}
	return abi.Errorf(code, "native plugin: %s", msg)
}

// release closes the pipes once the process has ended.
func (h *Host) release() {
	h.in.Close()
	h.outFile.Close()
}

// Pid is the host's process id (and process group).
func (h *Host) Pid() int { return h.cmd.Process.Pid }

// Done is closed when the host process has ended.
func (h *Host) Done() <-chan struct{} { return h.done }

// exitText says how the host ended ("killed by signal segmentation fault").
func (h *Host) exitText() string {
	var ee *exec.ExitError
	if errors.As(h.werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if h.werr != nil {
		return h.werr.Error()
	}
	return "exited"
}

// ExitText says how the host ended; "" while it runs.
func (h *Host) ExitText() string {
	select {
	case <-h.done:
		return h.exitText()
	default:
		return ""
	}
}

// kill ends the host's whole process group at once.
func (h *Host) kill() {
	if h.cmd.Process != nil {
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Execute calls tool_execute(tool, input, invocation) and returns the
// result buffer's bytes. A call cannot be interrupted inside the plugin:
// when ctx ends first the host is killed (ETIMEDOUT or ECANCELED) and must
// be started again. A host that dies during the call (the plugin crashed)
// is EHOSTDOWN naming the signal.
func (h *Host) Execute(ctx context.Context, tool string, input, invocation []byte) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
		return nil, abi.Errorf(abi.EHOSTDOWN, "the plugin host is not running (%s)", h.exitText())
	default:
	}
	if len(input) > MaxPart || len(invocation) > MaxPart || len(tool) > MaxPart {
		return nil, abi.Errorf(abi.EMSGSIZE, "input larger than %d bytes", MaxPart)
	}
	stop := context.AfterFunc(ctx, h.kill)
	defer stop()
	if err := writeFrame(h.in, opExecute, []byte(tool), input, invocation); err != nil {
		return nil, h.callErr(ctx, err)
	}
	f, err := readFrame(h.out)
	if err != nil {
		return nil, h.callErr(ctx, err)
	}
	switch {
	case f.op == opResult && len(f.parts) == 1:
		return f.parts[0], nil
	case f.op == opError && len(f.parts) == 2:
		return nil, hostError(f.parts)
	}
	h.kill()
	return nil, abi.Errorf(abi.EPROTO, "plugin host: unexpected %q frame for a call", f.op)
}

func (h *Host) callErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		<-h.done
		return abi.Errorf(abi.CodeOf(ctx.Err()), "the plugin call did not finish (%v); its host was killed", ctx.Err())
	}
	if code := abi.CodeOf(err); code == abi.EMSGSIZE || code == abi.EPROTO {
		h.kill()
		return err
	}
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		h.kill()
		<-h.done
	}
	return abi.Errorf(abi.EHOSTDOWN, "the plugin host died during the call (%s)", h.exitText())
}

// Close asks the host to call plugin_drop and exit, and waits for it
// (killing it after timeout). It returns an error unless the plugin was
// dropped and the host exited 0.
func (h *Host) Close(timeout time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
		h.release()
		return abi.Errorf(abi.EHOSTDOWN, "the plugin host had already ended (%s)", h.exitText())
	default:
	}
	dropped := false
	if writeFrame(h.in, opQuit) == nil {
		f, err := readFrameTimeout(h.out, timeout)
		dropped = err == nil && f.op == opDropped
	}
	h.in.Close()
	select {
	case <-h.done:
	case <-time.After(timeout):
		h.kill()
		<-h.done
	}
	h.release()
	if !dropped || h.werr != nil {
		return abi.Errorf(abi.EIO, "the plugin host did not shut down cleanly (dropped=%v, %s)", dropped, h.exitText())
	}
	return nil
}

func readFrameTimeout(r io.Reader, d time.Duration) (frame, error) {
	type res struct {
		f   frame
		err error
	}
	c := make(chan res, 1)
	go func() {
		f, err := readFrame(r)
		c <- res{f, err}
	}()
	select {
	case x := <-c:
		return x.f, x.err
	case <-time.After(d):
		return frame{}, abi.Errorf(abi.ETIMEDOUT, "plugin host: no answer within %v", d)
	}
}
