package ns

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// The reasons clone(2) gives for refusing namespaces become stable codes:
// a kernel without user namespaces (EINVAL), a limit of 0 (ENOSPC) is
// ENOTSUP; a policy against them (EPERM) is EPERM.
func TestStartErrCodes(t *testing.T) {
	cases := []struct {
		errno  unix.Errno
		userns bool
		want   abi.Code
	}{
		{unix.EINVAL, true, abi.ENOTSUP},
		{unix.ENOSPC, true, abi.ENOTSUP},
		{unix.EUSERS, true, abi.ENOTSUP},
		{unix.EPERM, true, abi.EPERM},
		{unix.EPERM, false, abi.EPERM},
		{unix.ENOMEM, false, abi.EIO},
	}
	for _, c := range cases {
		if got := abi.CodeOf(startErr(c.errno, c.userns)); got != c.want {
			t.Errorf("startErr(%v, userns=%v) = %s, want %s", c.errno, c.userns, got, c.want)
		}
	}
}
