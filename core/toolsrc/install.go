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

	"golang.org/x/sys/unix"

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
//
// The source is read through one descriptor of its directory (see
// openSource), each entry beneath it without following a symlink, opened
// without blocking and checked on the descriptor actually read: root
// installing a directory another user controls copies that user's files,
// never a file the user swapped in a symlink for, a FIFO, or a hard link.
func InstallPlugin(ref TierRef, src string, replace bool) (Manifest, error) {
	sdir, err := openSource(src)
	if err != nil {
		return Manifest{}, err
	}
	defer sdir.Close()
	raw, err := readSourceFile(sdir, ManifestFile)
	if err != nil {
		return Manifest{}, err
	}
	man, err := ParseManifest(raw)
	if err != nil {
		return Manifest{}, err
	}
	if man.Native != nil {
		st, err := sdir.Lstat(filepath.FromSlash(man.Native.Library))
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
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
	err = c.tree(sdir, sd, 0)
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

// openSource opens the directory being installed. As root every
// component of its path must be a real directory (safefs.OpenRoot): a user
// who controls a name on the way could otherwise point root's install at a
// directory only root may read, and have it copied into a tier 0644. An
// unprivileged caller reads with its own rights, so symlinks on the way
// are resolved first.
func openSource(src string) (*safefs.Dir, error) {
	if os.Geteuid() != 0 {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil, abi.Errorf(abi.CodeOf(err), "%v", err)
		}
		src = real
	}
	d, err := safefs.OpenRoot(src)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, abi.Errorf(abi.ELOOP, "%s: as root the plugin directory is named by its real path, without symlinks (%v)", src, err)
		}
		return nil, err
	}
	return d, nil
}

// openSourceFile opens a regular file beneath dir for copying: no symlink
// followed, never blocking, one hard link only (another user's file linked
// into the directory is refused).
func openSourceFile(dir *safefs.Dir, name string) (*os.File, unix.Stat_t, error) {
	f, err := dir.Open(name)
	if err != nil {
		return nil, unix.Stat_t{}, err
	}
	st, err := safefs.Fstat(f)
	if err == nil && st.Nlink != 1 {
		err = abi.Errorf(abi.EACCES, "%s has %d hard links: a plugin directory holds files of its own", f.Name(), st.Nlink)
	}
	if err != nil {
		f.Close()
		return nil, st, err
	}
	return f, st, nil
}

// readSourceFile reads a file of the directory being installed, bounded.
func readSourceFile(dir *safefs.Dir, name string) ([]byte, error) {
	f, st, err := openSourceFile(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size > MaxConfigFile {
		return nil, abi.Errorf(abi.EMSGSIZE, "%s: larger than %d bytes", f.Name(), MaxConfigFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigFile+1))
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "%s: %v", f.Name(), err)
	}
	if len(b) > MaxConfigFile {
		return nil, abi.Errorf(abi.EMSGSIZE, "%s: larger than %d bytes", f.Name(), MaxConfigFile)
	}
	return b, nil
}

// copier copies a plugin directory into a staging directory.
type copier struct {
	fo    safefs.Owner
	files int
	bytes int64
}

func (c *copier) tree(src, dst *safefs.Dir, depth int) error {
	if depth > maxPluginDepth {
		return abi.Errorf(abi.EINVAL, "%s: nested deeper than %d directories", src.Path(), maxPluginDepth)
	}
	es, err := src.ReadDir(MaxPluginFiles + 1)
	if err != nil {
		return err
	}
	for _, e := range es {
		if c.files++; c.files > MaxPluginFiles {
			return abi.Errorf(abi.EINVAL, "%s: more than %d files", src.Path(), MaxPluginFiles)
		}
		switch e.Type {
		case unix.S_IFDIR:
			sub, err := src.OpenDir(e.Name)
			if err != nil {
				return err
			}
			out, err := dst.MkdirAll(e.Name, 0o755, c.fo)
			if err == nil {
				err = c.tree(sub, out, depth+1)
				out.Close()
			}
			sub.Close()
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := c.file(src, dst, e.Name); err != nil {
				return err
			}
		default:
			return abi.Errorf(abi.EINVAL, "%s is %s: a plugin directory holds regular files and directories only",
				filepath.Join(src.Path(), e.Name), safefs.Kind(e.Type))
		}
	}
	return nil
}

// file copies one regular file. What is copied is what the descriptor
// holds: had the name been swapped for a symlink or a FIFO since it was
// listed, the open refuses it.
func (c *copier) file(src, dst *safefs.Dir, name string) error {
	in, st, err := openSourceFile(src, name)
	if err != nil {
		return err
	}
	defer in.Close()
	if c.bytes += st.Size; c.bytes > MaxPluginBytes {
		return abi.Errorf(abi.EMSGSIZE, "plugin directory larger than %d bytes", MaxPluginBytes)
	}
	// Installed files are readable by everyone (callers run process
	// plugins with their own rights) and writable by the owner only.
	mode := os.FileMode(0o644)
	if st.Mode&0o111 != 0 {
		mode = 0o755
	}
	out, err := dst.Create(name, mode, c.fo)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, st.Size)); err != nil {
		out.Close()
		return abi.Errorf(abi.EIO, "copy %s: %v", in.Name(), err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return abi.Errorf(abi.EIO, "sync %s: %v", in.Name(), err)
	}
	return out.Close()
}
