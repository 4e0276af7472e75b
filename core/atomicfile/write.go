package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile atomically replaces path with data and the given mode. See Write.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	return Write(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write atomically replaces path with what fill writes, with the given mode.
//
// fill writes into a temporary file in path's directory, named
// ".<base>.tmp-<random>", which already has the final mode before any byte
// is written: a 0600 secret is never readable by others, and a 0644 file is
// never briefly private. The mode is set with fchmod, which the umask does not
// affect, so the final mode is exactly mode's permission bits (plus setuid,
// setgid and sticky if given). The file is then fsynced, renamed over path
// and the directory fsynced.
//
// The rename replaces the directory entry: if path is a symlink the link
// itself is replaced by a regular file, other hard links keep the old
// contents, and the old owner, mode, ACLs and xattrs are not carried over.
//
// On any failure before the rename, including a fill error or panic, the
// temporary file is removed and path is untouched. A failure of the final
// directory fsync is reported although the new contents are already in
// place; they may just not survive a crash. Errors wrap their cause, so
// errors.Is(err, fs.ErrNotExist) holds for a missing directory.
func Write(path string, mode os.FileMode, fill func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := createTemp(dir, filepath.Base(path))
	if err != nil {
		return err
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		// Deferred so a panicking fill doesn't leave the temp file behind.
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
	}()

	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("atomicfile: failed to set mode of %s: %w", tmp, err)
	}
	// Buffering spares small writes a syscall each; bufio.Writer still hands
	// io.Copy sources straight to the file's ReadFrom.
	bw := bufio.NewWriter(f)
	if err := fill(bw); err != nil {
		return fmt.Errorf("atomicfile: failed to fill %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("atomicfile: failed to write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: failed to sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("atomicfile: failed to close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomicfile: failed to rename %s to %s: %w", tmp, path, err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("atomicfile: failed to sync directory after replacing %s: %w", path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
