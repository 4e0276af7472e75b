package ns

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// mode is one way of building a sandbox that every isolation test runs
// in: the descriptor mount API or mount(2), with or without a user
// namespace (root maps its own ids, as a root launcher does for
// iso=userns).
type mode struct {
	name    string
	classic bool
	userns  bool
	as1000  bool // the init's uid inside is 1000 (mapped to 0 outside), as for an unprivileged launcher
}

var modes = []mode{{"fd", false, false, false}, {"classic", true, false, false}, {"fd-userns", false, true, false},
	{"classic-userns", true, true, false}, {"fd-userns-nonzero", false, true, true}}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): sandbox tests build namespaces as root; CI runs as root (t/ covers the unprivileged user namespace)")
	}
}

func eachMode(t *testing.T, f func(t *testing.T, md mode)) {
	needRoot(t)
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) { f(t, md) })
	}
}

// options for a mode: in a user namespace the ids 0 and 65534 are mapped
// to themselves (setgroups allowed: the launcher is root).
func (md mode) options() Options {
	if !md.userns {
		return Options{}
	}
	if md.as1000 {
		m := []syscall.SysProcIDMap{{ContainerID: 1000, HostID: 0, Size: 1}}
		return Options{UIDMap: m, GIDMap: m}
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 65534, HostID: 65534, Size: 1}}
	return Options{UIDMap: m, GIDMap: m, SetgroupsAllowed: true}
}

// emptyRoot is a spec rooted at an empty directory (0755, in a 0755
// directory: any identity may enter it) with /proc and /dev.
func (md mode) emptyRoot(t *testing.T) *Spec {
	root := filepath.Join(t.TempDir(), "root")
	for d := filepath.Dir(root); d != os.TempDir(); d = filepath.Dir(d) {
		must(t, os.Chmod(d, 0o755))
	}
	must(t, os.Mkdir(root, 0o755))
	return &Spec{Root: Mount{Kind: KindBind, Source: root, NoSuid: true, NoDev: true}, ClassicMounts: md.classic,
		Mounts: []Mount{{Kind: KindProc, Target: "/proc"}, {Kind: KindDev, Target: "/dev"}}}
}

func fields(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, " ")
		m[strings.TrimSuffix(k, ":")] = v
	}
	return m
}

// Inside: no capability in any set, no_new_privs, seccomp filter mode.
func TestSandboxDropsEverything(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		out, code := runBox(t, md.emptyRoot(t), md.options(), "status")
		f := fields(out)
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if f[k] != "0000000000000000" {
				t.Errorf("%s = %q, want 0000000000000000\n%s", k, f[k], out)
			}
		}
		if f["NoNewPrivs"] != "1" || f["Seccomp"] != "2" || code != 0 {
			t.Errorf("NoNewPrivs %q Seccomp %q exit %d, want 1, 2, 0\n%s", f["NoNewPrivs"], f["Seccomp"], code, out)
		}
	})
}

// The seccomp filter refuses what container runtimes refuse with EPERM
// (clone3 with ENOSYS); an ordinary call still works.
func TestSandboxSeccomp(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		out, _ := runBox(t, md.emptyRoot(t), md.options(), "syscalls")
		f := fields(out)
		for _, k := range []string{"mount", "unshare", "setns", "keyctl", "ptrace", "chroot"} {
			if f[k] != "EPERM" {
				t.Errorf("%s: %q, want EPERM\n%s", k, f[k], out)
			}
		}
		if f["clone3"] != "ENOSYS" || f["getpid"] != "ok" {
			t.Errorf("clone3 %q getpid %q, want ENOSYS ok", f["clone3"], f["getpid"])
		}
	})
}

// The control for the seccomp and capability checks: the same probes run
// outside any sandbox (as root) are not refused by a filter.
func TestSandboxProbesControl(t *testing.T) {
	needRoot(t)
	out, err := runPlain(payloadName, "status")
	if err != nil {
		t.Fatal(err)
	}
	if f := fields(out); f["Seccomp"] != "0" || f["CapEff"] == "0000000000000000" {
		t.Errorf("outside a sandbox the probe should see no filter and root's capabilities:\n%s", out)
	}
}

