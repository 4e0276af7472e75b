package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Model is a model object with its control files read.
type Model struct {
	Object   tree.Object
	ID       string // stable identity provider/model
	NativeID string // .d/id
	Routes   abi.Routes
	Caps     []abi.Capability
	Defaults map[string]string
	Session  string // none | socket
	// HistoryTurns and HistoryBytes bound what a socket turn replays of
	// its session (history_turns, history_bytes in .d/default).
	HistoryTurns int
	HistoryBytes int64
}

// Session values of .d/session.
const (
	SessionNone   = "none"
	SessionSocket = "socket"
)

// Open reads a model object's control files; any malformed one is EINVAL.
func Open(o tree.Object) (*Model, error) {
	if o.Class != abi.ClassModel {
		return nil, abi.Errorf(abi.EINVAL, "%s is a %s, not a model", o.Called, o.Class)
	}
	m := &Model{Object: o, ID: o.Name}
	ctl := o.OpenCtl() // one walk to .d/ for the five reads
	defer ctl.Close()
	var err error
	if m.NativeID, err = ctl.String("id"); err != nil {
		return nil, err
	}
	driver, err := ctl.Read("driver")
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "model %s: .d/driver: %v", m.ID, err)
	}
	if m.Routes, err = abi.ParseRoutes(driver); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "model %s: .d/driver: %v", m.ID, err)
	}
	// .d/cap and .d/default may be missing; any other failure to read
	// them is the run's failure. A .d/default that names a private
	// endpoint and cannot be read must never fall back to the driver's
	// public default with the key (issue 15, defect 3).
	if b, err := optionalCtl(ctl, "cap"); err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "model %s: .d/cap: %w", m.ID, err)
	} else if m.Caps, err = abi.ParseCaps(b); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "model %s: .d/cap: %v", m.ID, err)
	}
	b, err := optionalCtl(ctl, "default")
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "model %s: .d/default: %w", m.ID, err)
	}
	if m.Defaults, err = abi.KVMap(b); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "model %s: .d/default: %v", m.ID, err)
	}
	if m.HistoryTurns, m.HistoryBytes, err = historyBounds(m.Defaults); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "model %s: .d/default: %v", m.ID, err)
	}
	if m.Session, err = ctl.String("session"); err != nil {
		return nil, err
	}
	switch m.Session {
	case "":
		m.Session = SessionNone
	case SessionNone, SessionSocket:
	default:
		return nil, abi.Errorf(abi.EINVAL, "model %s: .d/session must be none or socket, not %q", m.ID, m.Session)
	}
	return m, nil
}

// optionalCtl reads a control file that may be absent (nil, nil).
func optionalCtl(ctl *tree.Ctl, file string) ([]byte, error) {
	b, err := ctl.Read(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// Request builds the canonical request: .d/default parameters, overridden
// per call by the input's params.
func (m *Model) Request(in Input) Request {
	params := make(map[string]string, len(m.Defaults)+len(in.Params))
	for k, v := range m.Defaults {
		params[k] = v
	}
	for k, v := range in.Params {
		switch x := v.(type) {
		case string:
			params[k] = x
		default:
			b, _ := json.Marshal(x)
			params[k] = string(b)
		}
	}
	return Request{Model: m.ID, NativeID: m.NativeID, Messages: in.Messages, Tools: in.Tools, Params: params}
}

// Stream runs one request for a use case (exec, socket, agent) through the
// route table. It returns the drivers tried, for the object's log.
func (m *Model) Stream(ctx context.Context, uc abi.UseCase, req Request, emit func(abi.Event) error) ([]Attempt, error) {
	route, err := m.Routes.Select(uc)
	if err != nil {
		return nil, err
	}
	return stream(ctx, Config{Object: m.Object, Defaults: m.Defaults}, route, req, emit)
}

// intParam reads an integer parameter with bounds; bad values are EINVAL.
func intParam(p map[string]string, key string, def, min, max int) (int, error) {
	v, ok := p[key]
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	var n int
	if _, err := fmt.Sscan(strings.TrimSpace(v), &n); err != nil || n < min || n > max {
		return 0, abi.Errorf(abi.EINVAL, "parameter %s=%q: want an integer in [%d,%d]", key, v, min, max)
	}
	return n, nil
}
