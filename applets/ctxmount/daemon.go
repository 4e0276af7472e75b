package ctxmount

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
)

// The background server is this binary again, as ctx-mount in the
// foreground, told through the environment to report readiness on a pipe
// and which pid file to remove when it stops.
const (
	envChild   = "CTX_MOUNT_CHILD"    // set in the background server
	envPidFile = "CTX_MOUNT_PID_FILE" // the pid file it owns
	readyFD    = 3                    // ExtraFiles[0]
)

// isChild reports whether this process is a background server.
func isChild() bool { return os.Getenv(envChild) == "1" }

// readyPipe is the parent's pipe, taken over before anything else could be
// given descriptor 3; nil once reported.
var readyPipe *os.File

func takeReadyPipe() {
	if isChild() && readyPipe == nil {
		readyPipe = os.NewFile(readyFD, "ready")
	}
}

// ready tells a waiting parent that the mount is up.
func ready() { report("ok") }

// report writes one line to the parent and closes the pipe; only the first
// report is sent.
func report(line string) {
	if readyPipe == nil {
		return
	}
	fmt.Fprintln(readyPipe, line)
	readyPipe.Close()
	readyPipe = nil
}

// childDone runs when a background server stops: a startup failure goes
// to the parent; the pid file goes if it still names this process.
func childDone(err error) {
	if !isChild() {
		return
	}
	if err != nil {
		report("error " + string(abi.CodeOf(err)) + " " + strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if p := os.Getenv(envPidFile); p != "" {
		if b, rerr := os.ReadFile(p); rerr == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
			os.Remove(p)
		}
	}
}

// background starts the server as a session leader with its standard
// streams on /dev/null (stderr on --log when given), waits until it has
// mounted (or failed), writes the pid file and prints the pid.
func background(env *applets.Env, args []string, mountpoint, pidFile, logFile string) error {
	var err error
	if pidFile == "" {
		if pidFile, err = defaultPidFile(mountpoint); err != nil {
			return err
		}
	}
	if pidFile, err = filepath.Abs(pidFile); err != nil {
		return abi.Errorf(abi.EINVAL, "--pid-file: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return err
	}
	defer null.Close()
	stderr := null
	if logFile != "" {
		if stderr, err = os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			w.Close()
			return abi.Errorf(abi.CodeOf(err), "--log: %v", err)
		}
		defer stderr.Close()
	}
	// argv[0] is the applet name: dispatch is on argv[0], and
	// /proc/self/exe is this very binary whatever name started us.
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: append([]string{Name}, args...),
		Env:   append(os.Environ(), envChild+"=1", envPidFile+"="+pidFile),
		Stdin: null, Stdout: null, Stderr: stderr, ExtraFiles: []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		w.Close()
		return abi.Errorf(abi.EIO, "start the background server: %v", err)
	}
	w.Close()
	line, _ := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	line = strings.TrimSpace(line)
	if line != "ok" {
		cmd.Wait()
		if rest, ok := strings.CutPrefix(line, "error "); ok {
			code, msg, _ := strings.Cut(rest, " ")
			return abi.Errorf(abi.Code(code), "%s", msg)
		}
		return abi.Errorf(abi.EIO, "the background server exited before mounting %s", mountpoint)
	}
	pid := cmd.Process.Pid
	if err := atomicfile.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return abi.Errorf(abi.CodeOf(err), "server %d is serving %s, but its pid file could not be written: %v", pid, mountpoint, err)
	}
	_ = cmd.Process.Release()
	fmt.Fprintln(env.Stdout, pid)
	return nil
}

// defaultPidFile is <runtime dir>/ctx-mount<mountpoint with / as ->.pid:
// /run/cortexfs for root, $XDG_RUNTIME_DIR/cortexfs or a private
// /tmp/cortexfs-<uid> for everyone else.
func defaultPidFile(mountpoint string) (string, error) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", abi.Errorf(abi.EINVAL, "mountpoint: %v", err)
	}
	var dir string
	switch {
	case os.Geteuid() == 0:
		dir = "/run/cortexfs"
	case os.Getenv("XDG_RUNTIME_DIR") != "":
		dir = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "cortexfs")
	default:
		dir = filepath.Join(os.TempDir(), "cortexfs-"+strconv.Itoa(os.Geteuid()))
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, Name+strings.ReplaceAll(abs, "/", "-")+".pid"), nil
}

// privateDir makes dir (one level) owned by us, or accepts it when it is a
// real directory we own that nobody else can write.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return abi.Errorf(abi.CodeOf(err), "runtime directory: %v", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), "runtime directory: %v", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return abi.Errorf(abi.EACCES, "runtime directory %s is not a directory only this user can write; give --pid-file", dir)
	}
	return nil
}
