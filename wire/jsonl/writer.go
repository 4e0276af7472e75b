package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Writer writes newline-delimited frames. It is safe for concurrent use:
// each frame, with its '\n', goes out in a single Write call under a mutex,
// so frames from different goroutines never interleave.
//
// Writer has no queue. A call returns only once the underlying Write has
// returned, so a peer that stops reading stalls every writer: that blocking
// is the backpressure. To bound it, set a write deadline on the stream or
// close it. After a failed Write the stream may hold a partial frame, so the
// error is sticky: every later call returns it without writing.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte // frame plus '\n', reused between calls
	err error
}

// NewWriter returns a Writer enforcing MaxFrame.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// WriteFrame writes b followed by '\n'. A frame over MaxFrame is EMSGSIZE;
// an empty frame, one containing '\n' or one ending in '\r' (which a Reader
// would strip) is EINVAL. Nothing is written when a frame is rejected.
func (w *Writer) WriteFrame(b []byte) error {
	if err := checkFrame(b, MaxFrame); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.buf = append(append(w.buf[:0], b...), '\n')
	err := w.write(w.buf)
	// Don't pin one huge frame's buffer for the Writer's whole life.
	if cap(w.buf) > chunkSize {
		w.buf = nil
	}
	return err
}

// Encode writes the JSON encoding of v as one frame, without HTML escaping.
// A value that cannot be encoded is EINVAL; a too-large one is EMSGSIZE.
func (w *Writer) Encode(v any) error {
	// Encode outside the lock so slow marshalers don't serialize writers.
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return abi.Errorf(abi.EINVAL, "jsonl: failed to encode frame: %w", err)
	}
	line := out.Bytes() // Encoder already ends the value with the '\n' we need
	if err := checkFrame(line[:len(line)-1], MaxFrame); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.write(line)
}

// write sends line in one Write call; the caller holds mu.
func (w *Writer) write(line []byte) error {
	n, err := w.w.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("jsonl: failed to write frame: %w", err)
	}
	return w.err
}
