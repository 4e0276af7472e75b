package ns

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Descriptors the init is started with (after stdio).
const (
	fdSpec   = 3 // the spec, then nothing: EOF means the launcher is gone
	fdStatus = 4 // one status line, then closed
	fdExtra  = 5 // the payload's descriptors 3, 4, …
)

func init() {
	// The init does per-thread work (credentials, capabilities,
	// no_new_privs, seccomp) and forks the payload from the thread that
	// did it; locking here, before main, keeps the main goroutine on the
	// main thread, whose state /proc/PID/status shows.
	if IsInit(os.Args) {
		runtime.LockOSThread()
	}
}

// Init is the sandbox's pid 1, run as InitArgv by Start inside the new
// namespaces: it builds the mount tree, pivots into it, drops every
// privilege, starts the payload and then reaps every process of the pid
// namespace until the payload exits, whose status it exits with (the
// kernel then kills whatever is left). It never returns.
func Init() {
	runtime.LockOSThread()
	life := os.NewFile(fdSpec, "spec")
	statusOut := os.NewFile(fdStatus, "status")
	fail := func(err error) {
		report(statusOut, err)
		os.Exit(1)
	}
	if life == nil || statusOut == nil {
		os.Stderr.WriteString("ctx-agent init: not started by a sandbox launcher\n")
		os.Exit(2)
	}
	spec, rest, err := readSpec(life)
	if err != nil {
		fail(err)
	}
	exe, err := build(spec)
	if err != nil {
		fail(err)
	}
	payload, err := startPayload(spec, exe)
	if err != nil {
		fail(err)
	}
	report(statusOut, nil)
	os.Exit(reap(payload, rest))
}

// readSpec reads the spec line; the reader stays with the init, whose
// next read ends only when the launcher closes its end or dies.
func readSpec(f *os.File) (*Spec, *bufio.Reader, error) {
	r := bufio.NewReaderSize(f, 64<<10)
	line, err := readLine(r, 4<<20)
	if err != nil {
		return nil, nil, abi.Errorf(abi.EPROTO, "init: no spec from the launcher: %v", err)
	}
	var s Spec
	if err := json.Unmarshal(line, &s); err != nil {
		return nil, nil, abi.Errorf(abi.EPROTO, "init: bad spec: %v", err)
	}
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	return &s, r, nil
}

func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, abi.Errorf(abi.EMSGSIZE, "line longer than %d bytes", max)
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

func report(w *os.File, err error) {
	st := status{OK: err == nil}
	if err != nil {
		st.Code, st.Message = abi.CodeOf(err), err.Error()
	}
	b, _ := json.Marshal(st)
	_, _ = w.Write(append(b, '\n'))
	_ = w.Close()
}

// build turns the init's copy of the host's namespaces into the sandbox,
// in the order of the seed's "Agent startup" steps 4–8: identity for path
// resolution, mount namespace (private), the root and the binds in order,
// pivot_root into the root, cd to cwd; then the hardening. It returns the
// binary to run the payload from when the spec names none.
func build(s *Spec) (*os.File, error) {
	if !s.Network {
		if err := loopbackUp(); err != nil {
			return nil, err
		}
	}
	if s.Hostname != "" {
		if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
			return nil, abi.Errorf(codeOf(err), "init: sethostname: %v", err)
		}
	}
	// A new mount namespace starts as a copy of the launcher's, and a copy
	// of a shared mount stays a peer of the original: binds made here would
	// propagate back to the host. Making every mount private first cuts
	// propagation both ways, so nothing this sandbox mounts is seen outside
	// and nothing mounted outside later appears inside.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, abi.Errorf(codeOf(err), "init: make mounts private: %v", err)
	}
	var exe *os.File
	if s.Path == "" {
		var err error
		if exe, err = selfExe(); err != nil {
			return nil, err
		}
	}
	m := newMounter(s)
	root, err := m.assemble(s)
	if err != nil {
		return nil, err
	}
	if err := pivot(root); err != nil {
		return nil, err
	}
	if err := harden(s); err != nil {
		return nil, err
	}
	if s.Cwd != "" {
		if err := unix.Chdir(s.Cwd); err != nil {
			return nil, abi.Errorf(codeOf(err), "cwd %s: %v", s.Cwd, err)
		}
	}
	if err := installSeccomp(); err != nil {
		return nil, err
	}
	// Changing credentials cleared the parent-death signal; set it again
	// (the spec pipe's EOF covers a launcher that died in between).
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	return exe, nil
}

