package tree

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

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
			continue // optional control files
		}
		if err != nil {
			return abi.Errorf(abi.EACCES, "not trusted: %v", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return abi.Errorf(abi.EACCES, "not trusted: %s is a symlink", p)
		case !ok:
			return abi.Errorf(abi.EACCES, "not trusted: cannot read the owner of %s", p)
		case st.Uid != uint32(uid) && st.Uid != 0:
			return abi.Errorf(abi.EACCES, "not trusted: %s is owned by uid %d", p, st.Uid)
		case fi.Mode().Perm()&0o022 != 0:
			return abi.Errorf(abi.EACCES, "not trusted: %s is writable by group or others (mode %04o)", p, fi.Mode().Perm())
		}
	}
	return nil
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
