package tree

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MaxLog bounds a .d/log file; past it the oldest half is dropped.
const MaxLog = 64 << 10

// LogLine is one call record: facts only, never prompt bodies or secrets.
type LogLine struct {
	Time     time.Time
	Run      string
	UID      int
	Status   string // ok | error | cancelled
	Code     string // stable code when Status is error
	Duration time.Duration
	Extra    string // short key=value facts (driver=…), never user text
}

func (l LogLine) String() string {
	s := fmt.Sprintf("%s run=%s uid=%d status=%s", l.Time.UTC().Format(time.RFC3339), l.Run, l.UID, l.Status)
	if l.Code != "" {
		s += " code=" + l.Code
	}
	s += fmt.Sprintf(" duration_ms=%d", l.Duration.Milliseconds())
	if l.Extra != "" {
		s += " " + strings.ReplaceAll(l.Extra, "\n", " ")
	}
	return s + "\n"
}

// AppendLog adds one line to the object's .d/log under an exclusive flock,
// trimming the file to its newest half when it passes MaxLog. Logging is
// best effort for callers without write access (control files are 0644):
// the error is returned and callers may ignore it. The log is never
// created, and never written through a symlink, a hard link or anything
// but a regular file (core/safefs): a privileged runner must not append to
// or truncate a file another user pointed .d/log at.
func (o Object) AppendLog(l LogLine) error {
	d, err := o.CtlDir()
	if err != nil {
		return err
	}
	defer d.Close()
	f, err := d.OpenFile("log", os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return AppendLogFile(f, l)
}

// AppendLogFile is AppendLog on an open log file (opened O_RDWR|O_APPEND),
// for privileged writers that open it fd-relative.
func AppendLogFile(f *os.File, l LogLine) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if _, err := f.WriteString(l.String()); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() <= MaxLog {
		return err
	}
	// Trim in place under the lock: keep whole lines of the newest half.
	buf := make([]byte, MaxLog/2)
	if _, err := f.ReadAt(buf, fi.Size()-int64(len(buf))); err != nil {
		return err
	}
	if i := strings.IndexByte(string(buf), '\n'); i >= 0 {
		buf = buf[i+1:]
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.Write(buf) // O_APPEND: lands at offset 0 of the emptied file
	return err
}
