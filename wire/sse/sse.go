// Package sse reads a text/event-stream (the WHATWG Server-Sent Events
// format) into events, with a bound on the size of one event.
package sse

import (
	"bufio"
	"bytes"
	"io"

	"github.com/cortexfs/cortexfs/core/abi"
)

// MaxEvent bounds the data of one event; a provider never needs more, and a
// hostile stream cannot make the reader hold more.
const MaxEvent = 8 << 20

// Event is one dispatched event. Data lines are joined with "\n" as the
// format says; Type is "" when no "event:" field was given (clients treat
// that as "message").
type Event struct {
	Type string
	Data []byte
	ID   string
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	br    *bufio.Reader
	limit int
	line  []byte
	ev    Event
	data  bytes.Buffer
	has   bool // a data field was seen for the pending event
	first bool // the BOM check is still due
}

// NewReader returns a Reader enforcing MaxEvent.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, MaxEvent) }

// NewReaderSize returns a Reader enforcing limit bytes of data per event.
func NewReaderSize(r io.Reader, limit int) *Reader {
	if limit <= 0 {
		limit = MaxEvent
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), limit: limit, first: true}
}

// Next returns the next event with a data field. Its Data is only valid
// until the next call. At the end of the stream it returns io.EOF; a last
// event whose lines are complete but lack the blank line is still returned;
// a line cut before its newline is io.ErrUnexpectedEOF, so a cut stream is
// visible. A line or event over the limit is EMSGSIZE; read errors pass
// through.
func (r *Reader) Next() (Event, error) {
	r.reset()
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && r.has {
				// A last event without its blank line: lenient, like
				// browsers are with a final "data: [DONE]\n".
				r.ev.Data = bytes.TrimSuffix(r.data.Bytes(), []byte("\n"))
				return r.ev, nil
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if r.has {
				r.ev.Data = bytes.TrimSuffix(r.data.Bytes(), []byte("\n"))
				return r.ev, nil
			}
			r.reset()
			continue
		}
		if err := r.field(line); err != nil {
			return Event{}, err
		}
	}
}

func (r *Reader) reset() {
	r.ev = Event{}
	r.data.Reset()
	r.has = false
}

// field applies one "name: value" line to the pending event.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment, e.g. ": keep-alive" or ": OPENROUTER PROCESSING"
	}
	name, value, ok := bytes.Cut(line, []byte(":"))
	if ok && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if r.data.Len()+len(value)+1 > r.limit {
			return abi.Errorf(abi.EMSGSIZE, "sse: event data larger than %d bytes", r.limit)
		}
		r.data.Write(value)
		r.data.WriteByte('\n')
		r.has = true
	case "event":
		r.ev.Type = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.ev.ID = string(value)
		}
	}
	return nil // retry and unknown fields are ignored
}

// readLine returns one line without its terminator ("\n", "\r\n" or "\r"
// followed by "\n"; a lone "\r" is treated as part of the line ending only
// when a "\n" follows, which every provider does).
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(r.line)+len(chunk) > r.limit+2 {
			return nil, abi.Errorf(abi.EMSGSIZE, "sse: line larger than %d bytes", r.limit)
		}
		r.line = append(r.line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(r.line) > 0 {
				return nil, io.ErrUnexpectedEOF // a line cut before its end
			}
			return nil, err
		}
		break
	}
	line := bytes.TrimSuffix(r.line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if r.first {
		r.first = false
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	}
	return line, nil
}
