package ns

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// The seccomp filter of every sandbox refuses, with EPERM, the system
// calls container runtimes refuse by default (Docker's and Podman's
// profiles, bubblewrap's TIOCSTI rule): everything that mounts, changes
// namespaces or the root, loads kernel code, reaches into another
// process's memory, or touches the machine as a whole. Everything else is
// allowed: the payload is already unprivileged, and a deny list keeps
// ordinary programs — shells, compilers, language runtimes — working.
//
// On top of the list:
//   - clone(2) with any CLONE_NEW* flag is EPERM (a new namespace is what
//     unshare(2) would give);
//   - clone3(2) is ENOSYS: its flags sit in memory a filter cannot read,
//     and libc and Go fall back to clone(2) on ENOSYS;
//   - ioctl(2) TIOCSTI and TIOCLINUX are EPERM (pushing input into the
//     terminal of whoever started the sandbox);
//   - a system call of another architecture (a 32-bit entry on a 64-bit
//     kernel, x32) is EPERM: the numbers below are this architecture's.

// deniedCommon exist on every 64-bit architecture Go supports on Linux.
var deniedCommon = []uintptr{
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOUNT_SETATTR,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_KCMP,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF,
	unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME,
	unix.SYS_SYSLOG, unix.SYS_VHANGUP, unix.SYS_LOOKUP_DCOOKIE,
	unix.SYS_OPEN_BY_HANDLE_AT,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_NFSSERVCTL,
	unix.SYS_MBIND, unix.SYS_SET_MEMPOLICY, unix.SYS_MIGRATE_PAGES, unix.SYS_MOVE_PAGES,
}

// nsCloneFlags are the clone(2) flags that create namespaces.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// Terminal ioctls refused.
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// seccomp_data offsets (include/uapi/linux/seccomp.h): nr, arch, ip,
// args[6]; a 64-bit argument's low word comes first on little-endian
// machines, and the flags and ioctl numbers checked here fit in it.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
)

// Return values.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// filterProgram is the BPF program of the filter for this architecture.
func filterProgram() ([]unix.SockFilter, error) {
	if auditArch == 0 {
		return nil, abi.Errorf(abi.ENOTSUP, "seccomp: no filter for this architecture; refusing to run unfiltered")
	}
	var p prog
	p.ld(offArch)
	p.jeq(auditArch, "", "eperm")
	p.ld(offNr)
	if x32Bit != 0 {
		p.jge(x32Bit, "eperm", "")
	}
	for _, nr := range append(append([]uintptr(nil), deniedCommon...), deniedArch...) {
		p.jeq(uint32(nr), "eperm", "")
	}
	p.jeq(unix.SYS_CLONE, "clone", "")
	p.jeq(unix.SYS_CLONE3, "enosys", "")
	p.jeq(unix.SYS_IOCTL, "ioctl", "")
	p.ret(retAllow)
	p.label("clone")
	p.ld(offArg0)
	p.jset(nsCloneFlags, "eperm", "")
	p.ret(retAllow)
	p.label("ioctl")
	p.ld(offArg1)
	for _, c := range deniedIoctls {
		p.jeq(c, "eperm", "")
	}
	p.ret(retAllow)
	p.label("eperm")
	p.ret(retEPERM)
	p.label("enosys")
	p.ret(retENOSYS)
	return p.assemble()
}

// installSeccomp loads the filter for every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC), which also gives them no_new_privs. The
// caller has set no_new_privs, which lets an unprivileged process install
// a filter at all.
func installSeccomp() error {
	insns, err := filterProgram()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return abi.Errorf(codeOf(errno), "seccomp: install the filter: %v", errno)
	}
	return nil
}

// prog assembles classic BPF with forward jumps to labels.
type prog struct {
	insns  []unix.SockFilter
	jumps  []jump
	labels map[string]int
}

type jump struct {
	at     int
	jt, jf string
}

func (p *prog) ld(off uint32) {
	p.insns = append(p.insns, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

func (p *prog) ret(k uint32) {
	p.insns = append(p.insns, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

func (p *prog) jeq(k uint32, jt, jf string)  { p.jmp(unix.BPF_JEQ, k, jt, jf) }
func (p *prog) jge(k uint32, jt, jf string)  { p.jmp(unix.BPF_JGE, k, jt, jf) }
func (p *prog) jset(k uint32, jt, jf string) { p.jmp(unix.BPF_JSET, k, jt, jf) }

// jmp adds a conditional jump; "" means the next instruction.
func (p *prog) jmp(op uint16, k uint32, jt, jf string) {
	p.jumps = append(p.jumps, jump{at: len(p.insns), jt: jt, jf: jf})
	p.insns = append(p.insns, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (p *prog) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.insns)
}

func (p *prog) assemble() ([]unix.SockFilter, error) {
	for _, j := range p.jumps {
		for _, t := range []struct {
			name string
			dst  *uint8
		}{{j.jt, &p.insns[j.at].Jt}, {j.jf, &p.insns[j.at].Jf}} {
			if t.name == "" {
				continue
			}
			to, ok := p.labels[t.name]
			off := to - j.at - 1
			if !ok || off < 0 || off > 255 {
				return nil, abi.Errorf(abi.EIO, "seccomp: bad jump to %q", t.name)
			}
			*t.dst = uint8(off)
		}
	}
	return p.insns, nil
}
