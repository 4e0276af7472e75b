package ns

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// runFilter interprets the classic BPF subset the filter uses against one
// seccomp_data, as the kernel would.
func runFilter(t *testing.T, insns []unix.SockFilter, arch uint32, nr uint32, args [6]uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(insns); pc++ {
		in := insns[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var cond bool
			switch in.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				cond = acc == in.K
			case unix.BPF_JGE:
				cond = acc >= in.K
			case unix.BPF_JSET:
				cond = acc&in.K != 0
			}
			if cond {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		default:
			t.Fatalf("instruction %d: unexpected code %#x", pc, in.Code)
		}
	}
	t.Fatalf("program fell off its end")
	return 0
}

// Every denied call is EPERM, ordinary calls are allowed, clone is refused
// only with namespace flags, clone3 is ENOSYS, TIOCSTI is refused, and a
// call from another architecture (or x32) never reaches the list.
func TestSeccompFilterTable(t *testing.T) {
	insns, err := filterProgram()
	if err != nil {
		t.Fatal(err)
	}
	if len(insns) > unix.BPF_MAXINSNS {
		t.Fatalf("%d instructions, the kernel takes %d", len(insns), unix.BPF_MAXINSNS)
	}
	arch := uint32(auditArch)
	for _, nr := range append(append([]uintptr(nil), deniedCommon...), deniedArch...) {
		if got := runFilter(t, insns, arch, uint32(nr), [6]uint64{}); got != retEPERM {
			t.Errorf("syscall %d: %#x, want EPERM", nr, got)
		}
	}
	allowed := []uintptr{unix.SYS_READ, unix.SYS_WRITE, unix.SYS_EXECVE, unix.SYS_GETPID, unix.SYS_OPENAT,
		unix.SYS_MMAP, unix.SYS_WAIT4, unix.SYS_SOCKET, unix.SYS_CONNECT, unix.SYS_PRCTL}
	for _, nr := range allowed {
		if got := runFilter(t, insns, arch, uint32(nr), [6]uint64{}); got != retAllow {
			t.Errorf("syscall %d: %#x, want ALLOW", nr, got)
		}
	}
	cases := []struct {
		name string
		nr   uintptr
		args [6]uint64
		want uint32
	}{
		{"clone thread", unix.SYS_CLONE, [6]uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, retAllow},
		{"clone fork+pidfd", unix.SYS_CLONE, [6]uint64{unix.CLONE_PIDFD | uint64(unix.SIGCHLD)}, retAllow},
		{"clone newuser", unix.SYS_CLONE, [6]uint64{unix.CLONE_NEWUSER}, retEPERM},
		{"clone newns", unix.SYS_CLONE, [6]uint64{unix.CLONE_NEWNS | uint64(unix.SIGCHLD)}, retEPERM},
		{"clone newnet", unix.SYS_CLONE, [6]uint64{unix.CLONE_NEWNET}, retEPERM},
		{"clone3", unix.SYS_CLONE3, [6]uint64{}, retENOSYS},
		{"ioctl TIOCSTI", unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSTI}, retEPERM},
		{"ioctl TIOCSTI high bits", unix.SYS_IOCTL, [6]uint64{0, 1<<32 | unix.TIOCSTI}, retEPERM},
		{"ioctl TIOCLINUX", unix.SYS_IOCTL, [6]uint64{0, unix.TIOCLINUX}, retEPERM},
		{"ioctl TCGETS", unix.SYS_IOCTL, [6]uint64{0, unix.TCGETS}, retAllow},
	}
	for _, c := range cases {
		if got := runFilter(t, insns, arch, uint32(c.nr), c.args); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	if got := runFilter(t, insns, unix.AUDIT_ARCH_I386, unix.SYS_GETPID, [6]uint64{}); got != retEPERM {
		t.Errorf("a call from another architecture: %#x, want EPERM", got)
	}
	if x32Bit != 0 {
		if got := runFilter(t, insns, arch, x32Bit|unix.SYS_GETPID, [6]uint64{}); got != retEPERM {
			t.Errorf("an x32 call: %#x, want EPERM", got)
		}
	}
}
