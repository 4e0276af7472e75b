package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// Limits of one message (a request or a response, assembled from parts).
const (
	MaxRequest = 16 << 20
	MaxReply   = 64 << 20
	// MaxFds bounds the descriptors one request may carry.
	MaxFds = 4
	// partBytes is the raw payload of one part frame; base64 makes it
	// 4/3 larger, well inside jsonl.MaxFrame.
	partBytes = 512 << 10
)

// part is one frame of a message larger than jsonl.MaxFrame: the
// message's bytes, split, each piece base64 in Part; More on all but the
// last. The receiver joins them and decodes the whole.
type part struct {
	V    int    `json:"v"`
	ID   uint64 `json:"id"`
	Part []byte `json:"part"`
	More bool   `json:"more,omitempty"`
}

// isPart reports whether frame is a part frame (has a "part" key).
func isPart(frame []byte) (part, bool, error) {
	if !bytes.Contains(frame, []byte(`"part"`)) {
		return part{}, false, nil
	}
	var probe struct {
		Part *json.RawMessage `json:"part"`
	}
	if json.Unmarshal(frame, &probe) != nil || probe.Part == nil {
		return part{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.DisallowUnknownFields()
	var p part
	if err := dec.Decode(&p); err != nil {
		return p, true, abi.Errorf(abi.EPROTO, "ipc: bad part frame: %v", err)
	}
	if p.V != Version {
		return p, true, VersionError(p.V)
	}
	return p, true, nil
}

// readMessage reads one message: a single frame, or part frames joined.
// A message over limit is EMSGSIZE once all of it has been read (so the
// stream stays in sync); anything malformed is EPROTO.
func readMessage(r *jsonl.Reader, limit int) ([]byte, error) {
	var buf []byte
	var id uint64
	started, tooBig := false, false
	for {
		frame, err := r.ReadFrame()
		if err != nil {
			if started && errors.Is(err, io.EOF) {
				return nil, abi.Errorf(abi.EPROTO, "ipc: stream ended inside a message")
			}
			return nil, err
		}
		p, ok, err := isPart(frame)
		if err != nil {
			return nil, err
		}
		if !ok {
			if started {
				return nil, abi.Errorf(abi.EPROTO, "ipc: a whole frame arrived inside a message of parts")
			}
			if len(frame) > limit {
				return nil, abi.Errorf(abi.EMSGSIZE, "ipc: message of %d bytes exceeds %d", len(frame), limit)
			}
			return append([]byte(nil), frame...), nil
		}
		if started && p.ID != id {
			return nil, abi.Errorf(abi.EPROTO, "ipc: part of message %d inside message %d", p.ID, id)
		}
		started, id = true, p.ID
		if len(buf)+len(p.Part) > limit {
			tooBig, buf = true, nil
		}
		if !tooBig {
			buf = append(buf, p.Part...)
		}
		if !p.More {
			if tooBig {
				return nil, abi.Errorf(abi.EMSGSIZE, "ipc: message exceeds %d bytes", limit)
			}
			return buf, nil
		}
	}
}

// writer sends messages on one connection, attaching descriptors to the
// first bytes of a message (SCM_RIGHTS) when asked.
type writer struct {
	mu sync.Mutex
	c  *net.UnixConn
}

// write sends msg (one JSON value, no newline) with files attached.
func (w *writer) write(id uint64, msg []byte, files []*os.File) error {
	frames := [][]byte{msg}
	if len(msg) > jsonl.MaxFrame {
		frames = frames[:0]
		for off := 0; off < len(msg); off += partBytes {
			end := min(off+partBytes, len(msg))
			b, _ := json.Marshal(part{V: Version, ID: id, Part: msg[off:end], More: end < len(msg)})
			frames = append(frames, b)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, f := range frames {
		line := append(f, '\n')
		if i == 0 && len(files) > 0 {
			if err := w.sendRights(line, files); err != nil {
				return err
			}
			continue
		}
		if _, err := w.c.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// sendRights writes line with the descriptors of files attached to its
// first byte; the kernel delivers them with the read that returns it.
func (w *writer) sendRights(line []byte, files []*os.File) error {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, _, err := w.c.WriteMsgUnix(line[:1], unix.UnixRights(fds...), nil)
	if err != nil {
		return err
	}
	if n != 1 {
		return io.ErrShortWrite
	}
	_, err = w.c.Write(line[1:])
	return err
}

// fdReader reads a Unix stream collecting the descriptors the peer sent
// (SCM_RIGHTS) in arrival order; the request that announced them takes
// them with take.
type fdReader struct {
	c   *net.UnixConn
	oob []byte
	fds []*os.File
	err error // a protocol violation seen in the control data
}

func newFDReader(c *net.UnixConn) *fdReader {
	return &fdReader{c: c, oob: make([]byte, unix.CmsgSpace(4*MaxFds))}
}

func (r *fdReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, oobn, flags, _, err := r.c.ReadMsgUnix(p, r.oob)
	n, oobn = max(n, 0), max(oobn, 0) // -1 on error
	if oobn > 0 {
		r.collect(r.oob[:oobn])
	}
	if flags&unix.MSG_CTRUNC != 0 && r.err == nil {
		// The kernel closed the descriptors that did not fit.
		r.err = abi.Errorf(abi.EPROTO, "ipc: more than %d descriptors sent", MaxFds)
	}
	if r.err != nil {
		return n, r.err
	}
	return n, err
}

func (r *fdReader) collect(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		r.err = abi.Errorf(abi.EPROTO, "ipc: bad control message: %v", err)
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue // credentials or other control data: not descriptors
		}
		for _, fd := range fds {
			// Go asks for MSG_CMSG_CLOEXEC; set it again in case a fork raced.
			unix.CloseOnExec(fd)
			r.fds = append(r.fds, os.NewFile(uintptr(fd), "ipc-fd"))
		}
	}
	if len(r.fds) > MaxFds {
		r.err = abi.Errorf(abi.EPROTO, "ipc: more than %d descriptors pending", MaxFds)
	}
}

// take removes the first n received descriptors; fewer than n is EPROTO.
func (r *fdReader) take(n int) ([]*os.File, error) {
	if n < 0 || n > MaxFds {
		return nil, abi.Errorf(abi.EPROTO, "ipc: request announces %d descriptors (at most %d)", n, MaxFds)
	}
	if n > len(r.fds) {
		return nil, abi.Errorf(abi.EPROTO, "ipc: request announces %d descriptors, %d arrived", n, len(r.fds))
	}
	out := r.fds[:n:n]
	r.fds = r.fds[n:]
	return out, nil
}

// closeAll closes descriptors nobody took.
func (r *fdReader) closeAll() {
	for _, f := range r.fds {
		f.Close()
	}
	r.fds = nil
}
