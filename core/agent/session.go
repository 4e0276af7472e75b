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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/policy"
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
	Dir   string
	agent string
	lock  *os.File
}

// SessionDir is home/<uid>/agent/<agent>/session/<name>/ for a private
// session, shared/<space>/agent/<agent>/session/<name>/ for a shared one.
func (a *Agent) SessionDir(uid int, shared, name string) string {
	if shared != "" {
		return a.Root.Path(tree.SharedDir, shared, tree.AgentDir, a.Name, "session", name)
	}
	return filepath.Join(a.Root.Home(uid), tree.AgentDir, a.Name, "session", name)
}

// OpenSession creates (0700) and locks a session directory. A shared
// session needs an existing shared/<space>/ and allow <type>
// shared:<space> write. A session another run holds is EBUSY.
func (a *Agent) OpenSession(uid int, shared, name string) (*Session, error) {
	if name == "" {
		name = "default"
	}
	if err := abi.ValidName(name); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "session: %v", err)
	}
	if shared != "" {
		if err := abi.ValidName(shared); err != nil {
			return nil, abi.Errorf(abi.EINVAL, "shared space: %v", err)
		}
		if err := a.Policy.Check(a.Type, policy.ClassShared, shared, "write"); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(a.Root.Path(tree.SharedDir, shared)); err != nil || !fi.IsDir() {
			return nil, abi.Errorf(abi.ENOENT, "shared space %s does not exist", shared)
		}
	}
	dir := a.SessionDir(uid, shared, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "failed to create session %s: %w", name, err)
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "session %s: %w", name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, abi.Errorf(abi.EBUSY, "session %s is busy with another run", name)
	}
	return &Session{Name: name, Dir: dir, agent: a.Name, lock: f}, nil
}

// Close releases the session lock.
func (s *Session) Close() error { return s.lock.Close() }

// Messages is the conversation so far.
func (s *Session) Messages() ([]model.Message, error) {
	f, err := os.Open(filepath.Join(s.Dir, MessagesFile))
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
	return appendSync(filepath.Join(s.Dir, MessagesFile), b.Bytes())
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
		_ = appendSync(filepath.Join(s.Dir, EventsFile), append(line, '\n'))
	}
}

func appendSync(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
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
