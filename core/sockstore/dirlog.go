package sockstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

const (
	// recentFrames is how many of the newest frame offsets a dirLog keeps,
	// so subscribers near the tail find their next frame without scanning.
	recentFrames = 1024
	// checkpointEvery spaces the offsets kept for the rest of the log: a
	// reader far behind scans at most this much to find its first frame,
	// and the index costs 16 bytes per this much log.
	checkpointEvery = 256 << 10
	// maxSendLine bounds a line of sends.jsonl: a request frame is at most
	// jsonl.MaxFrame, and its record adds a few fields.
	maxSendLine = jsonl.MaxFrame + 4096
)

// pos is where the frame with event id id starts in events.jsonl.
type pos struct {
	id  uint64
	off int64
}

// dirLog is the Log of one DirStore session.
type dirLog struct {
	dir    string
	events *os.File // O_APPEND; frames are read with ReadAt, below size
	sends  *os.File // O_APPEND

	mu        sync.Mutex
	size      int64 // length of events.jsonl holding complete frames
	lastID    uint64
	recent    [recentFrames]pos
	ckpts     []pos
	sendsSize int64
	buf       []byte // frame plus '\n', reused
	err       error  // sticky: a failed write leaves the log read-only
	closed    bool
}

// load scans both files, cutting off a torn last line and rejecting
// anything else that is not a well-formed log.
func (l *dirLog) load() error {
	size, err := scanLines(l.events, jsonl.MaxFrame, func(line []byte, off int64) error {
		id, err := frameID(line)
		if err != nil {
			return err
		}
		if id <= l.lastID {
			return fmt.Errorf("event id %d after %d", id, l.lastID)
		}
		l.note(id, off)
		l.lastID = id
		return nil
	})
	if err != nil {
		return abi.Errorf(abi.EIO, "corrupt session log %s: %w", l.events.Name(), err)
	}
	l.size = size
	l.sendsSize, err = scanLines(l.sends, maxSendLine, func(line []byte, _ int64) error {
		_, err := parseSend(line)
		return err
	})
	if err != nil {
		return abi.Errorf(abi.EIO, "corrupt send index %s: %w", l.sends.Name(), err)
	}
	return nil
}

// scanLines calls fn for each complete line of f and returns the length of
// the complete lines, truncating f there if a torn line follows.
func scanLines(f *os.File, limit int, fn func(line []byte, off int64) error) (int64, error) {
	lr := getLineReader(io.NewSectionReader(f, 0, 1<<62), limit)
	defer putLineReader(lr)
	var off int64
	for {
		line, n, err := lr.next()
		switch {
		case err == io.EOF:
			return off, nil
		case errors.Is(err, errTorn):
			// A crash in the middle of an append: the line never counted.
			if err := f.Truncate(off); err != nil {
				return 0, fmt.Errorf("failed to cut torn last line: %w", err)
			}
			return off, nil
		case err != nil:
			return 0, fmt.Errorf("at offset %d: %w", off, err)
		}
		if err := fn(line, off); err != nil {
			return 0, fmt.Errorf("at offset %d: %w", off, err)
		}
		off += int64(n)
	}
}

// note remembers where frame id starts; l.mu is held or l is not shared.
func (l *dirLog) note(id uint64, off int64) {
	l.recent[id%recentFrames] = pos{id, off}
	if n := len(l.ckpts); n == 0 || off-l.ckpts[n-1].off >= checkpointEvery {
		l.ckpts = append(l.ckpts, pos{id, off})
	}
}

// seek returns an offset at or before the first frame with id > after;
// l.mu is held.
func (l *dirLog) seek(after uint64) int64 {
	if after >= l.lastID {
		return l.size
	}
	if p := l.recent[(after+1)%recentFrames]; p.id == after+1 {
		return p.off
	}
	i := sort.Search(len(l.ckpts), func(i int) bool { return l.ckpts[i].id > after+1 })
	if i == 0 {
		return 0
	}
	return l.ckpts[i-1].off
}

