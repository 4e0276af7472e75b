package sockstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// File names inside a DirStore session directory.
const (
	EventsFile = "events.jsonl"
	SendsFile  = "sends.jsonl"
)

// DirStore keeps each session in its own directory, chosen by Dir:
//
//	events.jsonl  every frame of the session, one per line, byte for byte
//	              as clients receive it ({"type":…,"id":"N","run":…});
//	              appended, fsynced at each run's done frame
//	sends.jsonl   the send index, one SendRecord per line:
//	              {"id":client id,"run":run id,"cwd":…,"temp":…,"input":…};
//	              appended and fsynced before the run starts
//
// Opening a session rebuilds everything else (the last event id, the
// idempotency map, the history) from these two files; a torn last line
// left by a crash is cut off.
//
// Session directories are 0700 and the files 0600, whatever the umask.
// The directory is reached from Root without following a symlink anywhere
// (core/safefs: ELOOP), and missing directories on the way are created
// 0700. When the process runs as root and the key's uid is not 0, the
// directories it creates, the session directory and the files are given
// to that uid, on their descriptors. Files must be regular, owned by the
// process or the key's uid, with a single link. So a user who owns any
// directory on the way cannot point the daemon at other files.
//
// A session directory is locked (flock) while open: a second open, from
// this or another process, is EBUSY.
type DirStore struct {
	// Root is the directory every session lives beneath, opened without
	// following symlinks; "" is "/", so the whole path must be free of
	// them.
	Root string
	// Dir names a session's directory: a path relative to Root, or an
	// absolute one inside it.
	Dir func(SessionKey) string
}

// Open opens or creates the session directory of key.
func (d DirStore) Open(key SessionKey) (Log, error) {
	if d.Dir == nil {
		return nil, abi.Errorf(abi.EINVAL, "DirStore without Dir func")
	}
	rootPath := d.Root
	if rootPath == "" {
		rootPath = "/"
	}
	rel, err := d.rel(rootPath, d.Dir(key))
	if err != nil {
		return nil, err
	}
	owner, chown := safefs.Keep, -1
	if os.Geteuid() == 0 && key.UID != 0 {
		chown = int(key.UID)
		owner = safefs.Owner{UID: chown, GID: -1}
	}
	root, err := safefs.OpenRoot(rootPath)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	sd, err := root.MkdirAll(rel, 0o700, owner)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to open session directory: %w", err)
	}
	defer sd.Close()
	dir := sd.Path()
	if err := secure(sd.Fd(), dir, chown, 0o700, true); err != nil {
		return nil, err
	}
	events, newEvents, err := openSessionFile(sd, EventsFile, chown)
	if err != nil {
		return nil, err
	}
	sends, newSends, err := openSessionFile(sd, SendsFile, chown)
	if err != nil {
		events.Close()
		return nil, err
	}
	l := &dirLog{dir: dir, events: events, sends: sends}
	fail := func(err error) (Log, error) {
		events.Close()
		sends.Close()
		return nil, err
	}
	if newEvents || newSends {
		// The new directory entries must survive a crash like the data.
		if err := sd.Sync(); err != nil {
			return fail(abi.Errorf(abi.EIO, "failed to sync session directory %s: %w", dir, err))
		}
	}
	if err := unix.Flock(int(events.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fail(abi.Errorf(abi.EBUSY, "session %s is open in another server", dir))
		}
		return fail(abi.Errorf(abi.EIO, "failed to lock session %s: %w", dir, err))
	}
	if err := l.load(); err != nil {
		return fail(err)
	}
	return l, nil
}

// Remove deletes the session directory of key (a temp session), walking
// from Root without following symlinks; a missing one is not an error.
func (d DirStore) Remove(key SessionKey) error {
	rootPath := d.Root
	if rootPath == "" {
		rootPath = "/"
	}
	rel, err := d.rel(rootPath, d.Dir(key))
	if err != nil {
		return err
	}
	root, err := safefs.OpenRoot(rootPath)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(rel)
}

// Measure adds up the session logs of uid: every regular file in the
// sibling directories of uid's sessions (the parent of Dir of one of its
// keys), walked by descriptor without following symlinks.
func (d DirStore) Measure(uid uint32) (int64, error) {
	rootPath := d.Root
	if rootPath == "" {
		rootPath = "/"
	}
	rel, err := d.rel(rootPath, d.Dir(SessionKey{UID: uid, Name: "default"}))
	if err != nil {
		return 0, err
	}
	root, err := safefs.OpenRoot(rootPath)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	return DirBytes(root, filepath.Dir(rel), 4)
}

