package tree

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
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
	// Everything below the tier is walked by descriptor without following
	// symlinks (core/safefs): root writing a model into a tree others can
	// write must not be redirected.
	t, err := safefs.OpenRoot(tier)
	if errors.Is(err, fs.ErrNotExist) {
		// The tier itself is the caller's choice of path (a root or
		// home/<uid>); create it the way ctx init would.
		if err := os.MkdirAll(tier, DirMode); err != nil {
			return false, err
		}
		t, err = safefs.OpenRoot(tier)
	}
	if err != nil {
		return false, err
	}
	defer t.Close()
	pd, err := t.MkdirAll(filepath.Join(ModelDir, provider), DirMode, safefs.Keep)
	if err != nil {
		return false, err
	}
	defer pd.Close()
	obj := filepath.Join(tier, ModelDir, provider, name)
	_, statErr := pd.Lstat(name)
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
	if err := pd.WriteFile(name, content, ObjectMode, safefs.Keep); err != nil {
		return false, err
	}
	cd, err := pd.MkdirAll(name+abi.CtlSuffix, DirMode, safefs.Keep)
	if err != nil {
		return false, err
	}
	defer cd.Close()
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
		if _, err := cd.Lstat(f.name); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := cd.WriteFile(f.name, f.body, ControlMode, safefs.Keep); err != nil {
			return false, err
		}
	}
	return !exists, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
