package ctx

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/wire/jsonl"
	"github.com/cortexfs/cortexfs/wire/sock"
)

func init() {
	commands["send"] = command{"send one turn to an object's socket and stream the reply", runSend}
}

func runSend(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx send", "ctx send [--session NAME] [--temp] [--id ID] [--text] [--root DIR] OBJECT[.sock] [TEXT…]",
		`Send one turn to OBJECT.sock and stream the run's frames as JSONL until
its done frame. OBJECT is a path, or a name in the tree (model/main,
agent/coder, home/UID/model/…): a name starting with model/, tool/, agent/,
home/ or shared/ is looked up under the root first, then in the current
directory. Without TEXT the input is stdin (text, or a JSON object that
is sent as is). The first Ctrl-C sends cancel; a second one exits. Exit
status follows the run: 0 ok, 1 cancelled, else the error frame's code.`)
	session := fs.String("session", "default", "session name")
	temp := fs.Bool("temp", false, "temporary session: cancelled when this client disconnects")
	id := fs.String("id", "", "client message id (a retry with the same id never starts a second run)")
	text := fs.Bool("text", false, "print for humans instead of JSONL")
	rootDir := fs.String("root", "", "CortexFS root `DIR` of tree-relative names (default $CTX_ROOT, then /ctx)")
	pos, err := cli.ParseN(fs, args, -1)
	if err != nil {
		return err
	}
	input, err := sendInput(env, pos[1:])
	if err != nil {
		return err
	}
	// OBJECT may be named by its socket entry (MOUNT/model/p/m.sock): the
	// object is what the entry belongs to.
	obj, err := common{root: rootDir}.Root().ResolveName(strings.TrimSuffix(pos[0], abi.SockSuffix))
	if err != nil {
		return err
	}
	if *id == "" {
		*id = ids.New("m")
	}
	c, err := sock.Dial(ctx, obj.Sock())
	if abi.CodeOf(err) == abi.ENOENT {
		// No socket file: a declared socket whose daemon is down is
		// ECONNREFUSED; an object without one is ENOENT.
		if s, _ := obj.CtlString("session"); s == "socket" {
			return abi.Errorf(abi.ECONNREFUSED, "%s declares a socket but nothing serves it (is cortexfsd running?)", obj.Called)
		}
		return abi.Errorf(abi.ENOENT, "%s has no socket entry (.d/session is not socket)", obj.Called)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	cwd, _ := os.Getwd()
	if err := c.Send(sock.Request{Op: "send", ID: *id, Session: *session, Cwd: cwd, Input: input, Temp: *temp}); err != nil {
		return abi.Errorf(abi.EHOSTDOWN, "send failed: %v", err)
	}
	w := jsonl.NewWriter(env.Stdout)
	emit := func(e abi.Event) error { return w.Encode(e) }
	if *text || cli.IsTTY(env.Stdout) {
		emit = (&cli.TextRenderer{Out: env.Stdout, Err: env.Stderr}).Emit
	}
	return stream(c, env, emit)
}

// stream copies frames until the run's done, cancelling on the first SIGINT.
func stream(c *sock.Client, env *applets.Env, emit func(abi.Event) error) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var current atomic.Value // the run id, once its start frame arrived
	go func() {
		n := 0
		for range sigs {
			n++
			if r, _ := current.Load().(string); n == 1 && r != "" {
				fmt.Fprintln(env.Stderr, "ctx send: cancelling (press Ctrl-C again to exit)")
				_ = c.Send(sock.Request{Op: "cancel", ID: r})
				continue
			}
			c.Close()
			os.Exit(130)
		}
	}()
	var lastErr abi.Code
	var run string
	for {
		e, err := c.Next()
		if err != nil {
			return abi.Errorf(abi.EHOSTDOWN, "connection lost before the run finished: %v", err)
		}
		if e.Type == abi.EvError && e.Run == "" {
			emit(e)
			return &cli.Reported{Err: abi.Errorf(e.Code, "%s", e.Message)}
		}
		if run == "" && e.Run != "" {
			run = e.Run
			current.Store(run)
		}
		if err := emit(e); err != nil {
			return err
		}
		switch {
		case e.Type == abi.EvError:
			lastErr = e.Code
		case e.Type == abi.EvDone && e.Run == run:
			switch e.Status {
			case abi.StatusOK:
				return nil
			case abi.StatusCancelled:
				return &cli.Reported{Err: abi.Errorf(abi.ECANCELED, "run cancelled")}
			default:
				if lastErr == "" {
					lastErr = abi.EIO
				}
				return &cli.Reported{Err: abi.Errorf(lastErr, "run failed")}
			}
		}
	}
}

// sendInput is TEXT joined, else stdin: a JSON object as is, text as a
// JSON string.
func sendInput(env *applets.Env, words []string) (json.RawMessage, error) {
	text := strings.Join(words, " ")
	if len(words) == 0 {
		b, err := readAllBounded(env)
		if err != nil {
			return nil, err
		}
		t := strings.TrimSpace(string(b))
		if strings.HasPrefix(t, "{") {
			if !json.Valid([]byte(t)) {
				return nil, abi.Errorf(abi.EINVAL, "stdin is not valid JSON")
			}
			return json.RawMessage(t), nil
		}
		text = strings.TrimRight(string(b), "\r\n")
	}
	b, _ := json.Marshal(text)
	return b, nil
}

func readAllBounded(env *applets.Env) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 32<<10)
	for {
		n, err := env.Stdin.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if len(buf) > jsonl.MaxFrame {
			return nil, abi.Errorf(abi.EMSGSIZE, "input larger than one frame (%d bytes)", jsonl.MaxFrame)
		}
		if err != nil {
			return buf, nil
		}
	}
}
