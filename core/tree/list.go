package tree

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

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

// List walks the system tiers and home/<uid> of the given uid and returns
// every object and alias, sorted by path. It never writes anything.
func List(r Root, uid int) ([]Entry, error) {
	if fi, err := os.Stat(string(r)); err != nil || !fi.IsDir() {
		return nil, abi.Errorf(abi.ENOENT, "no CortexFS root at %s (run ctx init)", r)
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
	if o.Class == abi.ClassModel {
		e.Session, _ = o.CtlString("session")
		if e.Session == "" {
			e.Session = "none"
		}
	}
	return append(out, e)
}

func uidString(uid int) string { return strconv.Itoa(uid) }
