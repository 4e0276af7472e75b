package objrunner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/runner"
	"github.com/cortexfs/cortexfs/core/tree"
)

// replQuit and replNew are the REPL's own commands; any other line is a
// turn.
const (
	replQuit = "/quit"
	replNew  = "/new"
)

// repl is a bare model on a terminal (model-abi allows a simple REPL): a
// conversation kept in memory, each line a one-shot run whose input is
// every earlier turn plus the new line, like the agent REPL's session but
// with nothing on disk (durable sessions are the .sock's job). A turn that
// fails is not kept, so it can be typed again.
func repl(ctx context.Context, env *applets.Env, obj tree.Object, text bool) error {
	fmt.Fprintf(env.Stderr, "model %s: a conversation kept until you leave (%s starts over); Ctrl-D or %s leaves\n",
		obj.Name, replNew, replQuit)
	in := bufio.NewScanner(env.Stdin)
	in.Buffer(make([]byte, 0, 64<<10), runner.MaxInput)
	var history []model.Message
	for {
		fmt.Fprint(env.Stderr, obj.Name+"> ")
		if !in.Scan() {
			fmt.Fprintln(env.Stderr)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case replQuit, "/exit":
			return nil
		case replNew:
			history = nil
			fmt.Fprintln(env.Stderr, "(new conversation)")
			continue
		}
		turn := append(history, model.Message{Role: "user", Content: line})
		input, err := json.Marshal(model.Input{Messages: turn})
		if err != nil {
			return abi.Errorf(abi.EIO, "cannot encode the conversation: %v", err)
		}
		reply := &replyText{emit: emitter(env, text).emit}
		err = runner.Exec{Object: obj, Stdin: bytes.NewReader(input), Emit: reply.collect, Cwd: cwd()}.Run(ctx)
		switch {
		case abi.CodeOf(err) == abi.ECANCELED:
			return nil
		case err == nil:
			history = append(turn, model.Message{Role: "assistant", Content: reply.text()})
		}
	}
}

// replyText passes a run's frames on and keeps the assistant's answer: its
// message, else its deltas (a message too large for one frame is skipped).
type replyText struct {
	emit    func(abi.Event) error
	deltas  strings.Builder
	message string
	has     bool
}

func (r *replyText) collect(e abi.Event) error {
	switch {
	case e.Type == abi.EvDelta:
		r.deltas.WriteString(e.Text)
	case e.Type == abi.EvMessage && e.Role == "assistant":
		r.message, r.has = e.MessageText(), true
	}
	return r.emit(e)
}

func (r *replyText) text() string {
	if r.has {
		return r.message
	}
	return r.deltas.String()
}
