package plughost

import (
	"encoding/binary"
	"io"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Frames between cortexfsd and the plugin host (see host/cortexfs-plugin-host.c):
// op (1 byte), 3 zero bytes, nparts (u32 LE), then each part as
// len (u32 LE) and len bytes.

// Frame ops.
const (
	opHello   = 'H'
	opFail    = 'F'
	opResult  = 'R'
	opError   = 'E'
	opDropped = 'D'
	opExecute = 'X'
	opQuit    = 'Q'
)

// Bounds: one ABI buffer, the parts of one frame (a hello carries the
// plugin info and one descriptor per tool), and a whole frame.
const (
	MaxPart  = 16 << 20
	MaxParts = 1 + 1024
	MaxFrame = 64 << 20
)

// frame is one decoded frame.
type frame struct {
	op    byte
	parts [][]byte
}

func writeFrame(w io.Writer, op byte, parts ...[]byte) error {
	n := 8
	for _, p := range parts {
		n += 4 + len(p)
	}
	b := make([]byte, 8, n)
	b[0] = op
	binary.LittleEndian.PutUint32(b[4:], uint32(len(parts)))
	for _, p := range parts {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	_, err := w.Write(b)
	return err
}

// readFrame decodes one frame, refusing anything past the bounds before
// allocating for it: the host is a plugin's process, and the plugin's
// output is not trusted.
func readFrame(r io.Reader) (frame, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	f := frame{op: hdr[0]}
	if hdr[1]|hdr[2]|hdr[3] != 0 {
		return frame{}, abi.Errorf(abi.EPROTO, "plugin host: bad frame header")
	}
	n := binary.LittleEndian.Uint32(hdr[4:])
	if n > MaxParts {
		return frame{}, abi.Errorf(abi.EPROTO, "plugin host: frame of %d parts", n)
	}
	total := 0
	for i := uint32(0); i < n; i++ {
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return frame{}, noEOF(err)
		}
		size := binary.LittleEndian.Uint32(l[:])
		total += int(size)
		if size > MaxPart || total > MaxFrame {
			return frame{}, abi.Errorf(abi.EMSGSIZE, "plugin host: part of %d bytes (frame bound %d)", size, MaxFrame)
		}
		p := make([]byte, size)
		if _, err := io.ReadFull(r, p); err != nil {
			return frame{}, noEOF(err)
		}
		f.parts = append(f.parts, p)
	}
	return f, nil
}

// noEOF turns a clean EOF inside a frame into ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
