package tasks

import (
	"os"
	"sync"
)

// spool writes a stream to a file up to a cap and always keeps the last
// tail bytes in memory, so a chatty process can neither fill the disk nor
// lose the end of its output.
type spool struct {
	mu        sync.Mutex
	f         *os.File
	cap       int64
	written   int64
	truncated bool
	tail      []byte
	tailMax   int
}

func newSpool(path string, cap int64, tailMax int) (*spool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &spool{f: f, cap: cap, tailMax: tailMax}, nil
}

func (s *spool) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	room := s.cap - s.written
	k := min(int64(len(p)), max(room, 0))
	if k > 0 {
		n, _ := s.f.Write(p[:k])
		s.written += int64(n)
	}
	if k < int64(len(p)) {
		s.truncated = true
	}
	s.tail = append(s.tail, p...)
	if len(s.tail) > s.tailMax {
		s.tail = append([]byte(nil), s.tail[len(s.tail)-s.tailMax:]...)
	}
	return len(p), nil
}

// Tail is the true tail of everything written, whatever the file kept.
func (s *spool) Tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.tail)
}

// Truncated reports whether the file stopped at its cap.
func (s *spool) Truncated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncated
}

func (s *spool) Close() error { return s.f.Close() }

// readTail returns the last n bytes of a file (for a capped spool: of the
// part it kept).
func readTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-n, 0)
	buf := make([]byte, fi.Size()-off)
	k, _ := f.ReadAt(buf, off)
	return string(buf[:k])
}
