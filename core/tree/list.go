package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Entry is one object found in a tree listing.
type Entry struct {
	Path    string    `json:"path"`
	Class   abi.Class `json:"class"`
	Name    string    `json:"name"`               // tool/agent name or model id
	Tier    string    `json:"tier"`               // "system" or "home/<uid>"
	Status  string    `json:"status"`             // .d/status, "" when absent
	AliasOf string    `json:"alias_of,omitempty"` // identity of a symlink alias
	Session string    `json:"session,omitempty"`  // models: none | socket
	Error   string    `json:"error,omitempty"`    // why the object is unusable
}

// Runnable says why the object o cannot run through the kernel's shebang:
// its file is not executable by the caller, or its runner is missing or
// not executable (exec would fail with the shell's 126 or 127 and no word
// of why). nil when both are fine. List and Doctor report the same.
func Runnable(o Object) error {
	if unix.Access(o.Path, unix.X_OK) != nil {
		mode := "?"
		if fi, err := os.Stat(o.Path); err == nil {
			mode = fmt.Sprintf("%04o", fi.Mode().Perm())
		}
		return abi.Errorf(abi.EACCES, "object file is not executable (mode %s; chmod 755 %s)", mode, o.Path)
	}
	if err := RunnerProblem(o.Meta.Runner); err != nil {
		return abi.Errorf(abi.CodeOf(err), "%v: the object cannot run (ctx init --runner PATH, or cortexfs install DIR)", err)
	}
	return nil
}

// List walks the system tiers and home/<uid> of the given uid and returns
// every object and alias, sorted by path. It never writes anything. An
// object that cannot run (Runnable) keeps its class and carries the reason
// in Error.
func List(r Root, uid int) ([]Entry, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	var out []Entry
	tiers := map[string]string{string(r): "system", r.Home(uid): filepath.Join(HomeDir, uidString(uid))}
	for tierDir, tier := range tiers {
		for _, class := range []string{ModelDir, ToolDir, AgentDir} {
			dir := filepath.Join(tierDir, class)
			es, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				p := filepath.Join(dir, e.Name())
				if class == ModelDir && e.IsDir() && !strings.HasSuffix(e.Name(), abi.CtlSuffix) {
					sub, _ := os.ReadDir(p)
					for _, s := range sub {
						out = appendEntry(out, filepath.Join(p, s.Name()), tier)
					}
					continue
				}
				out = appendEntry(out, p, tier)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func appendEntry(out []Entry, p, tier string) []Entry {
	base := filepath.Base(p)
	if strings.HasSuffix(base, abi.CtlSuffix) || strings.HasSuffix(base, abi.SockSuffix) || strings.HasPrefix(base, ".") {
		return out
	}
	fi, err := os.Lstat(p)
	if err != nil || fi.IsDir() {
		return out
	}
	e := Entry{Path: p, Tier: tier}
	o, err := Resolve(p)
	if err != nil {
		e.Name, e.Error = base, err.Error()
		return append(out, e)
	}
	e.Class, e.Name = o.Class, o.Name
	if fi.Mode()&os.ModeSymlink != 0 {
		e.AliasOf = o.Name
	}
	e.Status, _ = o.CtlString("status")
	if err := Runnable(o); err != nil {
		e.Error = err.Error()
	}
	if o.Class == abi.ClassModel {
		e.Session, _ = o.CtlString("session")
		if e.Session == "" {
			e.Session = "none"
		}
	}
	return append(out, e)
}

func uidString(uid int) string { return strconv.Itoa(uid) }
