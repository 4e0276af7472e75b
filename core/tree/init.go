package tree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/install"
	"github.com/cortexfs/cortexfs/core/safefs"
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
	Action string `json:"action"` // created | updated | unchanged | left_alone
	Reason string `json:"reason,omitempty"`
}

// Init creates a CortexFS tree idempotently. It never overwrites what a
// user changed: a file whose content or mode differs from what Init would
// write is left alone and reported. The one exception is an object file
// that is exactly what Init writes but for the runner of its #! line: Init
// wrote it with another --runner, and it is updated to o.Runner, so a tree
// made with a runner that is missing is fixed by `ctx init --runner`. Runtime-owned files (status, log) are
// only created when missing. Below the root nothing is followed: a symlink
// where a directory or file of the tree belongs (tool/<name>.d -> /etc) is
// left alone and reported, and nothing is written through it (every path
// is walked with core/safefs from the root's descriptor).
func Init(o InitOptions) ([]Change, error) {
	if o.Runner == "" {
		o.Runner = DefaultRunner
	}
	if !filepath.IsAbs(o.Runner) {
		return nil, abi.Errorf(abi.EINVAL, "runner %q must be an absolute path", o.Runner)
	}
	r := o.Root
	b := &builder{root: string(r)}
	// The root itself is the caller's choice of path.
	if err := os.Mkdir(string(r), DirMode); err == nil {
		b.note(string(r), "created", "")
		if err := os.Chmod(string(r), DirMode); err != nil { // mkdir is subject to the umask
			return nil, err
		}
	} else if errors.Is(err, fs.ErrExist) {
		b.note(string(r), "unchanged", "")
	} else {
		return nil, fmt.Errorf("init: failed to create %s: %w", r, err)
	}
	d, err := safefs.OpenRoot(string(r))
	if err != nil {
		return b.changes, err
	}
	defer d.Close()
	b.d = d
	home := filepath.Join(HomeDir, strconv.Itoa(o.UID))
	for _, dir := range []string{ModelDir, filepath.Join(ModelDir, "debug"), ToolDir,
		AgentDir, HomeDir, home, filepath.Join(home, ModelDir),
		filepath.Join(home, AgentDir), filepath.Join(home, ToolDir), SharedDir} {
		b.dir(dir)
	}
	if o.Binary != "" {
		b.bin(BinDir, o.Binary, o.Applets)
	}
	echo := filepath.Join(ModelDir, filepath.FromSlash(EchoModel.ID))
	b.object(echo, o.Runner, abi.ClassModel, EchoModel.meta())
	for name, content := range EchoModel.controls() {
		b.control(echo, name, content)
	}
	for _, alias := range []string{"main", "helper"} {
		b.link(filepath.Join(ModelDir, alias), filepath.FromSlash(EchoModel.ID))
	}
	for _, t := range tool.All() {
		p := filepath.Join(ToolDir, t.Name)
		b.object(p, o.Runner, abi.ClassTool, []abi.KV{{Key: "name", Value: t.Name}, {Key: "description", Value: t.Description}})
		for name, content := range toolControls(t) {
			b.control(p, name, content)
		}
	}
	return b.changes, b.err
}

// runtimeOwned control files change at run time; Init only creates them.
var runtimeOwned = map[string]bool{"status": true, "log": true, "pid": true}

// maxInitFile bounds what Init reads back to compare with its default.
const maxInitFile = 1 << 20

// builder does Init's work relative to the open root d; paths are relative
// to it and reported joined to root.
type builder struct {
	root    string
	d       *safefs.Dir
	changes []Change
	err     error
}

func (b *builder) note(p, action, reason string) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(b.root, p)
	}
	b.changes = append(b.changes, Change{Path: p, Action: action, Reason: reason})
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// lstat is Lstat beneath the root; ok false means the outcome is already
// noted (a symlink on the way, or a failure).
func (b *builder) lstat(p string) (st unix.Stat_t, exists, ok bool) {
	st, err := b.d.Lstat(p)
	switch {
	case err == nil:
		return st, true, true
	case abi.CodeOf(err) == abi.ELOOP:
		b.note(p, "left_alone", "a symlink is on the way; nothing is written through it")
	case errors.Is(err, fs.ErrNotExist):
		return st, false, true
	default:
		b.fail(err)
	}
	return st, false, false
}