func (l *dirLog) Append(id uint64, frame []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return abi.Errorf(abi.EIO, "session log %s is closed", l.dir)
	case l.err != nil:
		return l.err
	case id <= l.lastID:
		return abi.Errorf(abi.EINVAL, "event id %d is not after %d", id, l.lastID)
	case len(frame) == 0 || len(frame) > jsonl.MaxFrame || bytes.IndexByte(frame, '\n') >= 0:
		return abi.Errorf(abi.EINVAL, "invalid frame of %d bytes", len(frame))
	}
	l.buf = append(append(l.buf[:0], frame...), '\n')
	n, err := l.events.Write(l.buf)
	if cap(l.buf) > 64<<10 {
		l.buf = nil // don't pin one big frame's buffer
	}
	if err != nil {
		// Cut what may have gone out so the file still ends on a frame.
		_ = l.events.Truncate(l.size)
		l.err = abi.Errorf(abi.EIO, "failed to append to session log %s: %w", l.events.Name(), err)
		return l.err
	}
	l.note(id, l.size)
	l.size += int64(n)
	l.lastID = id
	return nil
}

func (l *dirLog) Sync() error {
	if err := l.events.Sync(); err != nil {
		return abi.Errorf(abi.EIO, "failed to sync session log %s: %w", l.events.Name(), err)
	}
	return nil
}

func (l *dirLog) LastID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastID
}

func (l *dirLog) Frames(after uint64, fn func(id uint64, frame []byte) error) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return abi.Errorf(abi.EIO, "session log %s is closed", l.dir)
	}
	off, end := l.seek(after), l.size
	l.mu.Unlock()
	if off >= end {
		return nil
	}
	lr := getLineReader(io.NewSectionReader(l.events, off, end-off), jsonl.MaxFrame)
	defer putLineReader(lr)
	for {
		line, _, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return abi.Errorf(abi.EIO, "failed to read session log %s: %w", l.events.Name(), err)
		}
		id, err := frameID(line)
		if err != nil {
			return abi.Errorf(abi.EIO, "corrupt session log %s: %w", l.events.Name(), err)
		}
		if id <= after {
			continue
		}
		if err := fn(id, line); err != nil {
			return err
		}
	}
}

func (l *dirLog) Record(s SendRecord) (int64, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep the input byte for byte
	if err := enc.Encode(s); err != nil {
		return -1, abi.Errorf(abi.EINVAL, "failed to encode send record: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return -1, abi.Errorf(abi.EIO, "session log %s is closed", l.dir)
	}
	off := l.sendsSize
	n, err := l.sends.Write(b.Bytes())
	if err == nil {
		err = l.sends.Sync()
	}
	if err != nil {
		_ = l.sends.Truncate(l.sendsSize)
		return -1, abi.Errorf(abi.CodeOf(err), "failed to record send in %s: %w", l.sends.Name(), err)
	}
	l.sendsSize += int64(n)
	return off, nil
}

func (l *dirLog) Sends(fn func(off int64, s SendRecord) error) error {
	l.mu.Lock()
	size := l.sendsSize
	l.mu.Unlock()
	lr := getLineReader(io.NewSectionReader(l.sends, 0, size), maxSendLine)
	defer putLineReader(lr)
	var off int64
	for {
		line, n, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return abi.Errorf(abi.EIO, "failed to read send index %s: %w", l.sends.Name(), err)
		}
		s, err := parseSend(line)
		if err != nil {
			return abi.Errorf(abi.EIO, "corrupt send index %s: %w", l.sends.Name(), err)
		}
		if err := fn(off, s); err != nil {
			return err
		}
		off += int64(n)
	}
}

func (l *dirLog) SendAt(off int64) (SendRecord, error) {
	l.mu.Lock()
	size := l.sendsSize
	l.mu.Unlock()
	if off < 0 || off >= size {
		return SendRecord{}, abi.Errorf(abi.EINVAL, "no send record at offset %d of %s", off, l.sends.Name())
	}
	lr := getLineReader(io.NewSectionReader(l.sends, off, size-off), maxSendLine)
	defer putLineReader(lr)
	line, _, err := lr.next()
	if err != nil {
		return SendRecord{}, abi.Errorf(abi.EIO, "failed to read send index %s at %d: %w", l.sends.Name(), off, err)
	}
	s, err := parseSend(line)
	if err != nil {
		return SendRecord{}, abi.Errorf(abi.EIO, "corrupt send index %s at %d: %w", l.sends.Name(), off, err)
	}
	return s, nil
}

