package ns

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary is its own init (InitArgv) and its own payload
// (payloadName): runc's way of testing libcontainer.
const payloadName = "nstest-payload"

func TestMain(m *testing.M) {
	switch {
	case IsInit(os.Args):
		Init()
	case len(os.Args) > 1 && filepath.Base(os.Args[0]) == payloadName:
		os.Exit(payloadMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// payloadMain runs one probe inside a sandbox and prints its result:
// "ok" or the errno name of the failure.
func payloadMain(args []string) int {
	switch args[0] {
	case "status": // selected lines of /proc/self/status
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		for _, l := range strings.Split(string(b), "\n") {
			for _, k := range []string{"Cap", "NoNewPrivs", "Seccomp:", "Uid", "Gid", "Groups"} {
				if strings.HasPrefix(l, k) {
					fmt.Println(strings.Join(strings.Fields(l), " "))
				}
			}
		}
	case "write": // write PATH
		fmt.Println(errName(os.WriteFile(args[1], []byte("x"), 0o644)))
	case "read": // read PATH
		b, err := os.ReadFile(args[1])
		if err != nil {
			fmt.Println(errName(err))
		} else {
			fmt.Println("ok", strings.TrimSpace(string(b)))
		}
	case "stat":
		_, err := os.Lstat(args[1])
		fmt.Println(errName(err))
	case "ls":
		es, err := os.ReadDir(args[1])
		if err != nil {
			fmt.Println(errName(err))
			return 0
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		fmt.Println(strings.Join(names, " "))
	case "pids": // numeric entries of /proc
		es, _ := os.ReadDir("/proc")
		var pids []string
		for _, e := range es {
			if n := e.Name(); n[0] >= '0' && n[0] <= '9' {
				pids = append(pids, n)
			}
		}
		sort.Strings(pids)
		fmt.Println(strings.Join(pids, " "), "self", os.Getpid())
	case "syscalls": // forbidden calls, one result each
		fmt.Println("mount", errName(unix.Mount("none", "/tmp", "tmpfs", 0, "")))
		fmt.Println("unshare", errName(unix.Unshare(unix.CLONE_NEWUSER)))
		fmt.Println("setns", errName(unix.Setns(0, 0)))
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
		fmt.Println("keyctl", errName(err))
		fmt.Println("ptrace", errName(unix.PtraceAttach(1)))
		_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
		fmt.Println("clone3", errName(errnoErr(e)))
		fmt.Println("chroot", errName(unix.Chroot("/")))
		fmt.Println("getpid", errName(nil))
	case "ifaces":
		ifs, _ := net.Interfaces()
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		fmt.Println(strings.Join(names, " "))
	case "connect":
		c, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err == nil {
			c.Close()
		}
		fmt.Println(errName(err))
	case "exe-ro": // is the binary on a read-only mount?
		var st unix.Statfs_t
		err := unix.Statfs("/proc/self/exe", &st)
		fmt.Println(errName(err), st.Flags&unix.ST_RDONLY != 0)
	case "spawn-sleep": // leave a child behind and wait
		p, err := os.StartProcess("/proc/self/exe", []string{payloadName, "sleep"}, &os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}})
		if err != nil {
			fmt.Println(errName(err))
			return 1
		}
		fmt.Println("child", p.Pid)
		time.Sleep(time.Hour)
	case "propagation": // the optional fields of every mount in /proc/self/mountinfo
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			fmt.Println(errName(err))
			return 1
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(l)
			// mount ID, parent ID, major:minor, root, mount point,
			// options, then optional fields up to "-".
			opt := []string{}
			for _, x := range f[6:] {
				if x == "-" {
					break
				}
				opt = append(opt, x)
			}
			fmt.Println(f[4], strings.Join(opt, ","))
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "exit":
		return 7
	}
	return 0
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// runBox starts a sandbox whose payload is this test binary running probe
// args, waits for it and returns its output and exit status.
func runBox(t *testing.T, s *Spec, o Options, args ...string) (string, int) {
	t.Helper()
	p, out := startBox(t, s, o, args...)
	code := p.Wait()
	return out.String(), code
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startBox(t *testing.T, s *Spec, o Options, args ...string) (*Process, *lockedBuf) {
	t.Helper()
	s.Argv = append([]string{payloadName}, args...)
	out := &lockedBuf{}
	o.Stdout, o.Stderr = out, os.Stderr
	p, err := Start(s, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return p, out
}
