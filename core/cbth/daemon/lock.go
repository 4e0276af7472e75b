package daemon

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Lock is an flock(2) held on a file; the kernel drops it when the holder
// dies, so a kill -9 never leaves a stale lock.
type Lock struct{ f *os.File }

func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "lock %s: %v", path, err)
	}
	return f, nil
}

// TryLock takes an exclusive lock without waiting; EBUSY if held.
func TryLock(path string) (*Lock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, abi.Errorf(abi.EBUSY, "%s is held by another process", path)
	}
	return &Lock{f}, nil
}

// WaitLock takes an exclusive lock, waiting until ctx is done.
func WaitLock(ctx context.Context, path string) (*Lock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	for {
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			return &Lock{f}, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, abi.Errorf(abi.ETIMEDOUT, "waiting for %s: %v", path, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Unlock releases the lock.
func (l *Lock) Unlock() {
	if l != nil && l.f != nil {
		unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}
