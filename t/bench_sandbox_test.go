package t

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/ns"
)

func init() { addBench("PF4-sandbox", benchPF4) }

// benchPF4: start a sandbox with the isolation of `bwrap --unshare-all
// --ro-bind / / --proc /proc --dev /dev` (user, ipc, pid, net, uts and
// cgroup namespaces; / bound read-only and recursively; a fresh /proc; a
// minimal /dev) and run a static hello in it, from this process through
// the ns package as ctx-agent does, against that bwrap command. Ours adds
// what bwrap does not do by default (a seccomp filter). Runs alternate,
// median of 25 each.
func benchPF4(t *testing.T, f floors) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		figure("PF4 ns sandbox start + hello", "skipped", "bwrap is not installed (Debian package bubblewrap); no floor, no figure")
		return
	}
	hello := f.helloPath
	ids := []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	ours := func() {
		spec := &ns.Spec{
			Root:   ns.Mount{Kind: ns.KindBind, Source: "/", Recursive: true, ReadOnly: true, NoSuid: true},
			Mounts: []ns.Mount{{Kind: ns.KindProc, Target: "/proc"}, {Kind: ns.KindDev, Target: "/dev"}},
			Path:   hello, Argv: []string{"hello"},
		}
		p, err := ns.Start(spec, ns.Options{Exe: binPath, UIDMap: ids, GIDMap: gids, Stdout: io.Discard})
		if err != nil {
			t.Fatalf("sandbox: %v", err)
		}
		if code := p.Wait(); code != 0 {
			t.Fatalf("hello in the sandbox exited %d", code)
		}
	}
	theirs := func() {
		cmd := exec.Command(bwrap, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", hello)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("bwrap: %v\n%s", err, out)
		}
	}
	const n = 25
	ours()
	theirs()
	var a, b []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		ours()
		a = append(a, time.Since(start))
		start = time.Now()
		theirs()
		b = append(b, time.Since(start))
	}
	slices.Sort(a)
	slices.Sort(b)
	addRow(row{figure: "PF4 ns sandbox start + hello", ours: ms(a[n/2]), floor: ms(b[n/2]), goal: ratioAtMost(1.0),
		note: fmt.Sprintf("floor: %s --unshare-all --ro-bind / / --proc /proc --dev /dev hello; ours adds a seccomp filter; median of %d each, alternating", bwrap, n)})
}
