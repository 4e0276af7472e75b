package ns

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// InitArgv is how the init is invoked: the launcher applet's hidden
// subcommand (runc's "runc init"). The applet calls Init.
var InitArgv = []string{"ctx-agent", "init"}

// IsInit reports whether argv is the init's.
func IsInit(argv []string) bool {
	return len(argv) >= 2 && argv[1] == InitArgv[1] && filepath.Base(argv[0]) == InitArgv[0]
}

// Options is what Start needs besides the spec: how to run the init and
// what the payload gets from the launcher.
type Options struct {
	// Exe is the binary run as the init; "" is /proc/self/exe, this very
	// binary (a test binary names the cortexfs binary here).
	Exe string
	// Stdin, Stdout and Stderr of the payload (nil: /dev/null).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// ExtraFiles become the payload's descriptors 3, 4, …
	ExtraFiles []*os.File
	// UIDMap and GIDMap, when set, create a user namespace with these
	// mappings (written by the launcher before the init runs).
	UIDMap, GIDMap []syscall.SysProcIDMap
	// SetgroupsAllowed leaves /proc/PID/setgroups at "allow" (only root
	// may); otherwise it is "deny", as the kernel requires before an
	// unprivileged process writes gid_map.
	SetgroupsAllowed bool
	// StartTimeout bounds the build of the sandbox (default 30s).
	StartTimeout time.Duration
}

// Process is a running sandbox: its init, which reaps everything inside
// and exits with the payload's status.
type Process struct {
	cmd  *exec.Cmd
	life *os.File // held open: the init treats EOF as "launcher gone"
	done chan struct{}
	err  error
	code int
	once sync.Once
}

// The namespaces every sandbox gets; the network namespace is added unless
// the spec keeps the host's network, the user namespace when Options maps
// ids.
const baseCloneflags = unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// Start builds the sandbox of spec and starts its payload. It returns once
// the payload was executed, or with the reason the sandbox could not be
// built (nothing keeps running then): a launcher never falls back to
// running the payload unconfined.
func Start(spec *Spec, o Options) (*Process, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec.UserNS = o.UIDMap != nil
	spec.SetgroupsDenied = spec.UserNS && !o.SetgroupsAllowed
	spec.Files = len(o.ExtraFiles)
	payload, err := json.Marshal(spec)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "sandbox spec: %v", err)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "sandbox: %w", err)
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, abi.Errorf(abi.EIO, "sandbox: %w", err)
	}
	exe := o.Exe
	if exe == "" {
		exe = "/proc/self/exe"
	}
	flags := uintptr(baseCloneflags)
	if !spec.Network {
		flags |= unix.CLONE_NEWNET
	}
	var ambient []uintptr
	if spec.UserNS {
		flags |= unix.CLONE_NEWUSER
		// The init is executed as whatever uid the map gives it inside,
		// often not 0: execve(2) then empties the capabilities the new
		// user namespace gave it, unless they are ambient. They are raised
		// so the init can build the sandbox; harden clears them all again.
		ambient = allCaps()
	}
	// The spec waits in the pipe (far below its 64 KiB buffer) before the
	// init exists, so the init reads it at once.
	if _, err := specW.Write(append(payload, '\n')); err != nil {
		for _, f := range []*os.File{specR, specW, statR, statW} {
			f.Close()
		}
		return nil, abi.Errorf(abi.EIO, "sandbox: failed to queue the spec: %v", err)
	}
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       InitArgv,
		Env:        []string{}, // the init needs nothing, and gets nothing, of the launcher's environment
		Stdin:      o.Stdin,
		Stdout:     o.Stdout,
		Stderr:     o.Stderr,
		ExtraFiles: append([]*os.File{specR, statW}, o.ExtraFiles...),
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 flags,
			UidMappings:                o.UIDMap,
			GidMappings:                o.GIDMap,
			GidMappingsEnableSetgroups: o.SetgroupsAllowed,
			AmbientCaps:                ambient,
			// The init dies with the launcher's thread; it re-arms this
			// after changing credentials (which clears it) and also treats
			// EOF on the spec pipe as the launcher's death. (Go's child,
			// seeing getppid() differ — always, in a new pid namespace —
			// then sends itself the signal; the kernel drops it: a
			// namespace's init takes SIGKILL only from outside.)
			Pdeathsig: syscall.SIGKILL,
		},
	}
	err = cmd.Start()
	specR.Close()
	statW.Close()
	if err != nil {
		specW.Close()
		statR.Close()
		return nil, startErr(err, spec.UserNS)
	}
	p := &Process{cmd: cmd, life: specW, done: make(chan struct{})}
	go p.wait()
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if err := readStatus(statR, timeout); err != nil {
		p.Kill()
		<-p.done
		if abi.CodeOf(err) == abi.EIO && p.err != nil {
			err = abi.Errorf(abi.EIO, "%v (init: %v)", err, p.err)
		}
		return nil, err
	}
	return p, nil
}

