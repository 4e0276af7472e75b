package objd

import (
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/sock"
)

// modelRunner runs one socket turn of a model: the session's history is
// replayed to the (stateless) driver through the "socket" route.
type modelRunner struct {
	obj tree.Object

	// The model as last read from its control files, and the trust stamp
	// of those files then: a turn whose trust check finds the same stamp
	// uses it instead of reading .d/ again (tree.TrustStamp says when a
	// stamp stands for the content).
	mu    sync.Mutex
	model *model.Model
	stamp string
}

func (r *modelRunner) Run(ctx context.Context, t sock.Turn, emit func(abi.Event) error) (err error) {
	start := time.Now()
	extra := ""
	defer func() {
		line := tree.LogLine{Time: start, Run: t.Run, UID: int(t.Peer.UID), Status: abi.StatusOK, Duration: time.Since(start),
			Extra: "session=" + t.Session.Name + " pid=" + strconv.Itoa(int(t.Peer.PID)) + " " + extra}
		if err != nil {
			line.Status, line.Code = abi.StatusError, string(abi.CodeOf(err))
			if line.Code == string(abi.ECANCELED) {
				line.Status = abi.StatusCancelled
			}
		}
		_ = r.obj.AppendLog(line)
	}()
	// Re-check trust and reopen per turn: edits of .d/default or .d/driver
	// apply at once, and so does a file that became writable by others.
	m, err := r.open()
	if err != nil {
		return err
	}
	// Replay only the newest earlier turns within the model's bounds,
	// read from the session log now: a turn costs the same at turn 10 and
	// turn 10 000, and the daemon holds no session's history.
	sizes := make([]int64, len(t.History))
	for i, h := range t.History {
		sizes[i] = h.Size
	}
	var history []model.PastTurn
	for _, h := range t.History[model.HistoryStart(sizes, m.HistoryTurns, m.HistoryBytes):] {
		x, err := h.Load()
		if err != nil {
			return err
		}
		history = append(history, model.PastTurn{Input: x.Input, Events: x.Events})
	}
	in, err := model.SessionInput(history, t.Input)
	if err != nil {
		return err
	}
	if err := emit(abi.StartEvent(t.Run, m.ID)); err != nil {
		return err
	}
	tried, err := m.Stream(ctx, abi.RouteSocket, m.Request(in), emit)
	extra = model.Attempts(tried)
	return err
}

// open checks trust and returns the model: the one read at an earlier turn
// when nothing that steers it changed since, else freshly read.
func (r *modelRunner) open() (*model.Model, error) {
	now := time.Now()
	stamp, err := tree.TrustStamp(r.obj, os.Geteuid(), now)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if stamp != "" && stamp == r.stamp {
		m := r.model
		r.mu.Unlock()
		return m, nil
	}
	r.mu.Unlock()
	m, err := model.Open(r.obj)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.model, r.stamp = m, stamp
	r.mu.Unlock()
	return m, nil
}
