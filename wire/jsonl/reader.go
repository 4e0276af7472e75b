package jsonl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Reader reads newline-delimited frames from a stream. A frame is a line
// without its '\n' and without one trailing '\r'; empty lines are skipped.
// A line longer than the limit is reported as EMSGSIZE and skipped without
// ever being held in memory, and the Reader stays usable.
//
// ReadFrame blocks in the underlying Read; to cancel it, close the stream or
// set a read deadline on it. A Reader is not safe for concurrent use.
type Reader struct {
	br    *bufio.Reader
	limit int
	buf   []byte // accumulates a frame that spans several chunks
	err   error  // sticky: set when a read fails in the middle of a line
	line  int    // lines consumed, empty and oversize ones included
}

// Line is the 1-based line number of the frame (or oversize line) the last
// ReadFrame returned: empty lines are skipped but counted, so it is the
// line an editor shows.
func (r *Reader) Line() int { return r.line }

// NewReader returns a Reader enforcing MaxFrame.
func NewReader(r io.Reader) *Reader {
	return NewReaderSize(r, MaxFrame)
}

// NewReaderSize returns a Reader enforcing limit bytes per frame; a
// non-positive limit means MaxFrame.
func NewReaderSize(r io.Reader, limit int) *Reader {
	if limit <= 0 {
		limit = MaxFrame
	}
	// Small limits get small chunks so tests exercise frames spanning reads.
	size := min(max(limit, 16), chunkSize)
	return &Reader{br: bufio.NewReaderSize(r, size), limit: limit}
}

// ReadFrame returns the next frame. The returned slice is only valid until
// the next call to ReadFrame or Decode; copy it to keep it.
//
// A frame over the limit returns an error with code EMSGSIZE; the next call
// returns the following frame. A last line without '\n' is a frame; after it
// ReadFrame returns io.EOF unwrapped. If the stream fails between frames the
// error is returned and the Reader may be retried; if it fails mid-line the
// stream is out of sync and every later call returns the same error.
func (r *Reader) ReadFrame() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		frame, err := r.readLine()
		if err != nil {
			return nil, err
		}
		if len(frame) > 0 {
			return frame, nil
		}
	}
}

// Decode reads the next frame and unmarshals it into v. Invalid JSON is
// EINVAL and only costs that frame; other errors are those of ReadFrame.
// Broken reports whether a read failed in the middle of a line: every
// later ReadFrame fails too.
func (r *Reader) Broken() bool { return r.err != nil }

func (r *Reader) Decode(v any) error {
	frame, err := r.ReadFrame()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(frame, v); err != nil {
		return abi.Errorf(abi.EINVAL, "jsonl: failed to decode frame: %w", err)
	}
	return nil
}

// readLine returns one line, possibly empty, never holding more than
// limit+1 bytes of it (the extra byte is room for a trailing '\r').
func (r *Reader) readLine() ([]byte, error) {
	// Don't pin one huge frame's buffer for the Reader's whole life.
	if cap(r.buf) > chunkSize {
		r.buf = nil
	}
	r.buf = r.buf[:0]
	n := 0 // line length seen so far, excluding '\n'
	for {
		chunk, err := r.br.ReadSlice('\n')
		complete := err == nil
		if complete {
			r.line++
			chunk = chunk[:len(chunk)-1]
			if n == 0 {
				// The whole line sits in bufio's buffer: hand it out uncopied.
				return r.finish(chunk, len(chunk))
			}
		}
		if n+len(chunk) <= r.limit+1 {
			r.appendChunk(chunk)
		}
		n += len(chunk)
		switch {
		case complete:
			return r.finish(r.buf, n)
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if n == 0 {
				return nil, io.EOF
			}
			r.line++
			return r.finish(r.buf, n)
		case n > 0:
			r.err = fmt.Errorf("jsonl: failed to read frame, stream broken mid-line: %w", err)
			return nil, r.err
		default:
			return nil, fmt.Errorf("jsonl: failed to read frame: %w", err)
		}
	}
}

// appendChunk grows buf by doubling but never past limit+1, so an oversize
// line allocates about twice the limit in total, whatever its length.
func (r *Reader) appendChunk(chunk []byte) {
	need := len(r.buf) + len(chunk)
	if need > cap(r.buf) {
		grown := make([]byte, len(r.buf), min(max(2*cap(r.buf), need), r.limit+1))
		copy(grown, r.buf)
		r.buf = grown
	}
	r.buf = append(r.buf, chunk...)
}

// finish checks a line of n bytes of which line holds the first len(line).
func (r *Reader) finish(line []byte, n int) ([]byte, error) {
	if n == len(line) && n > 0 && line[n-1] == '\r' {
		line, n = line[:n-1], n-1
	}
	if n > r.limit {
		return nil, abi.Errorf(abi.EMSGSIZE, "jsonl: frame of %d bytes exceeds the %d-byte limit", n, r.limit)
	}
	return line, nil
}
