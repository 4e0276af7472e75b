package toolsrc

import (
	"errors"
	"io/fs"
	"os"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// Editing a tier's configuration (ctx mcp add|rm, ctx plugin install|rm)
// is done by the tier's owner or root, fd-relative beneath the tier.

// editTier opens the tier for an edit by this process: only its owner or
// root may change what runs as the owner.
func editTier(ref TierRef) (*safefs.Dir, safefs.Owner, Owner, error) {
	d, owner, err := openTier(ref)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, safefs.Keep, owner, abi.Errorf(abi.ENOENT, "%s does not exist (ctx init first)", ref.Path)
		}
		return nil, safefs.Keep, owner, err
	}
	euid := os.Geteuid()
	if euid != 0 && euid != owner.UID {
		d.Close()
		return nil, safefs.Keep, owner, abi.Errorf(abi.EACCES, "%s belongs to uid %d: only its owner or root may change its tool sources", ref.Name(), owner.UID)
	}
	fo := safefs.Keep
	if euid == 0 {
		fo = safefs.Owner{UID: owner.UID, GID: owner.GID}
	}
	return d, fo, owner, nil
}

// ConfigMode is the mode of .mcp.json as written here: its env and headers
// may hold credentials.
const ConfigMode = 0o600

// ReadMCPConfig reads a tier's .mcp.json (missing is empty).
func ReadMCPConfig(ref TierRef) (MCPConfig, error) {
	d, owner, err := openTier(ref)
	if errors.Is(err, fs.ErrNotExist) {
		return MCPConfig{}, nil
	}
	if err != nil {
		return MCPConfig{}, err
	}
	defer d.Close()
	raw, _, err := readTrusted(d, MCPConfigFile, owner.UID, MaxConfigFile)
	if err != nil {
		return MCPConfig{}, err
	}
	return ParseMCPConfig(raw)
}

// AddMCPServer adds (or with replace, replaces) one server in the tier's
// .mcp.json, keeping everything else in the file; written atomically,
// mode 0600, owned by the tier's owner.
func AddMCPServer(ref TierRef, s ServerConfig, replace bool) error {
	return editConfig(ref, func(b []byte) ([]byte, error) { return AddServer(b, s, replace) })
}

// RemoveMCPServer removes one server from the tier's .mcp.json.
func RemoveMCPServer(ref TierRef, name string) error {
	return editConfig(ref, func(b []byte) ([]byte, error) { return RemoveServer(b, name) })
}

func editConfig(ref TierRef, edit func([]byte) ([]byte, error)) error {
	d, fo, owner, err := editTier(ref)
	if err != nil {
		return err
	}
	defer d.Close()
	raw, st, err := readTrusted(d, MCPConfigFile, owner.UID, MaxConfigFile)
	if err != nil {
		return err
	}
	out, err := edit(raw)
	if err != nil {
		return err
	}
	mode := os.FileMode(ConfigMode)
	if raw != nil && st.Mode&0o077 == 0 {
		mode = os.FileMode(st.Mode & 0o700) // keep a tighter mode the owner chose
	}
	return d.WriteFile(MCPConfigFile, out, mode|0o600, fo)
}

// MayEdit reports whether this process may change the tier's tool
// sources (it is root or the tier's owner).
func MayEdit(ref TierRef) bool {
	d, _, _, err := editTier(ref)
	if err != nil {
		return false
	}
	d.Close()
	return true
}
