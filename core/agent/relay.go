package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// The agent.* tools run inside the agent's sandbox, where the tree is
// read-only (or not there at all) and no new sandbox can be made: they
// relay their request to the runtime over a socket the runtime hands to
// them alone (descriptor 3, named by CTX_AGENT_FD), and the runtime relays
// it to the launcher, which checks and performs it (agentOp). A tool
// started any other way — by a shell the agent runs, say — has no relay
// and is refused.
const envAgentFD = "CTX_AGENT_FD"

// maxRelayFrame bounds a relay request or answer.
const maxRelayFrame = 1 << 20

type relayRequest struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

type relayAnswer struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *frameError     `json:"error,omitempty"`
}

// toolOps is the agent.* tools' side of the relay.
func toolOps(ctx context.Context, op string, args json.RawMessage) (any, error) {
	fd, err := strconv.Atoi(os.Getenv(envAgentFD))
	if err != nil || fd < 3 {
		return nil, abi.Errorf(abi.EACCES, "agent.%s runs only as a tool call of an agent run (no %s)", op, envAgentFD)
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, abi.Errorf(abi.EACCES, "agent.%s: %s=%d is not the runtime's relay", op, envAgentFD, fd)
	}
	conn := os.NewFile(uintptr(fd), "agent-relay")
	defer conn.Close()
	req, _ := json.Marshal(relayRequest{Op: op, Args: args})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		return nil, abi.Errorf(abi.EHOSTDOWN, "agent.%s: relay: %v", op, err)
	}
	line, err := readBoundedLine(bufio.NewReader(conn), maxRelayFrame)
	if err != nil {
		return nil, abi.Errorf(abi.EHOSTDOWN, "agent.%s: relay: %v", op, err)
	}
	var ans relayAnswer
	if err := json.Unmarshal(line, &ans); err != nil {
		return nil, abi.Errorf(abi.EPROTO, "agent.%s: relay: %v", op, err)
	}
	if ans.Error != nil {
		return nil, ans.Error.err()
	}
	return ans.Result, nil
}

// relay is the runtime's end of one agent.* tool's relay.
type relay struct {
	ours, theirs *os.File
}

// startRelay makes the socket pair for one agent.* tool and answers its
// one request with ops, until the tool ends or ctx is done.
func startRelay(ctx context.Context, ops func(context.Context, string, json.RawMessage) (json.RawMessage, error)) (*relay, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "agent relay: %v", err)
	}
	r := &relay{ours: os.NewFile(uintptr(fds[0]), "relay"), theirs: os.NewFile(uintptr(fds[1]), "relay")}
	go func() {
		line, err := readBoundedLine(bufio.NewReader(r.ours), maxRelayFrame)
		if err != nil {
			return
		}
		var req relayRequest
		var ans relayAnswer
		if err := json.Unmarshal(line, &req); err != nil {
			ans.Error = toFrameError(abi.Errorf(abi.EINVAL, "agent relay: %v", err))
		} else if res, err := ops(ctx, req.Op, req.Args); err != nil {
			ans.Error = toFrameError(err)
		} else {
			ans.Result = res
		}
		b, _ := json.Marshal(ans)
		_, _ = r.ours.Write(append(b, '\n'))
	}()
	return r, nil
}

// Close ends the relay (the tool has exited).
func (r *relay) Close() {
	r.ours.Close()
	r.theirs.Close()
}

// readBoundedLine reads one '\n'-terminated line of at most max bytes.
func readBoundedLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, abi.Errorf(abi.EMSGSIZE, "line longer than %d bytes", max)
		}
		if err == nil {
			return line, nil
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
}
