package objrunner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
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
// fails or is cancelled is not kept, so it can be typed again. It owns
// SIGINT, SIGTERM and SIGHUP: Ctrl-C during a turn cancels that turn and
// the prompt comes back; Ctrl-C at the prompt, Ctrl-D or /quit leave;
// SIGTERM and SIGHUP (a closed terminal) cancel the turn and leave.
func repl(ctx context.Context, env *applets.Env, obj tree.Object, text bool) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	fmt.Fprintf(env.Stderr, "model %s: a conversation kept until you leave (%s starts over); Ctrl-D or %s leaves, Ctrl-C cancels a turn\n",
		obj.Name, replNew, replQuit)
	lines, readErr := readLines(env.Stdin)
	var history []model.Message
	for {
		fmt.Fprint(env.Stderr, obj.Name+"> ")
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(env.Stderr)
				return <-readErr
			}
			line = strings.TrimSpace(l)
		case s := <-sigs:
			fmt.Fprintln(env.Stderr)
			if s == os.Interrupt {
				return nil // Ctrl-C at the prompt leaves, like Ctrl-D
			}
			return abi.Errorf(abi.ECANCELED, "model %s: REPL ended by %v", obj.Name, s)
		}
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
		answer, quit, err := replTurn(ctx, env, obj, text, turn, sigs)
		switch {
		case quit:
			return abi.Errorf(abi.ECANCELED, "model %s: REPL left during a turn", obj.Name)
		case abi.CodeOf(err) == abi.ECANCELED:
			fmt.Fprintln(env.Stderr, "(turn cancelled)")
		case err == nil:
			history = append(turn, model.Message{Role: "assistant", Content: answer})
		}
	}
}

// replTurn runs one turn with the conversation so far and returns the
// assistant's answer. A signal cancels the run; a second Ctrl-C, SIGTERM
// or SIGHUP also reports quit. A run that does not stop within stopGrace
// ends the process, as the watchdog of a one-shot run does.
func replTurn(ctx context.Context, env *applets.Env, obj tree.Object, text bool, turn []model.Message, sigs <-chan os.Signal) (answer string, quit bool, err error) {
	input, err := json.Marshal(model.Input{Messages: turn})
	if err != nil {
		return "", false, abi.Errorf(abi.EIO, "cannot encode the conversation: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reply := &replyText{emit: emitter(env, text).emit}
	done := make(chan error, 1)
	go func() {
		done <- runner.Exec{Object: obj, Stdin: bytes.NewReader(input), Emit: reply.collect, Cwd: cwd()}.Run(ctx)
	}()
	var grace <-chan time.Time
	interrupts := 0
	for {
		select {
		case err := <-done:
			return reply.text(), quit, err
		case s := <-sigs:
			if grace == nil {
				fmt.Fprintln(env.Stderr)
				grace = time.After(stopGrace)
			}
			cancel()
			if s == os.Interrupt {
				interrupts++
			}
			quit = quit || s != os.Interrupt || interrupts > 1
		case <-grace:
			fmt.Fprintln(env.Stderr, cli.HumanError(Name, abi.Errorf(abi.ECANCELED, "the turn did not stop within %v, exiting", stopGrace)))
			os.Exit(abi.ECANCELED.Exit())
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

// readLines delivers the lines of in on a channel (closed at EOF, then the
// read error on the other), so the prompt can wait for a line or a signal.
func readLines(in io.Reader) (<-chan string, <-chan error) {
	lines, errc := make(chan string), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), runner.MaxInput)
		for sc.Scan() {
			lines <- sc.Text()
		}
		errc <- sc.Err()
		close(lines)
	}()
	return lines, errc
}
