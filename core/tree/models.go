package tree

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
)

// ModelSpec is a provider model object as `ctx model add` and `ctx model
// refresh` write it: listing metadata in the object file, the rest in .d/.
// It never holds a secret.
type ModelSpec struct {
	ID       string   // stable provider/model
	Listing  []abi.KV // id, name, description, type, created_at, owned_by, context_length
	Driver   []byte   // .d/driver: a driver name or a route table
	NativeID string   // .d/id
	Caps     []abi.Capability
	Defaults []abi.KV // .d/default
	Session  string   // none | socket
}

// ListingKeys are the first metadata keys of a model object (model-abi).
var ListingKeys = []string{"id", "name", "description", "type", "created_at", "owned_by", "context_length"}

// WriteModel writes spec under tier (a root or home/<uid>). A new model gets
// its object file and every control file. An existing one is EEXIST unless
// refresh is set: then only the object file's metadata is rewritten and
// missing control files are added, so a user's .d/ edits are kept. It
// reports whether the object was created.
func WriteModel(tier, runner string, spec ModelSpec, refresh bool) (bool, error) {
	provider, name, err := abi.SplitModelID(spec.ID)
	if err != nil {
		return false, err
	}
	if _, err := abi.ParseRoutes(spec.Driver); err != nil {
		return false, err
	}
	dir := filepath.Join(tier, ModelDir, provider)
	if err := mkdirMode(dir); err != nil {
		return false, err
	}
	obj := filepath.Join(dir, name)
	_, statErr := os.Lstat(obj)
	exists := statErr == nil
	if exists && !refresh {
		return false, abi.Errorf(abi.EEXIST, "model %s already exists at %s", spec.ID, obj)
	}
	kv := make([]abi.KV, 0, len(spec.Listing)+1)
	for _, l := range spec.Listing {
		kv = append(kv, abi.KV{Key: l.Key, Value: oneLine(l.Value)})
	}
	routes, _ := abi.ParseRoutes(spec.Driver)
	kv = append(kv, abi.KV{Key: "driver", Value: strings.Join(routes[abi.RouteDefault], ",")})
	content, err := Meta{Runner: runner, Class: abi.ClassModel, KV: kv}.Format()
	if err != nil {
		return false, err
	}
	if err := atomicfile.WriteFile(obj, content, ObjectMode); err != nil {
		return false, err
	}
	ctl := abi.CtlDir(obj)
	if err := mkdirMode(ctl); err != nil {
		return false, err
	}
	session := spec.Session
	if session == "" {
		session = "none"
	}
	var caps strings.Builder
	for _, c := range spec.Caps {
		caps.WriteString(string(c) + "\n")
	}
	defaults, err := abi.FormatKV(spec.Defaults)
	if err != nil {
		return false, err
	}
	files := []struct {
		name string
		body []byte
	}{
		{"id", []byte(spec.NativeID + "\n")},
		{"driver", spec.Driver},
		{"cap", []byte(caps.String())},
		{"default", append([]byte("# KEY=VALUE defaults, one per line (temperature, max_tokens, …); never a secret\n"), defaults...)},
		{"session", []byte(session + "\n")},
		{"status", []byte("ready\n")},
		{"log", nil},
		{"native", []byte("# diagnostics only, not stable ABI\n")},
	}
	for _, f := range files {
		p := filepath.Join(ctl, f.name)
		if _, err := os.Lstat(p); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := atomicfile.WriteFile(p, f.body, ControlMode); err != nil {
			return false, err
		}
	}
	return !exists, nil
}

func mkdirMode(p string) error {
	if err := os.MkdirAll(p, DirMode); err != nil {
		return err
	}
	return os.Chmod(p, DirMode)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
