package fs

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// asUID runs f on a thread whose filesystem uid and gid are uid (raw
// setfsuid/setfsgid/setgroups change the calling thread only); FUSE
// requests from it carry that uid.
func asUID(t *testing.T, uid uint32, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			t.Errorf("setgroups: %v", e)
			return
		}
		syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(uid), 0, 0)
		syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
		f()
		syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0)
		syscall.RawSyscall(syscall.SYS_SETFSGID, 0, 0, 0)
		if prev, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0); prev == 0 {
			runtime.UnlockOSThread() // else the thread dies with the goroutine
		}
	}()
	<-done
}

func mountForChecks(t *testing.T, o Options) (src, mnt string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): acting as another uid needs root; CI is root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("SKIP (loud): no /dev/fuse")
	}
	base, err := os.MkdirTemp("", "cortexfs-fs-checks-") // every ancestor traversable
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	src, mnt = filepath.Join(base, "src"), filepath.Join(base, "mnt")
	for _, d := range []string{filepath.Join(src, "private"), filepath.Join(src, "public"), mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(src, "private"), 0o700)
	os.WriteFile(filepath.Join(src, "private", "notes"), []byte("root's\n"), 0o644)
	os.WriteFile(filepath.Join(src, "public", "secret"), []byte("root's\n"), 0o600)
	os.WriteFile(filepath.Join(src, "public", "open"), []byte("everyone's\n"), 0o644)
	o.Source = src
	srv, err := Mount(mnt, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Unmount(true); srv.Wait() })
	return src, mnt
}

// The server checks every request's caller by itself: with the kernel's
// default_permissions left out, another uid still gets EACCES for what the
// durable tree refuses it, and what it may read it reads.
func TestServerChecksEachCaller(t *testing.T) {
	_, mnt := mountForChecks(t, Options{noKernelChecks: true})
	const nobody = 65534
	asUID(t, nobody, func() {
		if _, err := os.Stat(filepath.Join(mnt, "private", "notes")); !errors.Is(err, syscall.EACCES) {
			t.Errorf("lookup inside a 0700 directory of root: %v, want EACCES", err)
		}
		if _, err := os.ReadDir(filepath.Join(mnt, "private")); !errors.Is(err, syscall.EACCES) {
			t.Errorf("listing a 0700 directory of root: %v, want EACCES", err)
		}
		if _, err := os.ReadFile(filepath.Join(mnt, "public", "secret")); !errors.Is(err, syscall.EACCES) {
			t.Errorf("reading a 0600 file of root: %v, want EACCES", err)
		}
		if b, err := os.ReadFile(filepath.Join(mnt, "public", "open")); err != nil || string(b) != "everyone's\n" {
			t.Errorf("reading a 0644 file: %q, %v", b, err)
		}
	})
	if b, err := os.ReadFile(filepath.Join(mnt, "private", "notes")); err != nil || string(b) != "root's\n" {
		t.Errorf("root reading its own file: %q, %v", b, err)
	}
}

// Options.UID admits one uid and root; everyone else is refused.
func TestServerAdmitsOneUID(t *testing.T) {
	uid := uint32(4321)
	_, mnt := mountForChecks(t, Options{UID: &uid})
	asUID(t, 65534, func() {
		if _, err := os.ReadDir(mnt); !errors.Is(err, syscall.EACCES) {
			t.Errorf("another uid listing the mount: %v, want EACCES", err)
		}
	})
	asUID(t, uid, func() {
		if _, err := os.ReadFile(filepath.Join(mnt, "public", "open")); err != nil {
			t.Errorf("the admitted uid: %v", err)
		}
	})
	if _, err := os.ReadDir(mnt); err != nil {
		t.Errorf("root: %v", err)
	}
}
