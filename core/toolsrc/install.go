package toolsrc

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// Bounds of one plugin directory copied by InstallPlugin.
const (
	MaxPluginBytes = 512 << 20
	MaxPluginFiles = 10000
	maxPluginDepth = 32
)

// InstallPlugin copies the plugin in src (a directory holding
// manifest.toml and, for a native plugin, its library) into
// <tier>/plugins/<name>/, name from the manifest. The manifest is checked
// first; the copy takes regular files and directories only (a symlink is
// refused: what is installed must be what was reviewed), drops group and
// other write bits (files become 0644, or 0755 when executable), is staged under plugins/.install-* and renamed into
// place. An installed plugin of that name is EEXIST unless replace.
func InstallPlugin(ref TierRef, src string, replace bool) (Manifest, error) {
	raw, err := readSourceFile(filepath.Join(src, ManifestFile))
	if err != nil {
		return Manifest{}, err
	}
	man, err := ParseManifest(raw)
	if err != nil {
		return Manifest{}, err
	}
	if man.Native != nil {
		fi, err := os.Lstat(filepath.Join(src, filepath.FromSlash(man.Native.Library)))
		if err != nil || !fi.Mode().IsRegular() {
			return Manifest{}, abi.Errorf(abi.ENOENT, "%s: native.library %s is not a regular file in %s", ManifestFile, man.Native.Library, src)
		}
	}
	d, fo, _, err := editTier(ref)
	if err != nil {
		return Manifest{}, err
	}
	defer d.Close()
	pd, err := d.MkdirAll(PluginsDir, 0o755, fo)
	if err != nil {
		return Manifest{}, err
	}
	defer pd.Close()
	if _, err := pd.Lstat(man.Name); err == nil && !replace {
		return Manifest{}, abi.Errorf(abi.EEXIST, "plugin %s is installed (ctx plugin rm %s first, or --replace)", man.Name, man.Name)
	}
	stage := ".install-" + randHex()
	sd, err := pd.MkdirAll(stage, 0o755, fo)
	if err != nil {
		return Manifest{}, err
	}
	c := copier{fo: fo}
	err = c.tree(src, sd, 0)
	sd.Close()
	if err != nil {
		_ = pd.RemoveAll(stage)
		return Manifest{}, err
	}
	old := ""
	if _, err := pd.Lstat(man.Name); err == nil {
		old = ".old-" + randHex()
		if err := pd.Rename(man.Name, pd, old); err != nil {
			_ = pd.RemoveAll(stage)
			return Manifest{}, err
		}
	}
	if err := pd.Rename(stage, pd, man.Name); err != nil {
		_ = pd.RemoveAll(stage)
		return Manifest{}, err
	}
	if old != "" {
		_ = pd.RemoveAll(old)
	}
	return man, pd.Sync()
}

// RemovePlugin removes <tier>/plugins/<name>/.
func RemovePlugin(ref TierRef, name string) error {
	if err := ValidSourceName(name); err != nil {
		return err
	}
	d, _, _, err := editTier(ref)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.Lstat(path.Join(PluginsDir, name)); err != nil {
		return abi.Errorf(abi.ENOENT, "no plugin %s in %s", name, ref.Name())
	}
	return d.RemoveAll(path.Join(PluginsDir, name))
}

// PluginEntry is one installed plugin as `ctx plugin ls` shows it.
type PluginEntry struct {
	Tier     string    `json:"tier"`
	Name     string    `json:"name"`
	Manifest *Manifest `json:"manifest,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// ListPlugins reads every plugin of a tier.
func ListPlugins(ref TierRef) ([]PluginEntry, error) {
	d, owner, err := openTier(ref)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	pd, err := d.OpenDir(PluginsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer pd.Close()
	names, err := pd.Names()
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []PluginEntry
	for _, n := range names {
		if n[0] == '.' {
			continue
		}
		e := PluginEntry{Tier: ref.Name(), Name: n}
		if man, _, err := loadPlugin(pd, n, owner.UID); err != nil {
			e.Error = err.Error()
		} else {
			e.Manifest = &man
		}
		out = append(out, e)
	}
	return out, nil
}

func randHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// readSourceFile reads a file of the directory being installed (the
// caller's own files), bounded.
func readSourceFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigFile+1))
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "%s: %v", p, err)
	}
	if len(b) > MaxConfigFile {
		return nil, abi.Errorf(abi.EMSGSIZE, "%s: larger than %d bytes", p, MaxConfigFile)
	}
	return b, nil
}

// copier copies a plugin directory into a staging directory.
type copier struct {
	fo    safefs.Owner
	files int
	bytes int64
}

func (c *copier) tree(src string, dst *safefs.Dir, depth int) error {
	if depth > maxPluginDepth {
		return abi.Errorf(abi.EINVAL, "%s: nested deeper than %d directories", src, maxPluginDepth)
	}
	es, err := os.ReadDir(src)
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), "%v", err)
	}
	for _, e := range es {
		p := filepath.Join(src, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return abi.Errorf(abi.CodeOf(err), "%v", err)
		}
		if c.files++; c.files > MaxPluginFiles {
			return abi.Errorf(abi.EINVAL, "%s: more than %d files", src, MaxPluginFiles)
		}
		switch {
		case fi.IsDir():
			sub, err := dst.MkdirAll(e.Name(), 0o755, c.fo)
			if err != nil {
				return err
			}
			err = c.tree(p, sub, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := c.file(p, fi, dst, e.Name()); err != nil {
				return err
			}
		default:
			return abi.Errorf(abi.EINVAL, "%s is a %s: a plugin directory holds regular files and directories only", p, kindOf(fi.Mode()))
		}
	}
	return nil
}

func (c *copier) file(p string, fi os.FileInfo, dst *safefs.Dir, name string) error {
	if c.bytes += fi.Size(); c.bytes > MaxPluginBytes {
		return abi.Errorf(abi.EMSGSIZE, "plugin directory larger than %d bytes", MaxPluginBytes)
	}
	in, err := os.Open(p)
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), "%v", err)
	}
	defer in.Close()
	// Installed files are readable by everyone (callers run process
	// plugins with their own rights) and writable by the owner only.
	mode := os.FileMode(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	out, err := dst.Create(name, mode, c.fo)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, fi.Size()+1)); err != nil {
		out.Close()
		return abi.Errorf(abi.EIO, "copy %s: %v", p, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return abi.Errorf(abi.EIO, "sync %s: %v", p, err)
	}
	return out.Close()
}

func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
