package fs

import (
	"bytes"
	"context"
	"os"
	"strconv"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/policy"
)

// caller is who sent one FUSE request: the uid and gid the kernel put in
// its header (the calling thread's fsuid/fsgid, mapped into the mounter's
// user namespace) and the thread id, from which the supplementary groups
// are read only when a check depends on them.
type caller struct {
	uid, gid uint32
	pid      uint32
	groups   []uint32
	loaded   bool // groups read (or found unreadable: known=false)
	known    bool
}

// callerOf reads the request's caller from ctx. A request without one (no
// FUSE context: a test calling a node directly) is treated as nobody, so a
// missing header can only refuse.
func callerOf(ctx context.Context) *caller {
	if c, ok := fuse.FromContext(ctx); ok {
		return &caller{uid: c.Uid, gid: c.Gid, pid: c.Pid}
	}
	return &caller{uid: nobody, gid: nobody}
}

const nobody = 65534

// maxStatus bounds the read of /proc/<tid>/status (65536 groups of 10
// digits fit).
const maxStatus = 1 << 20

// loadGroups reads the caller's supplementary groups from
// /proc/<tid>/status. The header carries a thread id; credentials are per
// thread in the kernel, so the thread's own status is the right one. The
// requesting thread is blocked in its system call until we answer, so the
// id cannot have been reused meanwhile unless the thread was killed — and
// then nobody reads the answer.
func (c *caller) loadGroups() {
	if c.loaded {
		return
	}
	c.loaded = true
	if c.pid == 0 {
		return
	}
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(c.pid), 10) + "/status")
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, maxStatus)
	n, _ := readFull(f, buf)
	if groups, ok := parseStatusGroups(buf[:n]); ok {
		c.groups, c.known = groups, true
	}
}

func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			return n, err
		}
	}
	return n, nil
}

// parseStatusGroups finds the "Groups:" line of a /proc/<pid>/status file:
// whitespace-separated decimal gids. ok is false when the line is missing
// or malformed.
func parseStatusGroups(status []byte) ([]uint32, bool) {
	for len(status) > 0 {
		line, rest, _ := bytes.Cut(status, []byte("\n"))
		status = rest
		v, found := bytes.CutPrefix(line, []byte("Groups:"))
		if !found {
			continue
		}
		var out []uint32
		for _, f := range bytes.Fields(v) {
			g, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return nil, false
			}
			out = append(out, uint32(g))
		}
		return out, true
	}
	return nil, false
}

// permits is the mode-bit check of want on a file with attributes st for
// this caller (policy.Cred.Permits), reading the caller's supplementary
// groups only when the answer depends on them. When they cannot be read,
// both the group and the other triad must allow: a caller whose groups are
// unknown never gets more than either would give.
func (c *caller) permits(st *unix.Stat_t, want policy.Access) bool {
	mode, uid, gid := st.Mode&0o7777, st.Uid, st.Gid
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	cred := policy.Cred{UID: c.uid, GID: c.gid}
	if c.uid == 0 || c.uid == uid || c.gid == gid || !policy.NeedsGroups(mode) {
		return cred.Permits(mode, uid, gid, isDir, want)
	}
	c.loadGroups()
	if c.known {
		cred.Groups = c.groups
		return cred.Permits(mode, uid, gid, isDir, want)
	}
	asGroup := policy.Cred{UID: c.uid, GID: gid}
	return asGroup.Permits(mode, uid, gid, isDir, want) && cred.Permits(mode, uid, gid, isDir, want)
}
