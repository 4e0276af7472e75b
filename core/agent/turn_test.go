package agent

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
)

// fakeRuntime stands in for the runtime inside a sandbox: it takes the
// turn's connection from the control socket and plays script against the
// launcher's Turn, which must treat it as hostile.
func fakeRuntime(t testing.TB, script func(c *conn)) *Runtime {
	t.Helper()
	ours, theirs, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := controlConn(ours)
	if err != nil {
		t.Fatal(err)
	}
	rctl, err := controlConn(theirs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close(); rctl.Close() })
	go func() {
		f, err := recvFile(rctl)
		if err != nil {
			return
		}
		c := newConn(f)
		defer c.close()
		for {
			fr, err := c.recv()
			if err != nil || fr.T == "run" {
				break
			}
		}
		script(c)
	}()
	return &Runtime{control: ctl, sandbox: &Sandbox{}}
}

func turnAgent(t testing.TB) (*Agent, *Session) {
	t.Helper()
	a, _ := newAgent(t, "fs.read")
	sess, err := a.OpenSession(os.Getuid(), "", "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return a, sess
}

// A runtime may have the launcher emit body frames only (stamped with the
// run), never start, error or done frames of its own.
func TestTurnRefusesFramesARuntimeMayNotSend(t *testing.T) {
	a, sess := turnAgent(t)
	rt := fakeRuntime(t, func(c *conn) {
		c.send(frame{T: "frame", Event: &abi.Event{Type: abi.EvDelta, Run: "forged", Text: "hi"}})
		c.send(frame{T: "frame", Event: &abi.Event{Type: abi.EvDone, Status: "ok"}})
		c.send(frame{T: "done"})
	})
	var got []abi.Event
	err := rt.Turn(context.Background(), a, sess, "r1", []model.Message{{Role: "user", Content: "x"}}, func(e abi.Event) error {
		got = append(got, e)
		return nil
	})
	if abi.CodeOf(err) != abi.EPROTO {
		t.Fatalf("Turn = %v, want EPROTO for a done frame from the runtime", err)
	}
	if len(got) != 1 || got[0].Type != abi.EvDelta || got[0].Run != "r1" {
		t.Errorf("emitted %+v, want one delta stamped with run r1", got)
	}
}

// The model broker checks the agent's policy itself: a runtime asking for
// a model its policy does not allow gets EACCES, and nothing is called.
func TestTurnBrokerChecksModelPolicy(t *testing.T) {
	a, sess := turnAgent(t)
	answer := make(chan frame, 1)
	rt := fakeRuntime(t, func(c *conn) {
		c.send(frame{T: "model", ID: 1, Model: "other/model", Messages: []model.Message{{Role: "user", Content: "x"}}})
		for {
			f, err := c.recv()
			if err != nil {
				return
			}
			if f.T == "model_done" {
				answer <- f
				break
			}
		}
		c.send(frame{T: "done"})
	})
	if err := rt.Turn(context.Background(), a, sess, "r1", nil, func(abi.Event) error { return nil }); err != nil {
		t.Fatalf("Turn = %v", err)
	}
	f := <-answer
	if f.Error == nil || f.Error.Code != abi.EACCES || !strings.Contains(f.Error.Message, "other/model") {
		t.Errorf("model_done %+v, want EACCES naming other/model", f.Error)
	}
}

// An agent.* request of the runtime is checked by the launcher against the
// agent's real policy: without allow <type> agent:<name> create, EACCES.
func TestTurnAgentOpsAreCheckedOutside(t *testing.T) {
	a, sess := turnAgent(t)
	answer := make(chan frame, 1)
	rt := fakeRuntime(t, func(c *conn) {
		args, _ := json.Marshal(CreateRequest{Name: "kid"})
		c.send(frame{T: "op", ID: 1, Op: "create", Args: args})
		for {
			f, err := c.recv()
			if err != nil {
				return
			}
			if f.T == "op_result" {
				answer <- f
				break
			}
		}
		c.send(frame{T: "done"})
	})
	if err := rt.Turn(context.Background(), a, sess, "r1", nil, func(abi.Event) error { return nil }); err != nil {
		t.Fatalf("Turn = %v", err)
	}
	if f := <-answer; f.Error == nil || f.Error.Code != abi.EACCES {
		t.Errorf("op_result %+v, want EACCES", f.Error)
	}
	if Exists(a.Root, "kid") {
		t.Errorf("the child was created")
	}
}

// A runtime that goes away mid-turn is EIO, never a hang.
func TestTurnRuntimeGone(t *testing.T) {
	a, sess := turnAgent(t)
	rt := fakeRuntime(t, func(c *conn) {})
	if err := rt.Turn(context.Background(), a, sess, "r1", nil, func(abi.Event) error { return nil }); abi.CodeOf(err) != abi.EIO {
		t.Fatalf("Turn = %v, want EIO", err)
	}
}

// Whatever bytes a runtime sends, the launcher's side of the turn returns
// (no panic, no hang) once the runtime closes its end.
func FuzzTurnFromRuntime(f *testing.F) {
	f.Add([]byte(`{"t":"frame","event":{"type":"delta","text":"x"}}` + "\n" + `{"t":"done"}` + "\n"))
	f.Add([]byte(`{"t":"record","record":{"type":"tool.call","object":"tool/x","status":"ok"}}` + "\n" + `{"t":"save","messages":[{"role":"assistant","content":"a"}]}` + "\n"))
	f.Add([]byte(`{"t":"model","id":3,"model":"debug/echo","messages":[{"role":"user","content":"hi"}]}` + "\n" + `{"t":"done","error":{"code":"EWHAT","message":"m"}}` + "\n"))
	f.Add([]byte(`{"t":"op","id":1,"op":"stop","args":{"name":"x"}}` + "\n" + `{"t":"nope"}` + "\n"))
	f.Add([]byte("{\"t\":\"frame\"}\nnot json\n\x00\xff"))
	a, sess := turnAgent(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		rt := fakeRuntime(t, func(c *conn) { c.f.Write(b) })
		_ = rt.Turn(context.Background(), a, sess, "r1", nil, func(abi.Event) error { return nil })
	})
}
