package tree

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// Object is a resolved CortexFS object.
type Object struct {
	Class  abi.Class
	Name   string // tool/agent name, or model id "provider/model"
	Path   string // the object file after symlink resolution: its identity
	Called string // the path it was invoked as (an alias when it differs)
	Root   Root   // the CortexFS root that holds this object's tier
	Tier   string // the directory holding model/, tool/, agent/ (root or home/<uid>)
	Meta   Meta
}

// Ctl is the object's control directory name.d/.
func (o Object) Ctl(file string) string { return filepath.Join(abi.CtlDir(o.Path), file) }

// Sock is the object's socket entry name.sock.
func (o Object) Sock() string { return abi.SockPath(o.Path) }

// Resolve finds the object at path: symlinks are followed (readlink decides
// identity), the class and tier come from where the target lives
// (<tier>/model/<provider>/<model>, <tier>/tool/<name>, <tier>/agent/<name>),
// and the file's metadata must agree with that class.
func Resolve(path string) (Object, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Object{}, abi.Errorf(abi.EINVAL, "object path %q: %v", path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		// EvalSymlinks reports a loop without its errno; stat says ELOOP.
		if _, serr := os.Stat(abs); errors.Is(serr, syscall.ELOOP) {
			return Object{}, abi.Errorf(abi.ELOOP, "object %s: too many levels of symbolic links (a loop)", path)
		}
		return Object{}, abi.Errorf(abi.CodeOf(err), "object %s: %w", path, unwrapPath(err))
	}
	o := Object{Path: real, Called: abs}
	dir, base := filepath.Split(real)
	dir = filepath.Clean(dir)
	switch filepath.Base(dir) {
	case ToolDir, AgentDir:
		o.Class, o.Name, o.Tier = abi.Class(filepath.Base(dir)), base, filepath.Dir(dir)
		if err := abi.ValidName(base); err != nil {
			return Object{}, err
		}
	default:
		provider := filepath.Base(dir)
		if filepath.Base(filepath.Dir(dir)) != ModelDir {
			return Object{}, abi.Errorf(abi.EINVAL, "%s is not under a model/, tool/ or agent/ directory", real)
		}
		o.Class, o.Name, o.Tier = abi.ClassModel, provider+"/"+base, filepath.Dir(filepath.Dir(dir))
		if err := abi.ValidModelID(o.Name); err != nil {
			return Object{}, err
		}
	}
	o.Root = Root(o.Tier)
	if filepath.Base(filepath.Dir(o.Tier)) == HomeDir {
		o.Root = Root(filepath.Dir(filepath.Dir(o.Tier)))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return Object{}, abi.Errorf(abi.CodeOf(err), "object %s: %w", path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return Object{}, abi.Errorf(abi.EINVAL, "object %s is not a regular file", path)
	}
	data, err := readBounded(real)
	if err != nil {
		return Object{}, err
	}
	if o.Meta, err = ParseMeta(data); err != nil {
		return Object{}, abi.Errorf(abi.EINVAL, "object %s: %v", path, err)
	}
	if o.Meta.Class != o.Class {
		return Object{}, abi.Errorf(abi.EINVAL, "object %s declares %s=%s but lives under %s/", path, MetaClassKey, o.Meta.Class, o.Class)
	}
	return o, nil
}

// CheckExec enforces the Linux execute bit for the caller, as the kernel
// would have: a runner invoked directly on a non-executable object refuses.
func CheckExec(path string) error {
	if err := unix.Access(path, unix.X_OK); err != nil {
		return abi.Errorf(abi.EACCES, "%s: not executable by this user", path)
	}
	return nil
}

// ReadCtl reads a small control file of the object. The control directory
// and the file are opened without following a symlink anywhere on the
// canonical path (ELOOP), without blocking (a FIFO never hangs the
// reader), and only a regular file of at most abi.MaxControlFile bytes is
// read: anything else is EINVAL, a missing file ENOENT. A privileged
// process reads a user's control files only this way.
func (o Object) ReadCtl(file string) ([]byte, error) {
	d, err := o.CtlDir()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return readCtl(d, file)
}

// CtlDir opens the object's control directory name.d/ without following
// a symlink anywhere on its path (see core/safefs).
func (o Object) CtlDir() (*safefs.Dir, error) {
	return safefs.OpenRoot(abi.CtlDir(o.Path))
}

// CtlString is ReadCtl trimmed of surrounding whitespace; a missing file is "".
func (o Object) CtlString(file string) (string, error) {
	b, err := o.ReadCtl(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// Ctl is an object's control directory opened once for several reads
// (a one-shot run reads five of them): each Read behaves exactly as
// ReadCtl of that file, including when the directory itself could not be
// opened.
type Ctl struct {
	d   *safefs.Dir
	err error
}

// OpenCtl opens the control directory for Read; Close releases it.
func (o Object) OpenCtl() *Ctl {
	d, err := o.CtlDir()
	return &Ctl{d: d, err: err}
}

// Read is ReadCtl(file).
func (c *Ctl) Read(file string) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	return readCtl(c.d, file)
}

// String is CtlString(file).
func (c *Ctl) String(file string) (string, error) {
	b, err := c.Read(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// Close closes the directory.
func (c *Ctl) Close() error {
	if c.d == nil {
		return nil
	}
	return c.d.Close()
}

func readCtl(d *safefs.Dir, name string) ([]byte, error) {
	b, err := d.ReadFile(name, abi.MaxControlFile)
	if abi.CodeOf(err) == abi.EMSGSIZE {
		return nil, abi.Errorf(abi.EINVAL, "%s/%s: larger than %d bytes", d.Path(), name, abi.MaxControlFile)
	}
	return b, err
}

// readBounded reads an object file the same way.
func readBounded(p string) ([]byte, error) {
	b, err := safefs.ReadFile(p, abi.MaxControlFile)
	if abi.CodeOf(err) == abi.EMSGSIZE {
		return nil, abi.Errorf(abi.EINVAL, "%s: larger than %d bytes", p, abi.MaxControlFile)
	}
	return b, err
}

// unwrapPath keeps "open X: no such file" messages short but exact.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe
	}
	return err
}
