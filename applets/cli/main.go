package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/core/abi"
)

// Main runs the applet argv selects and returns the process exit code.
func Main(argv []string) int {
	a, args, ok := applets.Resolve(argv)
	name := "cortexfs"
	if len(argv) > 0 {
		name = filepath.Base(argv[0])
	}
	env := &applets.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Name: name}
	if len(argv) > 0 {
		env.Argv0 = argv[0]
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: unknown applet (try: cortexfs --list)\n", name)
		return abi.ExitUsage
	}
	env.Name = a.Name
	return ExitCode(env, a.Run(context.Background(), env, args))
}

// ExitCode maps an applet's error to its exit status, reporting it on stderr
// unless the applet already did.
func ExitCode(env *applets.Env, err error) int {
	if err == nil || errors.Is(err, ErrHelp) {
		return abi.ExitOK
	}
	var exit *ExitStatus
	if errors.As(err, &exit) {
		return exit.Code
	}
	var rep *Reported
	if !errors.As(err, &rep) {
		fmt.Fprintln(env.Stderr, HumanError(env.Name, err))
	}
	return abi.ExitCodeOf(err)
}

// ExitStatus carries an exact exit code chosen by an applet (for example a
// child's status), already reported.
type ExitStatus struct{ Code int }

func (e *ExitStatus) Error() string { return fmt.Sprintf("exit status %d", e.Code) }
