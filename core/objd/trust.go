package objd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

// steeringFiles are the control files that decide where and how a model
// run goes (.d/default holds base_url). status, log and native are the
// daemon's own output, not input.
var steeringFiles = []string{"id", "driver", "default", "cap", "session"}

// Trusted reports whether only uid or root can change what steers runs of
// o: the object file, its steering control files, and every directory from
// the object's tier down to them. cortexfsd runs with its own provider
// credentials and sends them where .d/default points, so a file another
// user can write — or a symlink that could point anywhere — must never
// steer it. Any doubt is EACCES.
func Trusted(o tree.Object, uid int) error {
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
