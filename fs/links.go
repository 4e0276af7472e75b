package fs

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Hard links. A change made through one name of a file (a write, a chmod,
// a new link or an unlink changing st_nlink) is reported by inotify in the
// directory of that name only, so the attributes the kernel caches for the
// file's other names would go stale. The mount therefore knows which
// nodes show the same durable inode, invalidates all of them when any one
// changes, and gives files with several links short attribute timeouts
// (a link may live outside every watched directory).

// fileID is a durable inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

// links indexes the non-directory nodes by durable inode.
type links struct {
	mu   sync.Mutex
	byID map[fileID]map[*node]bool
}

// set records that n shows st (and no longer what it showed before).
func (l *links) set(n *node, old, st *unix.Stat_t, hadOld bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if hadOld && old.Mode&unix.S_IFMT != unix.S_IFDIR {
		if id := idOf(old); id != idOf(st) || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			l.drop(n, id)
		}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return
	}
	if l.byID == nil {
		l.byID = map[fileID]map[*node]bool{}
	}
	id := idOf(st)
	if l.byID[id] == nil {
		l.byID[id] = map[*node]bool{}
	}
	l.byID[id][n] = true
}

func (l *links) forget(n *node, st *unix.Stat_t) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(n, idOf(st))
}

func (l *links) drop(n *node, id fileID) {
	if set := l.byID[id]; set != nil {
		delete(set, n)
		if len(set) == 0 {
			delete(l.byID, id)
		}
	}
}

// peers are the nodes showing id.
func (l *links) peers(id fileID) []*node {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*node, 0, len(l.byID[id]))
	for n := range l.byID[id] {
		out = append(out, n)
	}
	return out
}

// attrTimeout is the attribute lifetime of node n with attributes st,
// under a parent that does (parentCaches) or does not watch its entries. An
// entry's attributes change through its parent directory (chmod, a write:
// reported by the parent's watch); a directory's also through what it
// holds (a new entry changes its mtime and link count: reported only by
// its own watch, which exists once the kernel looked inside it). They are
// cached for long only when every watch that would report a change is in
// place, and never for long for a file with several hard links.
func (n *node) attrTimeout(st *unix.Stat_t, parentCaches bool) time.Duration {
	cached := parentCaches
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		cached = cached && n.cachesChildren()
	case st.Nlink > 1:
		cached = false
	}
	return n.m.timeout(cached)
}
