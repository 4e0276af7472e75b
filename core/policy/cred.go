package policy

import "slices"

// Access is what a mode-bit check asks for: read, write, execute (search,
// for a directory). Values are the bits of the "other" triad, so they can be
// shifted onto the owner and group triads.
type Access uint32

// The access bits.
const (
	MayExec  Access = 1
	MayWrite Access = 2
	MayRead  Access = 4
)

// Cred is a Linux identity as a permission check sees it: the effective uid
// and gid and the supplementary groups (step 1 and 2 of the seed's
// "Permission check order"). The zero Cred is root.
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32
}

// InGroup reports whether gid is the primary group or a supplementary one.
func (c Cred) InGroup(gid uint32) bool { return c.GID == gid || slices.Contains(c.Groups, gid) }

// Permits answers a mode-bit check of want against a file with permission
// bits mode (the low 12 bits of st_mode), owner uid and group gid, the way
// the kernel's generic_permission does without ACLs: root may read and
// write anything and search any directory, and may execute a regular file
// only when some execute bit is set; anyone else gets the owner triad when
// they own the file, else the group triad when they are in its group, else
// the other triad — and never falls through to a wider triad.
func (c Cred) Permits(mode, uid, gid uint32, isDir bool, want Access) bool {
	if want == 0 {
		return true
	}
	if c.UID == 0 {
		if want&MayExec == 0 || isDir {
			return true
		}
		return mode&0o111 != 0
	}
	var bits uint32
	switch {
	case c.UID == uid:
		bits = mode >> 6
	case c.InGroup(gid):
		bits = mode >> 3
	default:
		bits = mode
	}
	return Access(bits&7)&want == want
}

// NeedsGroups reports whether the answer of Permits for a caller who is
// neither root nor the owner, and whose primary gid is not gid, can depend
// on the supplementary groups: only when the group triad grants something
// the other triad does not. Callers use it to skip reading a process's
// group list.
func NeedsGroups(mode uint32) bool { return (mode>>3)&7 != mode&7 }
