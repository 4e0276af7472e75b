package tool

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
)

var fsWriteInput = lit(`{
	"type": "object",
	"properties": {
		"path":        {"type": "string", "minLength": 1, "description": "file to write; relative paths resolve against the caller's cwd"},
		"content":     {"type": "string", "description": "the whole new contents, UTF-8 text"},
		"mode":        {"type": "string", "minLength": 3, "maxLength": 4, "description": "octal permission bits such as \"0644\"; default: an existing file keeps its mode, a new one gets 0644"},
		"create_dirs": {"type": "boolean", "description": "create missing parent directories (0755); default false"}
	},
	"required": ["path", "content"],
	"additionalProperties": false
}`)

var fsWriteOutput = lit(`{
	"type": "object",
	"properties": {
		"path":  {"type": "string", "description": "the absolute path written"},
		"bytes": {"type": "integer", "minimum": 0, "description": "bytes written"}
	},
	"required": ["path", "bytes"],
	"additionalProperties": false
}`)

func fsWrite() Builtin {
	return Builtin{
		Name:        "fs.write",
		Description: "Replace a file's whole contents with UTF-8 text, atomically.",
		Schema:      mustSchema(fsWriteInput.JSON(), fsWriteOutput.JSON()),
		Caps:        []string{"write"},
		Run:         runFSWrite,
	}
}

type fsWriteArgs struct {
	Path       string  `json:"path"`
	Content    string  `json:"content"`
	Mode       *string `json:"mode"`
	CreateDirs *bool   `json:"create_dirs"`
}

type fsWriteResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// defaultFileMode is the mode of a file fs.write creates; atomicfile sets
// it with fchmod, so the umask does not change it.
const defaultFileMode = 0o644

// atEAccess is AT_EACCESS of <fcntl.h>, which package syscall does not
// export: check access with the effective ids, the ones open(2) uses.
const atEAccess = 0x200

// runFSWrite replaces the file by rename (atomicfile), so readers never
// see half a file. Symlinks are written through: the link stays and its
// target gets the new contents.
func runFSWrite(ctx context.Context, env Env, args json.RawMessage) (json.RawMessage, error) {
	const name = "fs.write"
	var a fsWriteArgs
	if err := decodeArgs(fsWriteInput.JSON(), args, &a); err != nil {
		return nil, toolErr(name, err)
	}
	mode, explicitMode := os.FileMode(defaultFileMode), a.Mode != nil
	if explicitMode {
		m, err := parseMode(*a.Mode)
		if err != nil {
			return nil, toolErr(name, err)
		}
		mode = m
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx, name)
	}
	path := env.resolve(a.Path)
	target := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real
	}

	fi, err := os.Lstat(target)
	switch {
	case err == nil:
		if err := checkReplaceable(target, fi); err != nil {
			return nil, toolErr(name, err)
		}
		if !explicitMode {
			mode = fi.Mode().Perm()
		}
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(target)
		if a.CreateDirs != nil && *a.CreateDirs {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, toolErr(name, err)
			}
		} else if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			// Say what to do about it: models act on error messages.
			return nil, abi.Errorf(abi.ENOENT, "%s: directory %s does not exist; set create_dirs to create it", name, dir)
		}
		fi = nil
	default:
		return nil, toolErr(name, err)
	}

	if err := atomicfile.WriteFile(target, []byte(a.Content), mode); err != nil {
		return nil, toolErr(name, err)
	}
	keepOwner(target, fi)
	return encodeResult(fsWriteResult{Path: path, Bytes: len(a.Content)})
}

// checkReplaceable refuses what a rename must not replace, and a file the
// caller could not write in place: rename only needs the directory to be
// writable, but replacing a read-only file would bypass its mode bits.
func checkReplaceable(path string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return abi.Errorf(abi.EINVAL, "%s is a directory", path)
	case fi.Mode()&fs.ModeSymlink != 0:
		// EvalSymlinks failed, so the link dangles (or loops).
		return abi.Errorf(abi.ENOENT, "%s is a symlink to a missing file", path)
	case !fi.Mode().IsRegular():
		// A device or FIFO would be replaced by a plain file, not written.
		return abi.Errorf(abi.EINVAL, "%s is not a regular file", path)
	}
	err := syscall.Faccessat(unixAtFDCWD, path, 2 /* W_OK */, atEAccess)
	// A running executable (ETXTBSY) is fine to replace: that is why the
	// write goes through a rename.
	if err != nil && !errors.Is(err, syscall.ETXTBSY) {
		return &fs.PathError{Op: "access", Path: path, Err: err}
	}
	return nil
}

// unixAtFDCWD is AT_FDCWD: resolve relative paths against the cwd.
const unixAtFDCWD = -100

// keepOwner gives a replaced file back its old owner and group. The rename
// created a new inode owned by the writer; only root (or a writer already
// owning it) can restore them, so failures are ignored: the file then
// belongs to the writer, as after any save-by-rename editor.
func keepOwner(path string, old fs.FileInfo) {
	if old == nil {
		return
	}
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid()) {
		return
	}
	_ = os.Lchown(path, int(st.Uid), int(st.Gid))
}

// parseMode accepts three or four octal digits of permission bits, "644"
// or "0644". setuid, setgid and sticky bits are refused: a tool should not
// be a way to mint setuid files.
func parseMode(s string) (os.FileMode, error) {
	if len(s) == 3 || len(s) == 4 && s[0] == '0' {
		if m, err := strconv.ParseUint(s, 8, 32); err == nil && m <= 0o777 {
			return os.FileMode(m), nil
		}
	}
	return 0, abi.Errorf(abi.EINVAL, "/mode: want octal permission bits such as \"0644\", got %q", truncate(s, 8))
}
