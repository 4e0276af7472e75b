package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// steeringFiles are the control files that decide where and how a model
// run goes (.d/default holds base_url). status, log and native are the
// daemon's own output, not input.
var steeringFiles = []string{"id", "driver", "default", "cap", "session"}

// Trusted reports whether only uid or root can change what steers runs of
// o: the object file, its steering control files, and every directory from
// the object's tier down to them. A process that runs a model with its own
// provider credentials (cortexfsd, a root one-shot run, an agent runtime)
// sends them where .d/default points, so a file another user can write —
// or a symlink that could point anywhere — must never steer it. Any doubt
// is EACCES.
func Trusted(o Object, uid int) error {
	_, err := TrustStamp(o, uid, time.Time{})
	return err
}

// stampMargin is how long before a read a file must have last changed for
// its stat to stand for its content: file timestamps come from a coarse
// clock (a tick or more), so a write in the same tick as a read can leave
// size, mtime and ctime as they were.
const stampMargin = time.Second

// TrustStamp is Trusted that also fingerprints what it checked: the
// device, inode, size, mode, owner, mtime and ctime of the object file, its
// .d/, its steering files and the directories above them. Equal stamps
// mean none of them changed (a chmod, a chown, a write and a rename all
// move ctime or the inode), so a caller may keep what it read from them.
// The stamp is "" unless every entry last changed at least stampMargin
// before since (the caller's read time): a change made in the same
// timestamp tick as the read would not show in the stamp. A zero since
// skips fingerprinting.
func TrustStamp(o Object, uid int, since time.Time) (string, error) {
	var stamp strings.Builder
	stable := !since.IsZero()
	limit := since.Add(-stampMargin).UnixNano()
	paths := []string{o.Tier}
	for d := filepath.Dir(o.Path); d != o.Tier && len(d) > len(o.Tier); d = filepath.Dir(d) {
		paths = append(paths, d)
	}
	paths = append(paths, o.Path, o.Ctl(""))
	for _, f := range steeringFiles {
		paths = append(paths, o.Ctl(f))
	}
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Clean(p))
		if errors.Is(err, fs.ErrNotExist) && p != o.Path && p != o.Ctl("") {
			if stable {
				fmt.Fprintf(&stamp, "%s absent\n", p)
			}
			continue // optional control files
		}
		if err != nil {
			return "", abi.Errorf(abi.EACCES, "not trusted: %v", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", abi.Errorf(abi.EACCES, "not trusted: %s is a symlink", p)
		case !ok:
			return "", abi.Errorf(abi.EACCES, "not trusted: cannot read the owner of %s", p)
		case st.Uid != uint32(uid) && st.Uid != 0:
			return "", abi.Errorf(abi.EACCES, "not trusted: %s is owned by uid %d", p, st.Uid)
		case fi.Mode().Perm()&0o022 != 0:
			return "", abi.Errorf(abi.EACCES, "not trusted: %s is writable by group or others (mode %04o)", p, fi.Mode().Perm())
		}
		if stable {
			m, c := st.Mtim.Nano(), st.Ctim.Nano()
			stable = m < limit && c < limit
			fmt.Fprintf(&stamp, "%s %d:%d %d %o %d %d %d\n", p, st.Dev, st.Ino, st.Size, st.Mode, st.Uid, m, c)
		}
	}
	if !stable {
		return "", nil
	}
	return stamp.String(), nil
}

// CheckSteering applies the trust rule to a process of uid about to run o
// with its own credentials: running an object you own is yours to do (and
// your own permissions bound what it can reach), so an unprivileged owner
// passes; anyone else — root included, whose credentials and reach are the
// largest — needs Trusted(o, uid).
func CheckSteering(o Object, uid int) error {
	if uid != 0 {
		var st syscall.Stat_t
		if err := syscall.Lstat(o.Path, &st); err == nil && int(st.Uid) == uid {
			return nil
		}
	}
	return Trusted(o, uid)
}
