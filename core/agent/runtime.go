package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
)

// ServeRuntime is the agent runtime inside the sandbox (`ctx-agent
// runtime`, the seed's startup step 9): it says it is up on the control
// socket, then runs each turn whose connection the launcher passes it,
// until the launcher closes the control socket.
func ServeRuntime(ctx context.Context, control *os.File) error {
	sealRuntime()
	ctl, err := controlConn(control)
	if err != nil {
		return err
	}
	defer ctl.Close()
	if _, err := ctl.Write([]byte{'r'}); err != nil {
		return abi.Errorf(abi.EHOSTDOWN, "agent runtime: control: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ctl.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		f, err := recvFile(ctl)
		if err != nil {
			if errors.Is(err, errEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runTurn(ctx, newConn(f))
		}()
	}
}

// runTurn reads a turn's history and run frames, runs the loop and sends
// done.
func runTurn(ctx context.Context, c *conn) {
	defer c.close()
	var hist []model.Message
	var run frame
	for {
		f, err := c.recv()
		if err != nil {
			return
		}
		if f.T == "history" {
			hist = append(hist, f.Messages...)
			continue
		}
		if f.T != "run" || f.Config == nil {
			_ = c.send(frame{T: "done", Error: toFrameError(abi.Errorf(abi.EPROTO, "expected a run frame, got %q", f.T))})
			return
		}
		run = f
		break
	}
	a, err := run.Config.agent()
	if err != nil {
		_ = c.send(frame{T: "done", Error: toFrameError(err)})
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &rpcHost{c: c, history: hist, pending: map[int]*pendingCall{}}
	go h.readLoop(cancel)
	err = a.Run(ctx, RunOptions{Run: run.Run, Session: run.Session, Host: h, Input: run.Messages,
		Emit: func(e abi.Event) error { return c.send(frame{T: "frame", Event: &e}) }})
	_ = c.send(frame{T: "done", Error: toFrameError(err)})
}

// rpcHost is the Host of a run inside the sandbox: everything goes to the
// launcher over the turn's connection.
type rpcHost struct {
	c       *conn
	history []model.Message
	mu      sync.Mutex
	next    int
	pending map[int]*pendingCall
}

// pendingCall is a request waiting for the launcher's answer frames.
type pendingCall struct {
	ch   chan frame
	quit chan struct{} // closed when the caller stopped waiting
}

// readLoop delivers the launcher's answers to the waiting call; a cancel
// frame or a lost connection cancels the run.
func (h *rpcHost) readLoop(cancel func()) {
	defer cancel()
	for {
		f, err := h.c.recv()
		if err != nil {
			h.failAll()
			return
		}
		if f.T == "cancel" {
			cancel()
			continue
		}
		h.mu.Lock()
		p := h.pending[f.ID]
		h.mu.Unlock()
		if p != nil {
			select {
			case p.ch <- f:
			case <-p.quit:
			}
		}
	}
}

func (h *rpcHost) failAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, p := range h.pending {
		close(p.ch)
		delete(h.pending, id)
	}
}

func (h *rpcHost) call(f frame) (int, chan frame, error) {
	h.mu.Lock()
	h.next++
	id := h.next
	ch := make(chan frame, 16)
	h.pending[id] = &pendingCall{ch: ch, quit: make(chan struct{})}
	h.mu.Unlock()
	f.ID = id
	if err := h.c.send(f); err != nil {
		h.done(id)
		return 0, nil, err
	}
	return id, ch, nil
}

func (h *rpcHost) done(id int) {
	h.mu.Lock()
	if p := h.pending[id]; p != nil {
		close(p.quit)
		delete(h.pending, id)
	}
	h.mu.Unlock()
}

var errLauncherGone = abi.Errorf(abi.EHOSTDOWN, "the launcher went away during the run")

func (h *rpcHost) History() ([]model.Message, error) { return h.history, nil }

func (h *rpcHost) Model(ctx context.Context, id string, fresh []model.Message, tools []model.ToolSpec, emit func(abi.Event) error) error {
	rid, ch, err := h.call(frame{T: "model", Model: id, Messages: fresh, Tools: tools})
	if err != nil {
		return err
	}
	defer h.done(rid)
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				return errLauncherGone
			}
			switch f.T {
			case "model_event":
				if f.Event != nil {
					if err := emit(*f.Event); err != nil {
						return err
					}
				}
			case "model_done":
				return f.Error.err()
			}
		case <-ctx.Done():
			return abi.Errorf(abi.CodeOf(ctx.Err()), "model call: %w", ctx.Err())
		}
	}
}

func (h *rpcHost) Save(msgs []model.Message) error { return h.c.send(frame{T: "save", Messages: msgs}) }

func (h *rpcHost) Record(r Record) { _ = h.c.send(frame{T: "record", Record: &r}) }

func (h *rpcHost) AgentOp(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error) {
	rid, ch, err := h.call(frame{T: "op", Op: op, Args: args})
	if err != nil {
		return nil, err
	}
	defer h.done(rid)
	select {
	case f, ok := <-ch:
		if !ok {
			return nil, errLauncherGone
		}
		if f.Error != nil {
			return nil, f.Error.err()
		}
		return f.Result, nil
	case <-ctx.Done():
		return nil, abi.Errorf(abi.CodeOf(ctx.Err()), "agent.%s: %w", op, ctx.Err())
	}
}

// Approve asks the launcher, which holds the terminal (if any).
func (h *rpcHost) Approve(ctx context.Context, req ApprovalRequest) (bool, error) {
	args, err := json.Marshal(req)
	if err != nil {
		return false, abi.Errorf(abi.EINVAL, "approval request: %v", err)
	}
	rid, ch, err := h.call(frame{T: "approve", Args: args})
	if err != nil {
		return false, err
	}
	defer h.done(rid)
	select {
	case f, ok := <-ch:
		if !ok {
			return false, errLauncherGone
		}
		if f.Error != nil {
			return false, f.Error.err()
		}
		return string(f.Result) == "true", nil
	case <-ctx.Done():
		return false, abi.Errorf(abi.CodeOf(ctx.Err()), "approval of %s: %w", req.Tool, ctx.Err())
	}
}
