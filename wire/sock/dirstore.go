package sock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// File names inside a DirStore session directory.
const (
	eventsFile = "events.jsonl"
	sendsFile  = "sends.jsonl"
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
// Session directories are 0700 and the files 0600, whatever the umask;
// missing parent directories are created 0700. When the process runs as
// root and the key's uid is not 0, the session directory and files are
// chowned to that uid, and an open fails with EACCES if that fails. Files
// are opened without following symlinks and must be owned by the process
// or the key's uid and have a single link, so a user who owns a session
// directory cannot point the daemon at other files.
//
// A session directory is locked (flock) while open: a second open, from
// this or another process, is EBUSY.
type DirStore struct {
	Dir func(SessionKey) string
}

// Open opens or creates the session directory of key.
func (d DirStore) Open(key SessionKey) (Log, error) {
	if d.Dir == nil {
		return nil, abi.Errorf(abi.EINVAL, "DirStore without Dir func")
	}
	dir := d.Dir(key)
	if dir == "" {
		return nil, abi.Errorf(abi.EINVAL, "no session directory for %s", key.Name)
	}
	dir = filepath.Clean(dir)
	owner := -1
	if os.Geteuid() == 0 && key.UID != 0 {
		owner = int(key.UID)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to create parent of session directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to create session directory: %w", err)
	}
	df, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, openErr("session directory", err)
	}
	defer df.Close()
	if err := secure(df, owner, 0o700, true); err != nil {
		return nil, err
	}
	events, newEvents, err := openSessionFile(dir, eventsFile, owner)
	if err != nil {
		return nil, err
	}
	sends, newSends, err := openSessionFile(dir, sendsFile, owner)
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
		if err := df.Sync(); err != nil {
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

// openSessionFile opens dir/name for appending, creating it 0600.
func openSessionFile(dir, name string, owner int) (f *os.File, created bool, err error) {
	path := filepath.Join(dir, name)
	flags := os.O_RDWR | os.O_APPEND | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	f, err = os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, 0o600)
	created = err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, flags, 0)
	}
	if err != nil {
		return nil, false, openErr(name, err)
	}
	if err := secure(f, owner, 0o600, false); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, created, nil
}

// secure checks what f is and who owns it, then sets its exact mode and,
// when owner >= 0, its owner. It works on the open file, so a rename or
// symlink swapped in afterwards changes nothing.
func secure(f *os.File, owner int, mode uint32, dir bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return abi.Errorf(abi.EIO, "failed to stat %s: %w", f.Name(), err)
	}
	want, kind := uint32(unix.S_IFREG), "regular file"
	if dir {
		want, kind = unix.S_IFDIR, "directory"
	}
	switch {
	case st.Mode&unix.S_IFMT != want:
		return abi.Errorf(abi.EACCES, "%s is not a %s", f.Name(), kind)
	case !dir && st.Nlink != 1:
		return abi.Errorf(abi.EACCES, "%s has %d hard links; refusing to use it", f.Name(), st.Nlink)
	case st.Uid != uint32(os.Geteuid()) && (owner < 0 || st.Uid != uint32(owner)):
		return abi.Errorf(abi.EACCES, "%s is owned by uid %d", f.Name(), st.Uid)
	}
	if st.Mode&0o7777 != mode {
		if err := f.Chmod(fs.FileMode(mode)); err != nil {
			return abi.Errorf(abi.EACCES, "failed to set mode of %s: %w", f.Name(), err)
		}
	}
	if owner >= 0 && st.Uid != uint32(owner) {
		if err := f.Chown(owner, -1); err != nil {
			return abi.Errorf(abi.EACCES, "failed to chown %s to uid %d: %w", f.Name(), owner, err)
		}
	}
	return nil
}

// openErr maps an open failure. A symlink or the wrong kind of file where
// a session file belongs is planted, a permission problem, not an I/O one.
func openErr(what string, err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		return abi.Errorf(abi.EACCES, "refusing the %s: not a plain file or directory: %w", what, err)
	}
	return abi.Errorf(abi.CodeOf(err), "failed to open %s: %w", what, err)
}
