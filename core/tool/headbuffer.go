package tool

import (
	"strings"
	"unicode/utf8"
)

// headBuffer keeps the first max bytes written to it and counts the rest.
// It never fails a write, so a chatty child costs bounded memory and still
// never blocks on a full pipe.
type headBuffer struct {
	buf     []byte
	max     int
	dropped int64
}

func (h *headBuffer) Write(p []byte) (int, error) {
	room := min(h.max-len(h.buf), len(p))
	if room > 0 {
		if h.buf == nil {
			// Grow in steps up to max, not to the size of one big write.
			h.buf = make([]byte, 0, min(h.max, 32<<10))
		}
		h.buf = append(h.buf, p[:room]...)
	}
	h.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

// truncated reports whether bytes were dropped.
func (h *headBuffer) truncated() bool { return h.dropped > 0 }

// text is the kept output as valid UTF-8: a character split by the cut is
// dropped, other invalid bytes become U+FFFD.
func (h *headBuffer) text() string {
	b := h.buf
	if h.truncated() {
		b = trimPartialRune(b)
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