// Paths not mounted are not visible; a ro bind is a real read-only mount
// (EROFS) — recursively for an rbind, submounts included — and a rw bind
// writes through to the host.
func TestSandboxMountsAndReadOnly(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		host := t.TempDir()
		ro, rw, hidden := filepath.Join(host, "ro"), filepath.Join(host, "rw"), filepath.Join(host, "hidden")
		for _, d := range []string{ro, rw, hidden, filepath.Join(ro, "sub")} {
			must(t, os.MkdirAll(d, 0o755))
		}
		must(t, os.WriteFile(filepath.Join(hidden, "secret"), []byte("s"), 0o644))
		must(t, os.WriteFile(filepath.Join(ro, "file"), []byte("visible"), 0o644))
		// A submount under the ro source: an rbind must make it ro too.
		must(t, unix.Mount("tmpfs", filepath.Join(ro, "sub"), "tmpfs", 0, "size=1m"))
		t.Cleanup(func() { _ = unix.Unmount(filepath.Join(ro, "sub"), unix.MNT_DETACH) })
		s := md.emptyRoot(t)
		s.Mounts = append(s.Mounts,
			Mount{Kind: KindBind, Source: ro, Target: "/data/ro", Recursive: true, ReadOnly: true, NoSuid: true, Line: 1},
			Mount{Kind: KindBind, Source: rw, Target: "/data/rw", NoSuid: true, Line: 2})
		cases := []struct{ probe, path, want string }{
			{"read", "/data/ro/file", "ok visible"},
			{"write", "/data/ro/new", "EROFS"},
			{"write", "/data/ro/sub/new", "EROFS"},
			{"write", "/data/rw/new", "ok"},
			{"stat", hidden + "/secret", "ENOENT"},
			{"stat", "/etc/passwd", "ENOENT"},
			{"ls", "/", "data dev proc"},
			{"ls", "/dev", "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero"},
			{"write", "/dev/null", "ok"},
			{"write", "/dev/newfile", "EROFS"},
			{"exe-ro", "", "ok true"},
		}
		for _, c := range cases {
			out, _ := runBox(t, cloneSpec(s), md.options(), c.probe, c.path)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("%s %s: %q, want %q", c.probe, c.path, got, c.want)
			}
		}
		if _, err := os.Stat(filepath.Join(rw, "new")); err != nil {
			t.Errorf("the rw write did not reach the host: %v", err)
		}
		if _, err := os.Stat(filepath.Join(ro, "sub", "new")); err == nil {
			t.Errorf("a write reached the ro submount")
		}
	})
}

func cloneSpec(s *Spec) *Spec {
	c := *s
	c.Mounts = append([]Mount(nil), s.Mounts...)
	return &c
}

// A source mounted nosuid,nodev,noexec on the host keeps those flags when
// it is bound read-only: the remount repeats the flags the kernel locks
// (in a user namespace every inherited flag is locked, and a remount that
// drops one fails with EPERM).
func TestSandboxKeepsLockedFlags(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		src := t.TempDir()
		must(t, unix.Mount("tmpfs", src, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m"))
		t.Cleanup(func() { _ = unix.Unmount(src, unix.MNT_DETACH) })
		s := md.emptyRoot(t)
		s.Mounts = append(s.Mounts, Mount{Kind: KindBind, Source: src, Target: "/locked", ReadOnly: true, Line: 1})
		out, code := runBox(t, s, md.options(), "write", "/locked/x")
		if strings.TrimSpace(out) != "EROFS" || code != 0 {
			t.Errorf("write into a ro bind of a nosuid,nodev,noexec source: %q (exit %d), want EROFS", out, code)
		}
	})
}

// Only the sandbox's processes are in its /proc: the init (1) and the
// payload (2).
func TestSandboxPidNamespace(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		out, _ := runBox(t, md.emptyRoot(t), md.options(), "pids")
		pids, self, _ := strings.Cut(strings.TrimSpace(out), " self ")
		if pids != "1 "+self {
			t.Errorf("/proc lists %q, want the init (1) and the payload (%s) only", pids, self)
		}
	})
}

