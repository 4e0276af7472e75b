package ns

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	// x32Bit marks the x32 ABI's system call numbers on x86-64: same
	// kernel entry, other numbers; refused wholesale.
	x32Bit = 0x40000000
)

// deniedArch exist on x86-64 only.
var deniedArch = []uintptr{
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_CREATE_MODULE, unix.SYS_GET_KERNEL_SYMS, unix.SYS_QUERY_MODULE,
	unix.SYS_USELIB, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS__SYSCTL,
}
