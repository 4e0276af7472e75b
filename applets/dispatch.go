package applets

import "path/filepath"

// Multiplexer is the applet that answers as the binary's own name.
const Multiplexer = "cortexfs"

// Resolve picks the applet for argv: the basename of argv[0] when it names
// an applet (a hardlink, or a shebang interpreter path), else the
// multiplexer, which then reads argv[1]. It returns the applet and its args.
// Dispatch never looks at os.Executable(): under a shebang the kernel passes
// the interpreter path from the #! line as argv[0].
func Resolve(argv []string) (Applet, []string, bool) {
	if len(argv) == 0 {
		return Applet{}, nil, false
	}
	if a, ok := Lookup(filepath.Base(argv[0])); ok {
		return a, argv[1:], true
	}
	a, ok := Lookup(Multiplexer)
	return a, argv[1:], ok
}
