package sock

import (
	"context"
	"encoding/json"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// Runner produces the frames of one run. It is what sits behind a socket: a
// model driver, an agent loop.
//
// emit stamps each frame with the run id and the session's next event id
// (whatever the runner put there is overwritten), appends it to the
// session log and returns once every connected subscriber has written it,
// so a client that stops reading blocks the runner: that is the
// backpressure. emit returns an error when the run must stop (it was
// cancelled, the frame is invalid or over the 1 MiB frame limit, the log
// failed); the runner should then return.
//
// The Server owns the run's end: it writes exactly one done frame after Run
// returns (status ok for nil, cancelled when the run's context was
// cancelled, else error, preceded by an error frame carrying
// abi.CodeOf(err)). A done frame passed to emit is dropped. An error frame
// passed to emit is kept; if it is the last frame emitted and has the
// returned error's code, the Server does not repeat it.
//
// A runner should emit a start frame first.
type Runner interface {
	Run(ctx context.Context, t Turn, emit func(abi.Event) error) error
}

// Turn is what a runner gets for one send.
type Turn struct {
	Session SessionKey
	Run     string          // run id allocated by the Server
	Input   json.RawMessage // the send's input, any JSON value
	Cwd     string          // the send's cwd, as the client gave it
	Peer    peer.Cred       // who sent it
	// History lists the earlier runs of this session that finished with
	// status ok, oldest first, rebuilt from the durable log (it survives
	// restarts). Runs that failed or were cancelled are left out: their
	// input never got a complete answer. It is an index: each run's input
	// and frames stay on disk until Load, so a long session costs the
	// runner only what it chooses to replay (a bounded window of the
	// newest runs, see core/model.HistoryStart), and the server keeps no
	// history in memory.
	History []PastRun
}

// PastRun is one completed earlier run of a Turn's History.
type PastRun struct {
	Run  string
	Size int64 // bytes of its input and of its message and tool_call frames
	load func() (Exchange, error)
}

// Load reads the run's input and frames from the session log. It may be
// called while the turn runs.
func (p PastRun) Load() (Exchange, error) {
	if p.load == nil {
		return Exchange{Run: p.Run}, nil
	}
	return p.load()
}

// Exchange is one completed earlier run: its input and the message and
// tool_call frames it produced, in order.
type Exchange struct {
	Run    string
	Input  json.RawMessage
	Events []abi.Event
}