func (b *builder) dir(p string) {
	st, exists, ok := b.lstat(p)
	switch {
	case !ok:
	case exists && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		b.note(p, "unchanged", "")
	case exists:
		b.note(p, "left_alone", "exists and is not a directory")
	default:
		if err := b.d.Mkdir(p, DirMode, safefs.Keep); err != nil {
			if abi.CodeOf(err) == abi.ELOOP {
				b.note(p, "left_alone", "a symlink is on the way; nothing is written through it")
				return
			}
			b.fail(fmt.Errorf("init: failed to create %s: %w", p, err))
			return
		}
		b.note(p, "created", "")
	}
}

// file creates p with content and mode unless it exists; an existing file
// is reported unchanged, or left alone when it differs, unless rewrite
// says its content is Init's own in an older form: then it is replaced.
func (b *builder) file(p string, content []byte, mode os.FileMode, owned bool, rewrite func(cur []byte) (string, bool)) {
	st, exists, ok := b.lstat(p)
	switch {
	case !ok:
	case !exists:
		if err := b.d.WriteFile(p, content, mode, safefs.Keep); err != nil {
			if abi.CodeOf(err) == abi.ELOOP {
				b.note(p, "left_alone", "a symlink is on the way; nothing is written through it")
				return
			}
			b.fail(err)
			return
		}
		b.note(p, "created", "")
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		b.note(p, "left_alone", "exists and is not a regular file")
	case owned:
		b.note(p, "unchanged", "runtime-owned")
	default:
		cur, err := b.d.ReadFile(p, maxInitFile)
		perm := os.FileMode(st.Mode & 0o777)
		switch {
		case abi.CodeOf(err) == abi.EMSGSIZE:
			b.note(p, "left_alone", "content differs from the default (user edit kept)")
		case err != nil:
			b.fail(err)
		case !bytes.Equal(cur, content) && perm == mode && rewrite != nil:
			why, ok := rewrite(cur)
			if !ok {
				b.note(p, "left_alone", "content differs from the default (user edit kept)")
				return
			}
			if err := b.d.WriteFile(p, content, mode, safefs.Keep); err != nil {
				b.fail(err)
				return
			}
			b.note(p, "updated", why)
		case !bytes.Equal(cur, content):
			b.note(p, "left_alone", "content differs from the default (user edit kept)")
		case perm != mode:
			b.note(p, "left_alone", fmt.Sprintf("mode %04o differs from %04o (kept)", perm, mode))
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
	// An object Init wrote with another runner: same metadata, other #!.
	otherRunner := func(cur []byte) (string, bool) {
		m, err := ParseMeta(cur)
		if err != nil || m.Runner == runner {
			return "", false
		}
		old, err := Meta{Runner: m.Runner, Class: class, KV: kv}.Format()
		if err != nil || !bytes.Equal(old, cur) {
			return "", false
		}
		return "runner was " + m.Runner, true
	}
	b.file(p, content, ObjectMode, false, otherRunner)
	b.dir(abi.CtlDir(p))
}

func (b *builder) control(object, name string, content []byte) {
	b.file(filepath.Join(abi.CtlDir(object), name), content, ControlMode, runtimeOwned[name], nil)
}

func (b *builder) link(p, target string) {
	st, exists, ok := b.lstat(p)
	switch {
	case !ok:
	case !exists:
		if err := b.d.Symlink(target, p); err != nil {
			b.fail(err)
			return
		}
		b.note(p, "created", "")
	case st.Mode&unix.S_IFMT != unix.S_IFLNK:
		b.note(p, "left_alone", "exists and is not a symlink")
	default:
		cur, err := b.d.Readlink(p)
		switch {
		case err != nil:
			b.fail(err)
		case cur != target:
			b.note(p, "left_alone", "points to "+cur+" (user choice kept)")
		default:
			b.note(p, "unchanged", "")
		}
	}
}

func (b *builder) bin(dir, binary string, names []string) {
	st, exists, ok := b.lstat(dir)
	if !ok {
		return
	}
	if exists && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		b.note(dir, "left_alone", "exists and is not a directory")
		return
	}
	actions, err := install.Install(binary, filepath.Join(b.root, dir), names, false)
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

// ToolPolicyHeader is the default .d/policy of a tool: comments only. Policy
// v0 is default deny, so no agent runs the tool until a line allows its
// type here as well as in its own policy; `ctx agent create --tool` adds it.
const ToolPolicyHeader = "# policy v0: allow <subject_type> tool:<name> execute\n# Default deny: an agent runs this tool only when its type is allowed here too.\n"
