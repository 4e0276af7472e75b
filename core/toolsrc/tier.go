package toolsrc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tree"
)

// SocketName is the socket of a tier's tool sources: <tier>/.tools.sock,
// served by the cortexfsd that serves the tier. Runners of the tier's MCP
// and native plugin tools call through it.
const SocketName = ".tools.sock"

// TierRef names one tier: the system tier (the CortexFS root) or home/<uid>.
type TierRef struct {
	Root   tree.Root
	System bool
	UID    int // home/<uid>; for the system tier the owner of the root
	Path   string
}

// SystemTier is the root's own tier.
func SystemTier(r tree.Root) TierRef { return TierRef{Root: r, System: true, Path: string(r)} }

// HomeTier is home/<uid>.
func HomeTier(r tree.Root, uid int) TierRef {
	return TierRef{Root: r, UID: uid, Path: r.Home(uid)}
}

// Name is "system" or "home/<uid>", as `ctx ls` names tiers.
func (t TierRef) Name() string {
	if t.System {
		return "system"
	}
	return "home/" + strconv.Itoa(t.UID)
}

// rel is the tier's path relative to the root ("." for the system tier).
func (t TierRef) rel() string {
	if t.System {
		return "."
	}
	return filepath.Join(tree.HomeDir, strconv.Itoa(t.UID))
}

// Socket is the tier's tool source socket.
func (t TierRef) Socket() string { return filepath.Join(t.Path, SocketName) }

// ConfigFile is the tier's .mcp.json.
func (t TierRef) ConfigFile() string { return filepath.Join(t.Path, MCPConfigFile) }

// PluginsDir is the tier's plugins directory.
func (t TierRef) PluginsDir() string { return filepath.Join(t.Path, PluginsDir) }

// ToolDir is the tier's tool directory.
func (t TierRef) ToolDir() string { return filepath.Join(t.Path, tree.ToolDir) }

// Owner is who a tier belongs to: its sources run as this user, its
// projected files are theirs.
type Owner struct {
	UID, GID int
	Groups   []uint32
	Home     string
	Name     string
}

// openTier opens the tier directory beneath the root without following a
// symlink, and returns it with its owner (the directory's uid). A home
// tier must be owned by the uid it is named for, or by root.
func openTier(t TierRef) (*safefs.Dir, Owner, error) {
	root, err := safefs.OpenRoot(string(t.Root))
	if err != nil {
		return nil, Owner{}, err
	}
	defer root.Close()
	d, err := root.OpenDir(t.rel())
	if err != nil {
		return nil, Owner{}, err
	}
	st, err := d.Stat()
	if err != nil {
		d.Close()
		return nil, Owner{}, err
	}
	uid := int(st.Uid)
	if !t.System && uid != t.UID && uid != 0 {
		d.Close()
		return nil, Owner{}, abi.Errorf(abi.EACCES, "%s is owned by uid %d, not %d: not serving it", t.Path, uid, t.UID)
	}
	if !t.System {
		uid = t.UID
	}
	return d, lookupOwner(uid, int(st.Gid)), nil
}

// lookupOwner fills gid, groups and home from the user database; an
// unknown uid runs with the tier's gid and no supplementary groups.
func lookupOwner(uid, fallbackGID int) Owner {
	o := Owner{UID: uid, GID: fallbackGID, Home: "/", Name: strconv.Itoa(uid)}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return o
	}
	o.Name, o.Home = u.Username, u.HomeDir
	if g, err := strconv.Atoi(u.Gid); err == nil {
		o.GID = g
	}
	if gs, err := u.GroupIds(); err == nil {
		for _, g := range gs {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				o.Groups = append(o.Groups, uint32(n))
			}
		}
	}
	return o
}

// Credential is what a process started for the tier runs as: nil when
// this process already is the owner (or cannot become anyone else).
func (o Owner) Credential() *syscall.Credential {
	if os.Geteuid() != 0 || o.UID == os.Geteuid() {
		return nil
	}
	return &syscall.Credential{Uid: uint32(o.UID), Gid: uint32(o.GID), Groups: o.Groups}
}

// trustedStat refuses a file or directory that another user could change:
// it must be owned by the tier's owner or root and not be writable by
// group or others. Whoever could change it could make the tier's sources
// run their code as the owner.
func trustedStat(st unix.Stat_t, name string, owner int) error {
	switch {
	case int(st.Uid) != owner && st.Uid != 0:
		return abi.Errorf(abi.EACCES, "not trusted: %s is owned by uid %d (want %d or root)", name, st.Uid, owner)
	case st.Mode&0o022 != 0:
		return abi.Errorf(abi.EACCES, "not trusted: %s is writable by group or others (mode %04o)", name, st.Mode&0o7777)
	}
	return nil
}

// readTrusted reads a regular file rel beneath d after proving it trusted
// (no symlink on the way, bounded). A missing file is (nil, nil).
func readTrusted(d *safefs.Dir, rel string, owner int, max int64) ([]byte, unix.Stat_t, error) {
	var st unix.Stat_t
	f, err := d.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, st, nil
	}
	if err != nil {
		return nil, st, err
	}
	defer f.Close()
	if st, err = safefs.Fstat(f); err != nil {
		return nil, st, err
	}
	if err := trustedStat(st, f.Name(), owner); err != nil {
		return nil, st, err
	}
	if st.Size > max {
		return nil, st, abi.Errorf(abi.EMSGSIZE, "%s is larger than %d bytes", f.Name(), max)
	}
	b := make([]byte, st.Size+1)
	n, _ := f.Read(b)
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	if int64(n) > max {
		return nil, st, abi.Errorf(abi.EMSGSIZE, "%s is larger than %d bytes", f.Name(), max)
	}
	return b[:n], st, nil
}

// checkTrustedDir refuses a directory (rel beneath d) another user could
// change.
func checkTrustedDir(d *safefs.Dir, rel string, owner int) error {
	st, err := d.Lstat(rel)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return abi.Errorf(abi.EINVAL, "%s is not a directory", filepath.Join(d.Path(), rel))
	}
	return trustedStat(st, filepath.Join(d.Path(), rel), owner)
}

// ServedTiers lists the tiers a daemon running as euid serves: as root,
// the system tier and every home/<uid> owned by its uid; as anyone else,
// the tiers that user owns (the system tier of a tree they own, and
// home/<euid>).
func ServedTiers(r tree.Root, euid int) []TierRef {
	var out []TierRef
	if fi, err := os.Lstat(string(r)); err == nil && fi.IsDir() {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (euid == 0 || int(st.Uid) == euid) {
			out = append(out, SystemTier(r))
		}
	}
	es, _ := os.ReadDir(r.Path(tree.HomeDir))
	var uids []int
	for _, e := range es {
		uid, err := strconv.Atoi(e.Name())
		if err != nil || uid < 0 || strconv.Itoa(uid) != e.Name() || !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		if euid == 0 || uid == euid {
			uids = append(uids, uid)
		}
	}
	sort.Ints(uids)
	for _, uid := range uids {
		out = append(out, HomeTier(r, uid))
	}
	return out
}

// CallerTiers are the tiers a user's commands look at: the system tier and
// their own home tier.
func CallerTiers(r tree.Root, uid int) []TierRef {
	return []TierRef{SystemTier(r), HomeTier(r, uid)}
}

func (t TierRef) String() string { return fmt.Sprintf("%s (%s)", t.Name(), t.Path) }
