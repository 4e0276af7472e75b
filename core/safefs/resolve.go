package safefs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// beneath is the resolution of every walk below a Dir:
//
//   - RESOLVE_BENEATH: the kernel fails (EXDEV) any resolution that would
//     leave the starting directory — "..", an absolute path, an absolute
//     symlink — checked during the walk itself, so a rename racing the
//     walk cannot move it outside.
//   - RESOLVE_NO_SYMLINKS: the kernel fails (ELOOP) on a symlink in any
//     component, not only the last one (which is all O_NOFOLLOW covers).
//   - RESOLVE_NO_MAGICLINKS: /proc/PID/fd-style links are refused too
//     (NO_SYMLINKS implies it; stated so the intent survives edits).
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// noOpenat2 is set once openat2 answered ENOSYS: from then on walks are done
// one component at a time (walk). Tests set it to cover that path.
var noOpenat2 atomic.Bool

// openFlags are added to every open: O_NOFOLLOW refuses a symlink as the
// last component even on the fallback walk; O_CLOEXEC keeps descriptors out
// of children; O_NOCTTY keeps a terminal from becoming ours; O_NONBLOCK
// makes opening a FIFO return at once (read side) or fail with ENXIO
// (write side, no reader) instead of blocking until a peer shows up.
const openFlags = unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK

// openBeneath opens rel below dirfd without following any symlink.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	flags |= openFlags
	if flags&unix.O_PATH != 0 {
		// O_PATH takes no other flags but these: openat2 refuses the
		// rest with EINVAL (open(2) silently drops them).
		flags &= unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		mode = 0 // openat2 refuses a mode without O_CREAT (EINVAL)
	}
	if !noOpenat2.Load() {
		for range 16 {
			// Without O_NOFOLLOW: RESOLVE_NO_SYMLINKS already fails a
			// trailing symlink with ELOOP, where O_NOFOLLOW|O_DIRECTORY
			// would fail it with a misleading ENOTDIR.
			fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: uint64(flags &^ unix.O_NOFOLLOW), Mode: uint64(mode), Resolve: beneath})
			switch err {
			case unix.EINTR, unix.EAGAIN:
				// EAGAIN: with RESOLVE_BENEATH the kernel gives up (rather
				// than risk an escape) when a rename or mount raced the
				// walk; trying again is what the man page asks for.
				continue
			case unix.ENOSYS:
				noOpenat2.Store(true)
			default:
				return fd, err
			}
			break
		}
		if !noOpenat2.Load() {
			return -1, unix.EAGAIN
		}
	}
	return walk(dirfd, rel, flags, mode)
}

// walk is openBeneath without openat2: each directory component is opened
// with O_PATH|O_DIRECTORY|O_NOFOLLOW relative to the previous one (a
// symlink component fails with ELOOP, a non-directory with ENOTDIR), and
// only the last is opened with flags. rel is already checked by clean, so
// there is no ".." and no absolute path to escape with.
func walk(dirfd int, rel string, flags int, mode uint32) (int, error) {
	parts := strings.Split(rel, "/")
	cur, owned := dirfd, false
	defer func() {
		if owned {
			unix.Close(cur)
		}
	}()
	for _, p := range parts[:len(parts)-1] {
		if p == "." {
			continue
		}
		fd, err := unix.Openat(cur, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, symlinkErr(cur, p, err)
		}
		if owned {
			unix.Close(cur)
		}
		cur, owned = fd, true
	}
	for {
		fd, err := unix.Openat(cur, parts[len(parts)-1], flags, mode)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			err = symlinkErr(cur, parts[len(parts)-1], err)
		}
		return fd, err
	}
}

// symlinkErr reports ELOOP, as openat2 would, when the component that
// failed to open is a symlink: O_NOFOLLOW|O_DIRECTORY on a symlink fails
// with ENOTDIR, not ELOOP.
func symlinkErr(dirfd int, name string, err error) error {
	if err == unix.ENOTDIR {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return unix.ELOOP
		}
	}
	return err
}

// clean checks a path relative to a Dir: not empty, not absolute, no ".."
// component, no NUL. It returns the cleaned path ("." for the Dir itself).
func clean(rel string) (string, error) {
	if rel == "" || strings.IndexByte(rel, 0) >= 0 || filepath.IsAbs(rel) {
		return "", abi.Errorf(abi.EINVAL, "safefs: %q is not a relative path", trunc(rel))
	}
	c := filepath.Clean(rel)
	if !filepath.IsLocal(c) && c != "." {
		return "", abi.Errorf(abi.EINVAL, "safefs: %q leaves its directory", trunc(rel))
	}
	return c, nil
}

// split is clean plus the parent and the last component ("." has none).
func split(rel string) (dir, base string, err error) {
	c, err := clean(rel)
	if err != nil {
		return "", "", err
	}
	if c == "." {
		return "", "", abi.Errorf(abi.EINVAL, "safefs: %q names no entry", trunc(rel))
	}
	dir, base = filepath.Split(c)
	if dir == "" {
		dir = "."
	}
	return filepath.Clean(dir), base, nil
}

// pathErr gives a failed syscall its stable code. The cause stays an
// *fs.PathError, so errors.Is(err, fs.ErrNotExist) and the errno survive.
func pathErr(op, path string, err error) error {
	var ae *abi.Error
	if errors.As(err, &ae) {
		return err
	}
	pe := &fs.PathError{Op: op, Path: path, Err: err}
	switch {
	case errors.Is(err, unix.ELOOP):
		return abi.Errorf(abi.ELOOP, "%s %s: refusing to follow a symlink on the way: %w", op, path, pe)
	case errors.Is(err, unix.EXDEV):
		return abi.Errorf(abi.EACCES, "%s %s: resolution would leave the directory: %w", op, path, pe)
	case errors.Is(err, unix.ENXIO), errors.Is(err, unix.EISDIR):
		return abi.Errorf(abi.EINVAL, "%s %s: not a regular file: %w", op, path, pe)
	}
	return abi.Errorf(abi.CodeOf(err), "%s %s: %w", op, path, pe)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
