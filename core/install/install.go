// Package install places the one multi-call binary in a directory together
// with a hardlink for every applet name, the way a scratch image is set up.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
)

// BinaryName is the file that holds the binary; every other name links to it.
const BinaryName = "cortexfs"

// Action is what Install did (or would do) to one path.
type Action struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Action string `json:"action"` // created | unchanged | replaced
}

// Install copies the binary src to dir/cortexfs and hardlinks each name in
// names next to it. It is idempotent: what is already a link to the same
// inode is left alone. Anything else in the way is a conflict: without force
// nothing at all is changed and the error is EEXIST naming every conflict;
// with force conflicts are replaced atomically (link to a temp name, rename).
func Install(src, dir string, names []string, force bool) ([]Action, error) {
	names = uniqueNames(names)
	for _, n := range names {
		if err := abi.ValidName(n); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("install: failed to create %s: %w", dir, err)
	}
	bin := filepath.Join(dir, BinaryName)

	// Plan first, so a refusal changes nothing.
	binAction, err := planBinary(src, bin)
	if err != nil {
		return nil, err
	}
	var conflicts []string
	if binAction == "replaced" {
		conflicts = append(conflicts, bin)
	}
	binIno, _ := inode(bin)
	plan := make([]Action, 0, len(names))
	for _, n := range names {
		p := filepath.Join(dir, n)
		a := Action{Name: n, Path: p, Action: "created"}
		if fi, err := os.Lstat(p); err == nil {
			switch {
			case binAction == "unchanged" && sameInode(fi, binIno):
				a.Action = "unchanged"
			case fi.IsDir():
				return nil, abi.Errorf(abi.EEXIST, "install: %s is a directory", p)
			default:
				a.Action = "replaced"
				if binAction != "replaced" {
					conflicts = append(conflicts, p)
				}
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("install: failed to inspect %s: %w", p, err)
		}
		plan = append(plan, a)
	}
	if len(conflicts) > 0 && !force {
		return nil, abi.Errorf(abi.EEXIST, "install: refusing to replace files that are not links of this binary (use --force): %s", strings.Join(conflicts, ", "))
	}

	actions := []Action{{Name: BinaryName, Path: bin, Action: binAction}}
	if binAction != "unchanged" {
		if err := copyBinary(src, bin); err != nil {
			return nil, err
		}
	}
	for _, a := range plan {
		switch a.Action {
		case "created":
			if err := os.Link(bin, a.Path); err != nil {
				return actions, fmt.Errorf("install: failed to link %s: %w", a.Path, err)
			}
		case "replaced":
			if err := replaceWithLink(bin, a.Path); err != nil {
				return actions, err
			}
		}
		actions = append(actions, a)
	}
	return actions, nil
}

// planBinary decides what happens to dir/cortexfs: unchanged when it is src
// itself or has the same bytes, created when missing, replaced otherwise.
func planBinary(src, bin string) (string, error) {
	dfi, err := os.Lstat(bin)
	if errors.Is(err, fs.ErrNotExist) {
		return "created", nil
	}
	if err != nil {
		return "", fmt.Errorf("install: failed to inspect %s: %w", bin, err)
	}
	sfi, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("install: failed to read own binary %s: %w", src, err)
	}
	if os.SameFile(sfi, dfi) {
		return "unchanged", nil
	}
	if dfi.Mode().IsRegular() && dfi.Size() == sfi.Size() {
		same, err := sameContent(src, bin)
		if err != nil {
			return "", err
		}
		if same {
			return "unchanged", nil
		}
	}
	return "replaced", nil
}

func copyBinary(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install: failed to open own binary: %w", err)
	}
	defer in.Close()
	return atomicfile.Write(dst, 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// replaceWithLink swaps p for a hardlink of bin without a moment where p is
// missing: link to a temp name in the same directory, then rename over p.
func replaceWithLink(bin, p string) error {
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".link-tmp")
	_ = os.Remove(tmp)
	if err := os.Link(bin, tmp); err != nil {
		return fmt.Errorf("install: failed to link %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("install: failed to replace %s: %w", p, err)
	}
	return nil
}

func sameContent(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea != nil || eb != nil {
			return errors.Is(ea, io.EOF) || errors.Is(ea, io.ErrUnexpectedEOF), nil
		}
	}
}

type ino struct{ dev, ino uint64 }

func inode(p string) (ino, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return ino{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ino{}, false
	}
	return ino{uint64(st.Dev), st.Ino}, true
}

func sameInode(fi os.FileInfo, want ino) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && (ino{uint64(st.Dev), st.Ino}) == want
}

func uniqueNames(names []string) []string {
	seen := map[string]bool{BinaryName: true}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
