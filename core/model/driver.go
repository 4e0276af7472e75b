package model

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Driver adapts one provider API format to the canonical stream. Stream
// emits body frames only — delta, reasoning_delta, reasoning_message,
// message, tool_call, usage — never start, error or done: those belong to
// whoever owns the run. A driver that finds its endpoint does not speak its
// format returns ENOTSUP before emitting anything, and the next driver of
// the route is tried.
type Driver interface {
	Stream(ctx context.Context, req Request, emit func(abi.Event) error) error
}

// Config is what a driver is built from: the model object and its defaults.
type Config struct {
	Object   tree.Object
	Defaults map[string]string
}

// Factory builds a driver for one model.
type Factory func(cfg Config) (Driver, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// RegisterDriver adds a driver by adapter name; duplicates panic.
func RegisterDriver(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if err := abi.ValidDriverName(name); err != nil {
		panic(err)
	}
	if _, dup := factories[name]; dup {
		panic("model: duplicate driver " + name)
	}
	factories[name] = f
}

// Drivers lists the registered adapter names.
func Drivers() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func lookupDriver(name string) (Factory, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := factories[name]
	return f, ok
}

// Attempt records one driver tried for a run, for .d/log.
type Attempt struct {
	Driver string
	Code   abi.Code // "" when it served the run
}

// Attempts formats the route choice for a log line: "driver=a(ENOTSUP),b".
func Attempts(as []Attempt) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Driver
		if a.Code != "" {
			parts[i] += "(" + string(a.Code) + ")"
		}
	}
	return "driver=" + strings.Join(parts, ",")
}

// stream runs req through the route's priority list, falling back to the
// next driver only while nothing has been emitted and the driver is unknown
// to this binary or answered ENOTSUP.
func stream(ctx context.Context, cfg Config, route []string, req Request, emit func(abi.Event) error) ([]Attempt, error) {
	var tried []Attempt
	var reasons []string
	for _, name := range route {
		f, ok := lookupDriver(name)
		if !ok {
			tried = append(tried, Attempt{name, abi.ENOTSUP})
			reasons = append(reasons, name+": unknown driver")
			continue
		}
		d, err := f(cfg)
		if err != nil {
			tried = append(tried, Attempt{name, abi.CodeOf(err)})
			return tried, err
		}
		emitted := false
		err = d.Stream(ctx, req, func(e abi.Event) error {
			emitted = true
			return emit(e)
		})
		if err != nil && abi.CodeOf(err) == abi.ENOTSUP && !emitted {
			tried = append(tried, Attempt{name, abi.ENOTSUP})
			reasons = append(reasons, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		tried = append(tried, Attempt{name, abi.CodeOf(err)})
		return tried, err
	}
	return tried, abi.Errorf(abi.ENOTSUP, "no usable driver in route [%s]: %s", strings.Join(route, ","), strings.Join(reasons, "; "))
}
