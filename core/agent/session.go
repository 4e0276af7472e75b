package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Files of a session directory.
const (
	MessagesFile = "messages.jsonl" // the conversation, one model.Message per line
	EventsFile   = "events.jsonl"   // one Record per event of every run
)

// Record is one line of events.jsonl: facts and errors, never prompt
// bodies, tool output or secrets.
type Record struct {
	TS      string `json:"ts"`
	Type    string `json:"type"` // run.start, model.call, tool.call, run.done
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Object  string `json:"object"` // agent/<name>, model/<p>/<m>, tool/<name>
	Status  string `json:"status"` // ok | error | denied | cancelled
	Run     string `json:"run,omitempty"`
	CallID  string `json:"call_id,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Session is an open, locked session directory. One run at a time holds it.
type Session struct {
	Name  string
	Dir   string // its path, for messages; the files are reached through dir
	agent string
	dir   *safefs.Dir  // the session directory, locked (flock) while open
	owner safefs.Owner // who the files the session creates belong to
}

// SessionDir is home/<uid>/agent/<agent>/session/<name>/ for a private
// session, shared/<space>/agent/<agent>/session/<name>/ for a shared one.
func (a *Agent) SessionDir(uid int, shared, name string) string {
	if shared != "" {
		return a.Root.Path(tree.SharedDir, shared, tree.AgentDir, a.Name, "session", name)
	}
	return filepath.Join(a.Root.Home(uid), tree.AgentDir, a.Name, "session", name)
}

// OpenSession creates (0700) and locks a session directory, walked from
// the tree's root without following symlinks (core/safefs). A shared
// session needs an existing shared/<space>/, policy for the agent's type —
// allow shared:<space> read and write (a run reads the conversation and
// adds to it), allow session:<name> write, and session:<name> resume to
// continue one that already has a conversation — and Linux permissions for
// the agent's identity (.d/uid, .d/gid, .d/groups; see sharedAccess). A
// private session is the agent's own state and needs no policy line. A
// session another run holds is EBUSY.
func (a *Agent) OpenSession(uid int, shared, name string) (*Session, error) {
	if name == "" {
		name = "default"
	}
	if err := abi.ValidName(name); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "session: %v", err)
	}
	s := &Session{Name: name, agent: a.Name, owner: safefs.Keep}
	dir := a.SessionDir(uid, shared, name)
	if shared != "" {
		if err := abi.ValidName(shared); err != nil {
			return nil, abi.Errorf(abi.EINVAL, "shared space: %v", err)
		}
		for _, perm := range []string{"write", "read"} {
			if err := a.Policy.Check(a.Type, policy.ClassShared, shared, perm); err != nil {
				return nil, err
			}
		}
		if err := a.Policy.Check(a.Type, policy.ClassSession, name, "write"); err != nil {
			return nil, err
		}
		space := a.Root.Path(tree.SharedDir, shared)
		if fi, err := os.Stat(space); err != nil || !fi.IsDir() {
			return nil, abi.Errorf(abi.ENOENT, "shared space %s does not exist", shared)
		}
		if err := a.sharedAccess(space, dir); err != nil {
			return nil, err
		}
		if os.Geteuid() == 0 && (a.UID != 0 || a.GID != 0) {
			s.owner = safefs.Owner{UID: a.UID, GID: a.GID} // what the agent writes there is the agent's
		}
	}
	root, err := safefs.OpenRoot(string(a.Root))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rel, err := filepath.Rel(string(a.Root), dir)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, abi.Errorf(abi.EINVAL, "session directory %s is outside %s", dir, a.Root)
	}
	sd, err := root.MkdirAll(rel, 0o700, s.owner)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to create session %s: %w", name, err)
	}
	if err := unix.Flock(sd.Fd(), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		sd.Close()
		return nil, abi.Errorf(abi.EBUSY, "session %s is busy with another run", name)
	}
	s.Dir, s.dir = sd.Path(), sd
	if shared != "" {
		if st, err := sd.Lstat(MessagesFile); err == nil && st.Size > 0 {
			if err := a.Policy.Check(a.Type, policy.ClassSession, name, "resume"); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	return s, nil
}

// sharedAccess applies the Linux mode bits of a shared space to the
// agent's identity, as the kernel would if the agent process ran as
// .d/uid with .d/gid and .d/groups (this build runs agents iso=shared, in
// the caller's process, so a root caller would otherwise write where the
// agent may not): every existing directory from shared/<space> down to
// the session needs search (x); the deepest existing one, when the rest
// must be created, needs write and search; an existing session directory
// needs read, write and search. The kernel still checks the process's own
// identity when the directories are made and opened.
func (a *Agent) sharedAccess(space, dir string) error {
	rel, err := filepath.Rel(space, dir)
	if err != nil {
		return abi.Errorf(abi.EINVAL, "session directory %s is outside %s", dir, space)
	}
	path := space
	parts := append([]string{"."}, strings.Split(rel, string(filepath.Separator))...)
	for i, p := range parts {
		path = filepath.Join(path, p)
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			parent := filepath.Dir(path)
			if !a.modeAllows(parent, 3) { // w+x in the parent to create
				return abi.Errorf(abi.EACCES, "agent %s (uid %d gid %d) may not write %s", a.Name, a.UID, a.GID, parent)
			}
			return nil
		}
		if err != nil {
			return abi.Errorf(abi.CodeOf(err), "shared session: %w", err)
		}
		if !fi.IsDir() {
			return abi.Errorf(abi.EINVAL, "%s is not a directory", path)
		}
		want := uint32(1) // search
		if i == len(parts)-1 {
			want = 7 // the session itself: read, write, search
		}
		if !a.modeAllows(path, want) {
			return abi.Errorf(abi.EACCES, "agent %s (uid %d gid %d) may not use %s", a.Name, a.UID, a.GID, path)
		}
	}
	return nil
}

// modeAllows reports whether the agent's uid/gid/groups get the want bits
// (4 read, 2 write, 1 search) of path's owner, group or other class. Uid 0
// bypasses the bits, as the kernel's DAC check does for directories.
func (a *Agent) modeAllows(path string, want uint32) bool {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return false
	}
	return a.allows(&st, want)
}

// allows applies the kernel's DAC rule for the agent's identity
// (.d/uid, .d/gid, .d/groups) to a file already stat'ed: see
// policy.Cred.Permits.
func (a *Agent) allows(st *unix.Stat_t, want uint32) bool {
	return a.Cred().Permits(st.Mode&0o7777, st.Uid, st.Gid, st.Mode&unix.S_IFMT == unix.S_IFDIR, policy.Access(want))
}

// Close releases the session lock.
func (s *Session) Close() error { return s.dir.Close() }

// Messages is the conversation so far.
func (s *Session) Messages() ([]model.Message, error) {
	f, err := s.dir.Open(MessagesFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []model.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var m model.Message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue // a torn last line from a crash
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// AppendMessages adds messages to the conversation, synced.
func (s *Session) AppendMessages(ms []model.Message) error {
	var b bytes.Buffer
	for _, m := range ms {
		line, err := json.Marshal(m)
		if err != nil {
			return abi.Errorf(abi.EIO, "encode message: %w", err)
		}
		b.Write(append(line, '\n'))
	}
	return s.appendSync(MessagesFile, b.Bytes())
}

// Event appends one record to events.jsonl (best effort: a failing log
// never fails the run it describes).
func (s *Session) Event(r Record) {
	if s == nil {
		return
	}
	r.TS = time.Now().UTC().Format(time.RFC3339Nano)
	r.Agent, r.Session = s.agent, s.Name
	line, err := json.Marshal(r)
	if err == nil {
		_ = s.appendSync(EventsFile, append(line, '\n'))
	}
}

// appendSync appends b to the session file name and syncs it. The file is
// opened in the session directory's descriptor, never through a symlink or
// a hard link (safefs), and created 0600 for the session's owner.
func (s *Session) appendSync(name string, b []byte) error {
	f, err := s.dir.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = s.dir.Create(name, 0o600, s.owner)
		if abi.CodeOf(err) == abi.EEXIST { // another writer made it first
			f, err = s.dir.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
		}
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// statusOf is the status word of a finished step.
func statusOf(err error) string {
	switch abi.CodeOf(err) {
	case "":
		return abi.StatusOK
	case abi.ECANCELED:
		return abi.StatusCancelled
	case abi.EACCES:
		return "denied"
	}
	return abi.StatusError
}

func itoa(n int) string { return strconv.Itoa(n) }
