package tree

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// RunnerName is the applet name every #! line must end in: the binary
// dispatches on the interpreter path the kernel passes as argv[0].
const RunnerName = "cortexfs-object-runner"

// FindRunner is the interpreter for the #! lines of a tree when `ctx init`
// is given no --runner: the cortexfs-object-runner beside binary (the
// running cortexfs, found by the caller through /proc/self/exe, so
// `build/demo/bin/ctx init` points at build/demo/bin/cortexfs-object-runner),
// else DefaultRunner when it is there. Neither is ENOENT with the commands
// that fix it: a shebang naming a file that does not exist only fails
// later, with the shell's "required file not found".
func FindRunner(binary string) (string, error) {
	var tried []string
	if binary != "" {
		p := filepath.Join(filepath.Dir(binary), RunnerName)
		if RunnerProblem(p) == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if RunnerProblem(DefaultRunner) == nil {
		return DefaultRunner, nil
	}
	tried = append(tried, DefaultRunner)
	return "", abi.Errorf(abi.ENOENT, "no %s at %s: install the applets with `cortexfs install DIR` (or make install) and run DIR/ctx init, or give --runner PATH",
		RunnerName, joinOr(tried))
}

// RunnerProblem says why path cannot serve as a #! interpreter: missing,
// not a regular file, or not executable by the caller. nil when it can.
func RunnerProblem(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return abi.Errorf(abi.CodeOf(err), "runner %s does not exist", path)
	case !fi.Mode().IsRegular():
		return abi.Errorf(abi.EINVAL, "runner %s is not a regular file", path)
	case unix.Access(path, unix.X_OK) != nil:
		return abi.Errorf(abi.EACCES, "runner %s is not executable", path)
	}
	return nil
}

// CurrentRunner is the interpreter the tree's debug/echo model already
// names, "" when there is none (no tree yet, or no echo object).
func CurrentRunner(r Root) string {
	if o, err := Resolve(r.ModelPath(EchoModel.ID)); err == nil {
		return o.Meta.Runner
	}
	return ""
}

func joinOr(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " or " + s[len(s)-1]
}
