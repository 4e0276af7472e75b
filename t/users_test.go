package t

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// testUser is an ordinary local account the adversarial tests act as.
type testUser struct {
	Name     string
	UID, GID int
}

// Cred runs a child process as the user (no supplementary groups).
func (u testUser) Cred() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}}
}

// Env is what a login of the user would have in HOME and USER.
func (u testUser) Env(home string) []string {
	return []string{"HOME=" + home, "USER=" + u.Name, "LOGNAME=" + u.Name}
}

// needRoot skips with a loud reason when the test cannot act as root (CI is
// root; a developer's unprivileged run skips these).
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): needs root to create a second user and run a root daemon; CI runs as root")
	}
}

// ensureUser returns the local account name, creating it (a system account
// without a home directory or login shell) when it does not exist. Creation
// is serialised across concurrent test processes with a lock file and is
// idempotent; accounts are left in place for later runs. Tests that share an
// account must not depend on its files: give each area its own name.
func ensureUser(t testing.TB, name string) testUser {
	t.Helper()
	needRoot(t)
	lock, err := os.OpenFile("/run/cortexfs-t-users.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("user lock: %v", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatalf("user lock: %v", err)
	}
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd %s: %v\n%s", name, err, out)
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("lookup %s after useradd: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return testUser{Name: name, UID: uid, GID: gid}
}

// String names the account in failure messages.
func (u testUser) String() string { return fmt.Sprintf("%s(%d:%d)", u.Name, u.UID, u.GID) }