// Every mount inside the sandbox is private: no mount carries a shared or
// master peer group (/proc/self/mountinfo's optional fields), so nothing
// mounted inside propagates to the host and nothing mounted on the host
// later appears inside. The control is a shared tmpfs on the host (root
// makes one: this machine's own mounts may all be private already), bound
// into the sandbox: outside it shows its peer group, inside it must not.
func TestSandboxMountsArePrivate(t *testing.T) {
	needRoot(t)
	shared := t.TempDir()
	must(t, unix.Mount("cortexfs-prop", shared, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { unix.Unmount(shared, unix.MNT_DETACH) })
	must(t, unix.Mount("", shared, "", unix.MS_SHARED, ""))
	host, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	if !strings.Contains(string(host), " "+shared+" ") || !regexp.MustCompile(" "+regexp.QuoteMeta(shared)+" [^ ]+ shared:").Match(host) {
		t.Fatalf("control: %s is not a shared mount on the host:\n%s", shared, host)
	}
	eachMode(t, func(t *testing.T, md mode) {
		s := md.emptyRoot(t)
		s.Mounts = append(s.Mounts, Mount{Kind: KindBind, Source: shared, Target: "/data", Recursive: true})
		out, _ := runBox(t, s, md.options(), "propagation")
		if !strings.Contains(out, "/data ") {
			t.Fatalf("the shared tmpfs is not mounted inside: %q", out)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.Contains(l, "shared:") || strings.Contains(l, "master:") {
				t.Errorf("a mount inside the sandbox propagates: %s", l)
			}
		}
	})
}

// Without Network only loopback exists (and works); with it the host's
// interfaces are there.
func TestSandboxNetwork(t *testing.T) {
	needRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	md := modes[0]
	out, _ := runBox(t, md.emptyRoot(t), Options{}, "ifaces")
	if strings.TrimSpace(out) != "lo" {
		t.Errorf("interfaces without network: %q, want lo", out)
	}
	out, _ = runBox(t, md.emptyRoot(t), Options{}, "connect", ln.Addr().String())
	if strings.TrimSpace(out) != "ECONNREFUSED" {
		t.Errorf("connect to the host's listener without network: %q, want ECONNREFUSED", out)
	}
	s := md.emptyRoot(t)
	s.Network = true
	out, _ = runBox(t, s, Options{}, "connect", ln.Addr().String())
	if strings.TrimSpace(out) != "ok" {
		t.Errorf("connect with network: %q, want ok", out)
	}
}

// Switch runs the payload as another identity; Resolve makes the kernel
// check every bind source's path for that identity, so a root launcher
// cannot expose a file in a directory the agent could not enter.
func TestSandboxIdentity(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		if md.as1000 {
			t.Skip("only uid 1000 is mapped in this mode")
		}
		nobody := &Identity{UID: 65534, GID: 65534}
		s := md.emptyRoot(t)
		s.Switch, s.Resolve = nobody, nobody
		must(t, os.Chown(s.Root.Source, 65534, 65534)) // mount points are created as the resolving identity
		out, _ := runBox(t, s, md.options(), "status")
		if f := fields(out); !strings.HasPrefix(f["Uid"], "65534 65534 65534 65534") || f["Groups"] != "" {
			t.Errorf("identity inside: Uid %q Groups %q\n%s", f["Uid"], f["Groups"], out)
		}
		private := t.TempDir()
		must(t, os.Chmod(private, 0o700))
		must(t, os.WriteFile(filepath.Join(private, "f"), []byte("root only"), 0o644))
		s = md.emptyRoot(t)
		s.Switch, s.Resolve = nobody, nobody
		must(t, os.Chown(s.Root.Source, 65534, 65534))
		s.Mounts = append(s.Mounts, Mount{Kind: KindBind, Source: filepath.Join(private, "f"), Target: "/f", ReadOnly: true, Line: 3})
		s.Argv = []string{payloadName, "read", "/f"}
		_, err := Start(s, md.options())
		if abi.CodeOf(err) != abi.EACCES || !strings.Contains(err.Error(), "mount line 3") {
			t.Errorf("bind of a file behind a 0700 root directory as uid 65534: %v, want EACCES naming mount line 3", err)
		}
	})
}

// A sandbox that cannot be built does not run: Start reports why (with the
// mount line) and nothing is left running.
func TestSandboxFailsClosed(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		s := md.emptyRoot(t)
		s.Mounts = append(s.Mounts, Mount{Kind: KindBind, Source: "/nonexistent/x", Target: "/x", Line: 4})
		s.Argv = []string{payloadName, "exit"}
		_, err := Start(s, md.options())
		if abi.CodeOf(err) != abi.ENOENT || !strings.Contains(err.Error(), "mount line 4") {
			t.Errorf("missing source: %v, want ENOENT naming mount line 4", err)
		}
		s = md.emptyRoot(t)
		s.Cwd = "/no/such/dir"
		s.Argv = []string{payloadName, "exit"}
		if _, err := Start(s, md.options()); abi.CodeOf(err) != abi.ENOENT || !strings.Contains(err.Error(), "cwd") {
			t.Errorf("missing cwd: %v, want ENOENT naming cwd", err)
		}
		s = md.emptyRoot(t)
		s.Path, s.Argv = "/bin/sh", []string{"sh"}
		if _, err := Start(s, md.options()); abi.CodeOf(err) != abi.ENOENT {
			t.Errorf("a program the root does not hold: %v, want ENOENT", err)
		}
	})
}

// Killing the sandbox (the init) leaves no process of it anywhere: the
// payload and the child it left behind die with the pid namespace. The
// payload's exit status comes back through Wait.
func TestSandboxKillLeavesNothing(t *testing.T) {
	eachMode(t, func(t *testing.T, md mode) {
		out, code := runBox(t, md.emptyRoot(t), md.options(), "exit")
		if code != 7 {
			t.Errorf("exit status %d (%q), want 7", code, out)
		}
		p, _ := startBox(t, md.emptyRoot(t), md.options(), "spawn-sleep")
		nsLink, err := os.Readlink("/proc/" + strconv.Itoa(p.Pid()) + "/ns/pid_for_children")
		must(t, err)
		waitFor(t, "two processes in the sandbox", func() bool { return len(inPidNS(nsLink)) >= 3 })
		p.Kill()
		p.Wait()
		waitFor(t, "no process left", func() bool { return len(inPidNS(nsLink)) == 0 })
	})
}

// inPidNS lists host pids whose pid namespace is ns (init included).
func inPidNS(ns string) []int {
	es, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			out = append(out, pid)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runPlain runs this test binary as a payload outside any sandbox.
func runPlain(args ...string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	p, err := os.StartProcess(self, args, &os.ProcAttr{Files: []*os.File{nil, w, os.Stderr}})
	w.Close()
	if err != nil {
		r.Close()
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	r.Close()
	_, err = p.Wait()
	return b.String(), err
}