func (l *dirLog) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size + l.sendsSize
}

func (l *dirLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.events.Close() // releases the flock
	if serr := l.sends.Close(); err == nil {
		err = serr
	}
	return err
}

func parseSend(line []byte) (SendRecord, error) {
	var s SendRecord
	if err := json.Unmarshal(line, &s); err != nil {
		return SendRecord{}, err
	}
	if s.ID == "" || s.Run == "" {
		return SendRecord{}, errors.New("send record without id or run")
	}
	return s, nil
}

// FrameHead reads type, event id and run from the prefix every frame
// abi.Event.MarshalJSON writes ({"type":"T","id":"N","run":"R"); ok is
// false for anything else (run is "" when the frame has none there), which
// callers then give to the JSON decoder. Scans of a session log use it to
// skip frames without decoding them.
func FrameHead(frame []byte) (typ string, id uint64, run string, ok bool) {
	str := func(b []byte, key string) (string, []byte, bool) {
		rest, ok := bytes.CutPrefix(b, []byte(key))
		if !ok {
			return "", nil, false
		}
		i := bytes.IndexByte(rest, '"')
		if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
			return "", nil, false
		}
		return string(rest[:i]), rest[i+1:], true
	}
	typ, rest, ok := str(frame, `{"type":"`)
	if !ok {
		return "", 0, "", false
	}
	n, rest, ok := str(rest, `,"id":"`)
	if !ok {
		return "", 0, "", false
	}
	if id, ok = parseID([]byte(n)); !ok {
		return "", 0, "", false
	}
	run, _, _ = str(rest, `,"run":"`)
	return typ, id, run, true
}

// frameID reads the event id of a logged frame: from its head when it
// has the usual one, else through the JSON decoder.
func frameID(line []byte) (uint64, error) {
	if _, id, _, ok := FrameHead(line); ok {
		return id, nil
	}
	var f struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &f); err != nil {
		return 0, fmt.Errorf("frame is not JSON: %w", err)
	}
	id, ok := parseID([]byte(f.ID))
	if !ok {
		return 0, fmt.Errorf("frame has no valid event id (%q)", short(f.ID))
	}
	return id, nil
}

// parseID parses a canonical decimal event id: no sign, no leading zero,
// not zero, no overflow.
func parseID(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || b[0] == '0' {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// errTorn is a last line without its '\n'.
var errTorn = errors.New("torn last line")

// lineReader reads '\n'-terminated lines of bounded length, holding at
// most limit+1 bytes of any line.
type lineReader struct {
	br    *bufio.Reader
	acc   []byte
	limit int
}

var lineReaders = sync.Pool{New: func() any {
	return &lineReader{br: bufio.NewReaderSize(nil, 64<<10)}
}}

func getLineReader(r io.Reader, limit int) *lineReader {
	lr := lineReaders.Get().(*lineReader)
	lr.br.Reset(r)
	lr.limit = limit
	return lr
}

func putLineReader(lr *lineReader) {
	lr.br.Reset(nil)
	if cap(lr.acc) > 2*jsonl.MaxFrame {
		lr.acc = nil
	}
	lineReaders.Put(lr)
}

// next returns the next line without '\n' and how many bytes it took.
// The line is valid until the next call.
func (r *lineReader) next() ([]byte, int, error) {
	r.acc = r.acc[:0]
	n := 0
	for {
		chunk, err := r.br.ReadSlice('\n')
		n += len(chunk)
		if n > r.limit+1 {
			return nil, n, fmt.Errorf("line longer than %d bytes", r.limit)
		}
		switch {
		case err == nil:
			chunk = chunk[:len(chunk)-1]
			if len(r.acc) == 0 {
				return chunk, n, nil
			}
			r.acc = append(r.acc, chunk...)
			return r.acc, n, nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.acc = append(r.acc, chunk...)
		case err == io.EOF && n == 0:
			return nil, 0, io.EOF
		case err == io.EOF:
			return nil, n, errTorn
		default:
			return nil, n, err
		}
	}
}

// short keeps error messages bounded when the log holds hostile bytes.
func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
