package jsonl

import (
	"bytes"

	"github.com/cortexfs/cortexfs/core/abi"
)

// MaxFrame is the largest frame, in bytes, excluding the line terminator.
const MaxFrame = 1 << 20

// chunkSize bounds a single read from the underlying stream, so an oversize
// line costs at most one chunk of buffer plus the frame limit, not its length.
const chunkSize = 64 << 10

// checkFrame rejects frames the Reader could not give back byte for byte.
func checkFrame(b []byte, limit int) error {
	switch {
	case len(b) > limit:
		return abi.Errorf(abi.EMSGSIZE, "jsonl: frame of %d bytes exceeds the %d-byte limit", len(b), limit)
	case len(b) == 0:
		// An empty line is not a frame; the Reader would skip it.
		return abi.Errorf(abi.EINVAL, "jsonl: empty frame")
	case bytes.IndexByte(b, '\n') >= 0:
		return abi.Errorf(abi.EINVAL, "jsonl: frame contains a raw newline")
	case b[len(b)-1] == '\r':
		// The Reader strips a trailing CR to accept CRLF peers.
		return abi.Errorf(abi.EINVAL, "jsonl: frame ends with a carriage return")
	}
	return nil
}
