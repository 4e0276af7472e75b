package agent

import (
	"encoding/json"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// A turn runs over its own connection between the launcher (outside the
// sandbox) and the runtime (inside): JSON lines, each a frame.
//
//	launcher → runtime: history (one message each), run, model_event,
//	                    model_done, op_result, cancel
//	runtime → launcher: frame (a body frame for the client), record,
//	                    save, model, op, done
//
// The runtime is on the agent's side of the sandbox and is treated as
// hostile: the launcher bounds every frame, accepts only body frames for
// the client, checks policy itself before a model call or an agent.*
// operation, and decides which session the turn writes to.
type frame struct {
	T        string           `json:"t"`
	ID       int              `json:"id,omitempty"`
	Run      string           `json:"run,omitempty"`
	Session  string           `json:"session,omitempty"`
	Config   *runtimeConfig   `json:"config,omitempty"`
	Messages []model.Message  `json:"messages,omitempty"`
	Tools    []model.ToolSpec `json:"tools,omitempty"`
	Model    string           `json:"model,omitempty"`
	Event    *abi.Event       `json:"event,omitempty"`
	Record   *Record          `json:"record,omitempty"`
	Op       string           `json:"op,omitempty"`
	Args     json.RawMessage  `json:"args,omitempty"`
	Result   json.RawMessage  `json:"result,omitempty"`
	Error    *frameError      `json:"error,omitempty"`
}

// maxTurnFrame bounds one frame either way: a message carries at most a
// tool's output (MaxToolOutput) or a model's answer, JSON-escaped.
const maxTurnFrame = 16 << 20

type frameError struct {
	Code    abi.Code `json:"code"`
	Message string   `json:"message"`
}

func toFrameError(err error) *frameError {
	if err == nil {
		return nil
	}
	return &frameError{Code: abi.CodeOf(err), Message: err.Error()}
}

// err is the error a frame carries; an unknown code is EIO.
func (e *frameError) err() error {
	if e == nil {
		return nil
	}
	code := e.Code
	if !code.Known() {
		code = abi.EIO
	}
	return abi.Errorf(code, "%s", trunc4k(e.Message))
}

func trunc4k(s string) string {
	if len(s) > 4096 {
		return s[:4096] + "…"
	}
	return s
}

// conn is one end of a turn's connection.
type conn struct {
	f  *os.File
	r  *jsonl.Reader
	mu sync.Mutex
}

func newConn(f *os.File) *conn {
	return &conn{f: f, r: jsonl.NewReaderSize(f, maxTurnFrame)}
}

func (c *conn) send(f frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return abi.Errorf(abi.EINVAL, "turn frame: %v", err)
	}
	if len(b) > maxTurnFrame {
		return abi.Errorf(abi.EMSGSIZE, "turn frame of %d bytes is over %d", len(b), maxTurnFrame)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.f.Write(append(b, '\n')); err != nil {
		return abi.Errorf(abi.EHOSTDOWN, "turn connection: %v", err)
	}
	return nil
}

func (c *conn) recv() (frame, error) {
	var f frame
	b, err := c.r.ReadFrame()
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, abi.Errorf(abi.EPROTO, "turn frame: %v", err)
	}
	return f, nil
}

func (c *conn) close() { c.f.Close() }

// socketPair is a connected pair of stream sockets, close-on-exec and
// non-blocking, so Go's poller serves them and Close ends a pending read.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, nil, abi.Errorf(abi.EIO, "socketpair: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), "turn"), os.NewFile(uintptr(fds[1]), "turn"), nil
}

// controlConn makes a *net.UnixConn of a control socket descriptor.
func controlConn(f *os.File) (*net.UnixConn, error) {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "agent control socket: %v", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, abi.Errorf(abi.EINVAL, "agent control socket is not a unix socket")
	}
	return uc, nil
}

// sendFile passes f over the control socket (SCM_RIGHTS) with one byte of
// data; the receiver gets its own descriptor of the same socket.
func sendFile(control *net.UnixConn, f *os.File) error {
	if _, _, err := control.WriteMsgUnix([]byte{'t'}, unix.UnixRights(int(f.Fd())), nil); err != nil {
		return abi.Errorf(abi.EHOSTDOWN, "agent runtime: control: %v", err)
	}
	return nil
}

// recvFile receives one descriptor sent by sendFile (close-on-exec: the
// net package asks for MSG_CMSG_CLOEXEC); errEOF once the launcher closed
// the control socket.
func recvFile(control *net.UnixConn) (*os.File, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := control.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	if n == 0 && oobn == 0 {
		return nil, errEOF
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, abi.Errorf(abi.EPROTO, "agent runtime: control message without a descriptor")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, abi.Errorf(abi.EPROTO, "agent runtime: control message with %d descriptors", len(fds))
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		return nil, abi.Errorf(abi.EIO, "agent runtime: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), "turn"), nil
}

var errEOF = abi.Errorf(abi.EHOSTDOWN, "the launcher closed the control socket")