// DirBytes adds up the sizes of the regular files under rel beneath root,
// at most depth directories down, without following symlinks; a missing
// rel holds nothing.
func DirBytes(root *safefs.Dir, rel string, depth int) (int64, error) {
	d, err := root.OpenDir(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer d.Close()
	es, err := d.ReadDir(1 << 20)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range es {
		switch e.Type {
		case unix.S_IFREG:
			if st, err := d.Lstat(e.Name); err == nil {
				total += st.Size
			}
		case unix.S_IFDIR:
			if depth > 0 {
				n, err := DirBytes(d, e.Name, depth-1)
				if err != nil {
					return 0, err
				}
				total += n
			}
		}
	}
	return total, nil
}

// rel turns what Dir returned into a path relative to root.
func (d DirStore) rel(root, dir string) (string, error) {
	if dir == "" {
		return "", abi.Errorf(abi.EINVAL, "no session directory")
	}
	if !filepath.IsAbs(dir) {
		return dir, nil
	}
	rel, err := filepath.Rel(root, filepath.Clean(dir))
	if err != nil || !filepath.IsLocal(rel) {
		return "", abi.Errorf(abi.EINVAL, "session directory %s is outside %s", dir, root)
	}
	return rel, nil
}

// openSessionFile opens name in the session directory for appending,
// creating it 0600.
func openSessionFile(sd *safefs.Dir, name string, owner int) (f *os.File, created bool, err error) {
	flags := os.O_RDWR | os.O_APPEND
	f, err = sd.OpenFile(name, flags|os.O_CREATE|os.O_EXCL, 0o600)
	created = err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = sd.OpenFile(name, flags, 0)
	}
	if err != nil {
		return nil, false, openErr(name, err)
	}
	if err := secure(int(f.Fd()), f.Name(), owner, 0o600, false); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, created, nil
}

// secure checks what fd is and who owns it, then sets its exact mode and,
// when owner >= 0, its owner. It works on the open descriptor, so a rename
// or symlink swapped in afterwards changes nothing.
func secure(fd int, name string, owner int, mode uint32, dir bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return abi.Errorf(abi.EIO, "failed to stat %s: %w", name, err)
	}
	want, kind := uint32(unix.S_IFREG), "regular file"
	if dir {
		want, kind = unix.S_IFDIR, "directory"
	}
	switch {
	case st.Mode&unix.S_IFMT != want:
		return abi.Errorf(abi.EACCES, "%s is not a %s", name, kind)
	case !dir && st.Nlink != 1:
		return abi.Errorf(abi.EACCES, "%s has %d hard links; refusing to use it", name, st.Nlink)
	case st.Uid != uint32(os.Geteuid()) && (owner < 0 || st.Uid != uint32(owner)):
		return abi.Errorf(abi.EACCES, "%s is owned by uid %d", name, st.Uid)
	}
	if st.Mode&0o7777 != mode {
		if err := unix.Fchmod(fd, mode); err != nil {
			return abi.Errorf(abi.EACCES, "failed to set mode of %s: %w", name, err)
		}
	}
	if owner >= 0 && st.Uid != uint32(owner) {
		if err := unix.Fchown(fd, owner, -1); err != nil {
			return abi.Errorf(abi.EACCES, "failed to chown %s to uid %d: %w", name, owner, err)
		}
	}
	return nil
}

// openErr maps an open failure. A symlink or the wrong kind of file where
// a session file belongs is planted, a permission problem, not an I/O one.
func openErr(what string, err error) error {
	if c := abi.CodeOf(err); c == abi.ELOOP {
		return abi.Errorf(abi.ELOOP, "refusing the %s: %w", what, err)
	} else if c == abi.EINVAL || c == abi.EACCES {
		return abi.Errorf(abi.EACCES, "refusing the %s: not a plain file: %w", what, err)
	}
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		return abi.Errorf(abi.EACCES, "refusing the %s: not a plain file or directory: %w", what, err)
	}
	return abi.Errorf(abi.CodeOf(err), "failed to open %s: %w", what, err)
}
