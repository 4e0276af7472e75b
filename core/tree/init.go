package tree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/install"
	"github.com/cortexfs/cortexfs/core/tool"
)

// Modes of a tree: object files are executable metadata, control files are
// readable by everyone, directories are traversable.
const (
	ObjectMode  os.FileMode = 0o755
	ControlMode os.FileMode = 0o644
	DirMode     os.FileMode = 0o755
)

// InitOptions says what `ctx init` builds.
type InitOptions struct {
	Root    Root
	Runner  string   // interpreter path written into every #! line
	Binary  string   // this binary, copied into bin/ ("" skips bin/)
	Applets []string // names to hardlink in bin/
	UID     int      // whose home/<uid> to create
}

// Change is what Init did to one path.
type Change struct {
	Path   string `json:"path"`
	Action string `json:"action"` // created | unchanged | left_alone
	Reason string `json:"reason,omitempty"`
}

// Init creates a CortexFS tree idempotently. It never overwrites what a
// user changed: a file whose content or mode differs from what Init would
// write is left alone and reported. Runtime-owned files (status, log) are
// only created when missing.
func Init(o InitOptions) ([]Change, error) {
	if o.Runner == "" {
		o.Runner = DefaultRunner
	}
	if !filepath.IsAbs(o.Runner) {
		return nil, abi.Errorf(abi.EINVAL, "runner %q must be an absolute path", o.Runner)
	}
	b := &builder{}
	r := o.Root
	home := r.Home(o.UID)
	for _, d := range []string{string(r), r.Path(ModelDir), r.Path(ModelDir, "debug"), r.Path(ToolDir),
		r.Path(AgentDir), r.Path(HomeDir), home, filepath.Join(home, ModelDir),
		filepath.Join(home, AgentDir), filepath.Join(home, ToolDir), r.Path(SharedDir)} {
		b.dir(d)
	}
	if o.Binary != "" {
		b.bin(r.Path(BinDir), o.Binary, o.Applets)
	}
	b.object(r.ModelPath(EchoModel.ID), o.Runner, abi.ClassModel, EchoModel.meta())
	for name, content := range EchoModel.controls() {
		b.control(r.ModelPath(EchoModel.ID), name, content)
	}
	for _, alias := range []string{"main", "helper"} {
		b.link(r.Path(ModelDir, alias), filepath.FromSlash(EchoModel.ID))
	}
	for _, t := range tool.All() {
		p := r.ToolPath(t.Name)
		b.object(p, o.Runner, abi.ClassTool, []abi.KV{{Key: "name", Value: t.Name}, {Key: "description", Value: t.Description}})
		for name, content := range toolControls(t) {
			b.control(p, name, content)
		}
	}
	return b.changes, b.err
}

// runtimeOwned control files change at run time; Init only creates them.
var runtimeOwned = map[string]bool{"status": true, "log": true, "pid": true}

type builder struct {
	changes []Change
	err     error
}

func (b *builder) note(p, action, reason string) {
	b.changes = append(b.changes, Change{Path: p, Action: action, Reason: reason})
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *builder) dir(p string) {
	fi, err := os.Lstat(p)
	switch {
	case err == nil && fi.IsDir():
		b.note(p, "unchanged", "")
	case err == nil:
		b.note(p, "left_alone", "exists and is not a directory")
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(p, DirMode); err != nil {
			b.fail(fmt.Errorf("init: failed to create %s: %w", p, err))
			return
		}
		// Mkdir is subject to the umask; the tree's modes are not.
		if err := os.Chmod(p, DirMode); err != nil {
			b.fail(err)
		}
		b.note(p, "created", "")
	default:
		b.fail(err)
	}
}

func (b *builder) file(p string, content []byte, mode os.FileMode, owned bool) {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := atomicfile.WriteFile(p, content, mode); err != nil {
			b.fail(err)
			return
		}
		b.note(p, "created", "")
	case err != nil:
		b.fail(err)
	case !fi.Mode().IsRegular():
		b.note(p, "left_alone", "exists and is not a regular file")
	case owned:
		b.note(p, "unchanged", "runtime-owned")
	default:
		cur, err := os.ReadFile(p)
		switch {
		case err != nil:
			b.fail(err)
		case !bytes.Equal(cur, content):
			b.note(p, "left_alone", "content differs from the default (user edit kept)")
		case fi.Mode().Perm() != mode:
			b.note(p, "left_alone", fmt.Sprintf("mode %04o differs from %04o (kept)", fi.Mode().Perm(), mode))
		default:
			b.note(p, "unchanged", "")
		}
	}
}

func (b *builder) object(p, runner string, class abi.Class, kv []abi.KV) {
	content, err := Meta{Runner: runner, Class: class, KV: kv}.Format()
	if err != nil {
		b.fail(err)
		return
	}
	b.file(p, content, ObjectMode, false)
	b.dir(abi.CtlDir(p))
}

func (b *builder) control(object, name string, content []byte) {
	b.file(filepath.Join(abi.CtlDir(object), name), content, ControlMode, runtimeOwned[name])
}

func (b *builder) link(p, target string) {
	cur, err := os.Readlink(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Symlink(target, p); err != nil {
			b.fail(err)
			return
		}
		b.note(p, "created", "")
	case err != nil:
		b.note(p, "left_alone", "exists and is not a symlink")
	case cur != target:
		b.note(p, "left_alone", "points to "+cur+" (user choice kept)")
	default:
		b.note(p, "unchanged", "")
	}
}

func (b *builder) bin(dir, binary string, names []string) {
	actions, err := install.Install(binary, dir, names, false)
	if abi.CodeOf(err) == abi.EEXIST {
		b.note(dir, "left_alone", err.Error())
		return
	}
	if err != nil {
		b.fail(err)
		return
	}
	for _, a := range actions {
		act := a.Action
		if act == "replaced" {
			act = "created"
		}
		b.note(a.Path, act, "")
	}
}

func toolControls(t tool.Builtin) map[string][]byte {
	schema := bytes.Buffer{}
	if err := json.Indent(&schema, t.Schema, "", "  "); err != nil {
		schema.Reset()
		schema.Write(t.Schema)
	}
	schema.WriteByte('\n')
	caps := bytes.Buffer{}
	for _, c := range t.Caps {
		caps.WriteString(c + "\n")
	}
	return map[string][]byte{
		"name":        []byte(t.Name + "\n"),
		"description": []byte(t.Description + "\n"),
		"schema":      schema.Bytes(),
		"cap":         caps.Bytes(),
		"policy":      []byte(ToolPolicyHeader),
		"status":      []byte("ready\n"),
		"log":         nil,
	}
}

// ToolPolicyHeader is the default .d/policy of a tool: comments only, so the
// agent's own policy alone decides until an admin adds allow lines.
const ToolPolicyHeader = "# policy v0: allow <subject_type> tool:<name> execute\n# When this file has allow lines, the caller's type must be allowed here too.\n"
