// Package safefs is how privileged code touches paths that other users can
// influence: every operation is relative to an open directory, never follows
// a symlink, never leaves the directory it starts from, never blocks on a
// FIFO or device, refuses anything but regular files and directories, and
// bounds every read.
//
// A root daemon that creates, chmods, chowns, opens or writes a path by its
// string name acts on whatever the name resolves to when the syscall runs:
// a user who owns any directory on the way can swap in a symlink and turn
// the daemon into a confused deputy. Here the path is walked once, by the
// kernel, from an open directory descriptor, with openat2(2)
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; the result is a descriptor, and
// chmod, chown, stat, sync and truncate act on that descriptor, never on a
// name that could be re-resolved. Where openat2 is missing (Linux < 5.6, or
// a seccomp profile that answers ENOSYS) the same walk is done one component
// at a time with openat(2) O_NOFOLLOW.
//
// Errors carry the stable codes of core/abi: a symlink anywhere on the way is
// ELOOP, a path that would leave its directory ("..", absolute) is EINVAL
// before any syscall, a FIFO, socket, device or directory where a regular
// file belongs is EINVAL, a read past its bound is EMSGSIZE, a write through
// a file with several hard links is EACCES. Errors wrap an *fs.PathError, so
// errors.Is(err, fs.ErrNotExist) holds for a missing file.
//
// Usage: open the trusted root once (OpenRoot: the whole path must be free
// of symlinks), then name everything beneath it relative to that Dir:
//
//	root, err := safefs.OpenRoot("/ctx")
//	sess, err := root.MkdirAll("home/1001/session/model/p/m/s", 0o700, safefs.Owner{UID: 1001, GID: -1})
//	err = sess.WriteFile("state", data, 0o600, safefs.Owner{UID: 1001, GID: -1})
//
// The API is small on purpose and stable: other packages build on it.
package safefs