// status is the one line the init writes: ok, or why the sandbox could
// not be built.
type status struct {
	OK      bool     `json:"ok,omitempty"`
	Code    abi.Code `json:"code,omitempty"`
	Message string   `json:"message,omitempty"`
}

func readStatus(r *os.File, timeout time.Duration) error {
	defer r.Close()
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReaderSize(io.LimitReader(r, 64<<10), 64<<10).ReadBytes('\n')
	if len(line) == 0 {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return abi.Errorf(abi.ETIMEDOUT, "sandbox: not built within %v", timeout)
		}
		return abi.Errorf(abi.EIO, "sandbox: the init exited while building it")
	}
	var st status
	if err := json.Unmarshal(line, &st); err != nil {
		return abi.Errorf(abi.EPROTO, "sandbox: bad status from the init: %v", err)
	}
	if st.OK {
		return nil
	}
	code := st.Code
	if !code.Known() {
		code = abi.EIO
	}
	return abi.Errorf(code, "sandbox: %s", st.Message)
}

// startErr names why the namespaces could not be created. clone(2) with
// CLONE_NEWUSER fails EINVAL on a kernel built without user namespaces,
// ENOSPC when user.max_user_namespaces is 0 (or the limit is reached) and
// EPERM when a policy forbids them to this caller.
func startErr(err error, userns bool) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return abi.Errorf(abi.EIO, "sandbox: failed to start the init: %v", err)
	}
	switch {
	case userns && (errno == unix.EINVAL || errno == unix.ENOSPC || errno == unix.EUSERS || errno == unix.ENOSYS):
		return abi.Errorf(abi.ENOTSUP, "sandbox: this kernel offers no user namespace (%v; user.max_user_namespaces=%s)", errno, sysctl("user/max_user_namespaces"))
	case userns && errno == unix.EPERM:
		return abi.Errorf(abi.EPERM, "sandbox: user namespaces are forbidden to this user here (%v; kernel.unprivileged_userns_clone=%s)", errno, sysctl("kernel/unprivileged_userns_clone"))
	case errno == unix.EPERM:
		return abi.Errorf(abi.EPERM, "sandbox: creating namespaces needs root or a user namespace: %v", errno)
	}
	return abi.Errorf(abi.FromErrno(errno), "sandbox: failed to create the namespaces: %v", errno)
}

func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "n/a"
	}
	return strings.TrimSpace(string(b))
}

// UserNSAvailable reports whether this process could create a user
// namespace, without creating one: ENOTSUP when the kernel has none (or
// the limit is 0), EPERM when the administrator forbade them to
// unprivileged users.
func UserNSAvailable() error {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return abi.Errorf(abi.ENOTSUP, "this kernel offers no user namespace (no /proc/self/ns/user)")
	}
	if v := sysctl("user/max_user_namespaces"); v == "0" {
		return abi.Errorf(abi.ENOTSUP, "this kernel offers no user namespace (user.max_user_namespaces=0)")
	}
	if os.Geteuid() != 0 && sysctl("kernel/unprivileged_userns_clone") == "0" {
		return abi.Errorf(abi.EPERM, "user namespaces are forbidden to unprivileged users (kernel.unprivileged_userns_clone=0)")
	}
	return nil
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	p.life.Close()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		} else {
			p.code = ee.ExitCode()
		}
		p.err = err
	default:
		p.code, p.err = 1, err
	}
	close(p.done)
}

// Pid is the init's pid as the launcher sees it.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the init (and so everything in the sandbox) is gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the sandbox to end and returns the payload's exit status
// (128+N when a signal N ended it).
func (p *Process) Wait() int {
	<-p.done
	return p.code
}

// Signal sends sig to the init, which forwards it to the payload.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Kill ends the sandbox at once: the init dies of SIGKILL, and the kernel
// kills every process of a pid namespace whose init dies.
func (p *Process) Kill() {
	p.once.Do(func() { _ = p.Signal(syscall.SIGKILL) })
}

// Stop asks the payload to end (SIGTERM through the init) and kills the
// sandbox if it has not ended within timeout.
func (p *Process) Stop(timeout time.Duration) int {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		<-p.done
	}
	return p.code
}

// allCaps lists every capability this kernel knows (0..cap_last_cap).
func allCaps() []uintptr {
	last := unix.CAP_LAST_CAP
	if n, err := strconv.Atoi(sysctl("kernel/cap_last_cap")); err == nil && n > 0 {
		last = n
	}
	caps := make([]uintptr, 0, last+1)
	for c := 0; c <= last; c++ {
		caps = append(caps, uintptr(c))
	}
	return caps
}

func itoa(n int) string { return strconv.Itoa(n) }

func fmtMsg(format string, args ...any) string { return fmt.Sprintf(format, args...) }
