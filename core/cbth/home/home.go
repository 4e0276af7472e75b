// Package home locates $CBTH_HOME and keeps its layout private to the owner:
// directories 0700, files 0600, every directory owned by the current uid.
package home

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Home is one cbth state directory.
type Home struct{ Root string }

// Resolve picks the home: the --home flag, else $CBTH_HOME, else ~/.cbth.
// The result is absolute so a detached daemon sees the same path.
func Resolve(flagValue string) (Home, error) {
	root := flagValue
	if root == "" {
		root = os.Getenv("CBTH_HOME")
	}
	if root == "" {
		h, err := os.UserHomeDir()
		if err != nil || h == "" {
			return Home{}, abi.Errorf(abi.EINVAL, "cannot find the home directory: set CBTH_HOME or --home")
		}
		root = filepath.Join(h, ".cbth")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return Home{}, abi.Errorf(abi.EINVAL, "bad cbth home %q: %v", root, err)
	}
	return Home{Root: abs}, nil
}

// Paths under the home.
func (h Home) DB() string         { return filepath.Join(h.Root, "cbth.db") }
func (h Home) Config() string     { return filepath.Join(h.Root, "config.ini") }
func (h Home) RunDir() string     { return filepath.Join(h.Root, "run") }
func (h Home) Socket() string     { return filepath.Join(h.Root, "run", "cbth.sock") }
func (h Home) DaemonLock() string { return filepath.Join(h.Root, "run", "daemon.lock") }
func (h Home) StartLock() string  { return filepath.Join(h.Root, "run", "start.lock") }
func (h Home) PIDFile() string    { return filepath.Join(h.Root, "run", "daemon.pid") }
func (h Home) LogDir() string     { return filepath.Join(h.Root, "log") }
func (h Home) DaemonLog() string  { return filepath.Join(h.Root, "log", "daemon.log") }
func (h Home) StartError() string { return filepath.Join(h.Root, "run", "start-error.json") }
func (h Home) Artifacts() string  { return filepath.Join(h.Root, "artifacts") }
func (h Home) Tasks() string      { return filepath.Join(h.Root, "tasks") }

// Subdirs are created by Ensure.
func (h Home) Subdirs() []string {
	return []string{h.RunDir(), h.LogDir(), h.Artifacts(), h.Tasks()}
}

// Ensure creates the home and its subdirectories with mode 0700 and fails
// closed (EACCES) when an existing one is not owned by us or is wider than
// 0700: the socket and the store must never be reachable by another uid.
func (h Home) Ensure() error {
	if err := h.CheckSocketPath(); err != nil {
		return err
	}
	for _, d := range append([]string{h.Root}, h.Subdirs()...) {
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return abi.Errorf(abi.CodeOf(err), "cannot create %s: %v", d, err)
		}
		if err := CheckPrivateDir(d); err != nil {
			return err
		}
	}
	return nil
}

// CheckPrivate checks, cheaply enough for every request, that the home,
// its run directory and the socket are still the owner's alone.
func (h Home) CheckPrivate() error {
	for _, d := range []string{h.Root, h.RunDir()} {
		if err := CheckPrivateDir(d); err != nil {
			return err
		}
	}
	return CheckPrivateFile(h.Socket())
}

// MaxSocketPath is what sun_path holds (108 bytes with the NUL).
const MaxSocketPath = 107

// CheckSocketPath refuses a home whose socket path does not fit sun_path:
// binding or dialing it would fail, or worse, reach a truncated path.
func (h Home) CheckSocketPath() error {
	if n := len(h.Socket()); n > MaxSocketPath {
		return abi.Errorf(abi.EINVAL, "socket path %s is %d bytes; sun_path holds %d: use a shorter CBTH_HOME",
			h.Socket(), n, MaxSocketPath)
	}
	return nil
}

// CheckPrivateDir verifies d is a directory owned by the current uid with
// no group or other permission bits.
func CheckPrivateDir(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), "%s: %v", d, err)
	}
	if !fi.IsDir() {
		return abi.Errorf(abi.EACCES, "%s is not a directory", d)
	}
	return checkOwnerMode(d, fi, 0o700)
}

// CheckPrivateFile verifies p is owned by the current uid and not wider
// than 0600 (sockets included).
func CheckPrivateFile(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), "%s: %v", p, err)
	}
	return checkOwnerMode(p, fi, 0o600)
}

func checkOwnerMode(p string, fi fs.FileInfo, max fs.FileMode) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return abi.Errorf(abi.EACCES, "%s: cannot read owner", p)
	}
	if int(st.Uid) != os.Getuid() {
		return abi.Errorf(abi.EACCES, "%s is owned by uid %d, not %d", p, st.Uid, os.Getuid())
	}
	if perm := fi.Mode().Perm(); perm&^max != 0 {
		return abi.Errorf(abi.EACCES, "%s has mode %04o, wider than %04o (chmod %o %s)", p, perm, max, max, p)
	}
	return nil
}

// Problem is one finding of Audit.
type Problem struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

// Audit walks the home and reports every directory that is not 0700 and
// every file (or socket) that is not 0600, or not owned by us.
func (h Home) Audit() ([]Problem, error) {
	var out []Problem
	err := filepath.WalkDir(h.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) { // a temp file that came and went
				return nil
			}
			return err
		}
		want := fs.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		switch {
		case st != nil && int(st.Uid) != os.Getuid():
			out = append(out, Problem{p, fmt.Sprintf("owned by uid %d", st.Uid)})
		case fi.Mode().Perm() != want:
			out = append(out, Problem{p, fmt.Sprintf("mode %04o, want %04o", fi.Mode().Perm(), want)})
		}
		return nil
	})
	return out, err
}