// selfExe is this binary on a read-only mount of its own: open_tree(2)
// clones the mount that holds it, rooted at the file, without attaching it
// anywhere. The payload is executed from it, so its /proc/PID/exe — which
// every process inside can open — leads to a read-only mount: a process
// that reopens it for writing gets EROFS instead of rewriting the binary
// the next launcher runs (the class of runc's CVE-2019-5736).
//
// The clone must start from a mount of this namespace: /proc/self/exe
// itself still names the launcher's mount (the init was executed through
// the launcher's /proc/self/exe link), so the binary is looked up again by
// its name here and checked to be the same file. When that fails (the
// binary was replaced on disk) or the kernel has no open_tree, the payload
// runs from the plain file.
func selfExe() (*os.File, error) {
	plain, err := unix.Open("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, abi.Errorf(codeOf(err), "init: open the binary: %v", err)
	}
	exe := os.NewFile(uintptr(plain), "exe")
	name, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return exe, nil
	}
	fd, err := unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return exe, nil
	}
	here := os.NewFile(uintptr(fd), name)
	defer here.Close()
	if !sameFile(here, exe) {
		return exe, nil
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err == unix.ENOSYS {
		return exe, nil
	}
	if err != nil {
		exe.Close()
		return nil, abi.Errorf(codeOf(err), "init: clone the binary's mount: %v", err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(tree)
		if err == unix.ENOSYS {
			return exe, nil
		}
		exe.Close()
		return nil, abi.Errorf(codeOf(err), "init: read-only mount of the binary: %v", err)
	}
	exe.Close()
	return os.NewFile(uintptr(tree), "exe"), nil
}

// startPayload forks the payload from this (locked) thread, whose
// credentials, capability sets, no_new_privs and seccomp filter the child
// inherits, and executes it. It returns once the exec succeeded.
func startPayload(s *Spec, exe *os.File) (int, error) {
	path := s.Path
	if exe != nil {
		// The descriptor's magic link: exec resolves it before the
		// close-on-exec descriptors are closed.
		path = "/proc/self/fd/" + itoa(int(exe.Fd()))
	}
	files := []uintptr{0, 1, 2}
	for i := 0; i < s.Files; i++ {
		files = append(files, uintptr(fdExtra+i))
	}
	// syscall.ForkExec rather than os.StartProcess: no pidfd probe (a
	// throwaway child per process), and reap waits by pid anyway.
	pid, err := syscall.ForkExec(path, s.Argv, &syscall.ProcAttr{Env: s.Env, Files: files,
		Sys: &syscall.SysProcAttr{Setpgid: true}})
	for i := 0; i < s.Files; i++ {
		unix.Close(fdExtra + i) // only the payload holds them now
	}
	if exe != nil {
		exe.Close()
	}
	if err != nil {
		name := s.Argv[0]
		if s.Path != "" {
			name = s.Path
		}
		return 0, abi.Errorf(codeOf(err), "exec %s: %v", name, err)
	}
	return pid, nil
}

// codeOf is the stable code of a failed syscall; EPERM stays EPERM (a
// privilege is missing), where abi maps it to EACCES for file access.
func codeOf(err error) abi.Code {
	if errors.Is(err, unix.EPERM) {
		return abi.EPERM
	}
	return abi.CodeOf(err)
}
