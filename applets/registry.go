// Package applets is the registry of the multi-call binary: each applet
// registers under the name it answers to as argv[0].
package applets

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"sync"
)

// Env is what an applet sees of its process: standard streams and the name
// it was invoked as. Tests run applets in-process with their own Env.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Name   string // applet name as dispatched (basename of argv[0] or argv[1])
	Argv0  string // argv[0] as the kernel gave it (a shebang's interpreter path)

	// Describe, when set, receives a command's flag set instead of its
	// --help text being printed: shell completion collects every
	// command's flags by running it with --help (see applets/cli).
	Describe func(synopsis string, fs *flag.FlagSet)
}

// Applet is one command of the binary.
type Applet struct {
	Name    string
	Summary string // one line for `cortexfs --list --json` and README's table
	Run     func(ctx context.Context, env *Env, args []string) error
}

var (
	mu       sync.RWMutex
	registry = map[string]Applet{}
)

// Register adds an applet. A duplicate or empty name is a programming error
// and panics at init time, like u-root's registry.
func Register(a Applet) {
	mu.Lock()
	defer mu.Unlock()
	if a.Name == "" || a.Run == nil {
		panic("applets: Register with empty name or nil Run")
	}
	if _, dup := registry[a.Name]; dup {
		panic(fmt.Sprintf("applets: duplicate applet %q", a.Name))
	}
	registry[a.Name] = a
}

// Lookup finds an applet by name.
func Lookup(name string) (Applet, bool) {
	mu.RLock()
	defer mu.RUnlock()
	a, ok := registry[name]
	return a, ok
}

// All returns the registered applets sorted by name.
func All() []Applet {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Applet, 0, len(registry))
	for _, a := range registry {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Version is set at link time (-X github.com/cortexfs/cortexfs/applets.Version=…).
var Version = ""

// CurrentVersion is the link-time version, else the VCS revision or module
// version from the build info, else "dev": never empty.
func CurrentVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
	}
	return "dev"
}
