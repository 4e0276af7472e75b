package tool

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// eaccesFixturesEnv tells a re-executed test binary, running unprivileged,
// where TestEACCES's fixtures are.
const eaccesFixturesEnv = "CORTEXFS_TOOL_TEST_EACCES_FIXTURES"

// nobody is the unprivileged uid/gid the root run re-executes as.
const nobody = 65534

// TestEACCES drives real permission failures. Root passes every mode-bit
// check, so as root the test binary re-runs this test as uid/gid 65534.
func TestEACCES(t *testing.T) {
	if dir := os.Getenv(eaccesFixturesEnv); dir != "" {
		checkEACCES(t, dir)
		return
	}
	dir := eaccesFixtures(t)
	if os.Geteuid() != 0 {
		checkEACCES(t, dir)
		return
	}
	bin := filepath.Join(dir, "tool.test")
	if err := copyExecutable(bin); err != nil {
		t.Fatalf("copy test binary: %v", err)
	}
	cmd := exec.Command(bin, "-test.run=^TestEACCES$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), eaccesFixturesEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("SKIP LOUDLY: cannot re-run as uid %d to test EACCES (%v); permission errors are untested here", nobody, err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestEACCES") {
		t.Fatalf("as uid %d: %v\n%s", nobody, err, out)
	}
	t.Logf("re-run as uid %d:\n%s", nobody, out)
}

// eaccesFixtures builds, in a directory everyone may enter and write:
// an unreadable file, a read-only file, a read-only directory and a
// directory nobody but root may enter.
func eaccesFixtures(t *testing.T) string {
	dir := t.TempDir()
	// t.TempDir's parent is 0700; the unprivileged re-run must get in.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	mkfile(t, dir, "secret", "s", 0)
	mkfile(t, dir, "readonly", "keep", 0o444)
	for name, mode := range map[string]os.FileMode{"rodir": 0o555, "closed": 0} {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		mkfile(t, p, "f", "inside", 0o644)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "closed"), 0o755) })
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "rodir"), 0o755) })
	return dir
}

func checkEACCES(t *testing.T, dir string) {
	if os.Geteuid() == 0 {
		t.Fatal("checkEACCES must run unprivileged")
	}
	tests := []struct {
		tool, args string
	}{
		{"fs.read", `{"path":"secret"}`},
		{"fs.read", `{"path":"closed/f"}`},
		{"fs.write", `{"path":"rodir/new","content":"x"}`},
		{"fs.write", `{"path":"rodir/f","content":"x"}`},
		{"fs.write", `{"path":"rodir/sub/f","content":"x","create_dirs":true}`},
		{"fs.write", `{"path":"closed/f","content":"x"}`},
		// The directory is writable, so only the access check stops a
		// rename from replacing a file the caller may not write.
		{"fs.write", `{"path":"readonly","content":"x"}`},
		{"fs.write", `{"path":"readonly","content":"x","mode":"0644"}`},
		{"shell.exec", `{"cmd":"pwd","cwd":"closed"}`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			_, err := call(t, context.Background(), tt.tool, Env{Cwd: dir}, tt.args)
			wantErr(t, err, abi.EACCES, tt.tool+": ", "permission denied")
		})
	}
	if data, err := os.ReadFile(filepath.Join(dir, "readonly")); err != nil || string(data) != "keep" {
		t.Errorf("readonly = %q, %v", data, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %q", left)
	}
}

func copyExecutable(dst string) error {
	src, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestErrnoMapping pins the codes callers see for OS errors, including
// EROFS, which no unprivileged test can produce for real.
func TestErrnoMapping(t *testing.T) {
	tests := []struct {
		errno syscall.Errno
		code  abi.Code
	}{
		{syscall.EACCES, abi.EACCES},
		{syscall.EPERM, abi.EACCES},
		{syscall.EROFS, abi.EROFS},
		{syscall.ENOENT, abi.ENOENT},
		{syscall.ENOTDIR, abi.ENOENT},
		{syscall.EINVAL, abi.EINVAL},
		{syscall.ENAMETOOLONG, abi.EINVAL},
		{syscall.EEXIST, abi.EEXIST},
		{syscall.EIO, abi.EIO},
	}
	for _, tt := range tests {
		for _, tool := range []string{"fs.read", "fs.write", "shell.exec"} {
			err := toolErr(tool, &fs.PathError{Op: "open", Path: "/x", Err: tt.errno})
			if got := abi.CodeOf(err); got != tt.code {
				t.Errorf("%s: %v maps to %s, want %s", tool, tt.errno, got, tt.code)
			}
			if !errors.Is(err, tt.errno) {
				t.Errorf("%s: %v is no longer reachable with errors.Is", tool, tt.errno)
			}
			if !strings.HasPrefix(err.Error(), tool+": open /x: ") {
				t.Errorf("message %q", err)
			}
		}
	}
}
