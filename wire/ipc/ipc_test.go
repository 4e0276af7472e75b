package ipc

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/peer"
)

func serve(t *testing.T, owner uint32) (string, *atomic.Int32) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipc") // short path: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	s := &Server{OwnerUID: owner, OnRefuse: func(peer.Cred, error) { refused.Add(1) },
		Handler: func(ctx context.Context, from peer.Cred, op string, args json.RawMessage) (any, error) {
			switch op {
			case "echo":
				var m map[string]any
				json.Unmarshal(args, &m)
				m["pid"] = from.PID
				return m, nil
			default:
				return nil, abi.Errorf(abi.ENOTSUP, "no op %s", op)
			}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return path, &refused
}

func TestRoundTripAndErrors(t *testing.T) {
	path, _ := serve(t, uint32(os.Getuid()))
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out map[string]any
	if err := c.Call(context.Background(), "echo", map[string]any{"a": 1}, &out); err != nil {
		t.Fatal(err)
	}
	if out["a"].(float64) != 1 || int(out["pid"].(float64)) != os.Getpid() {
		t.Errorf("echo = %v", out)
	}
	if err := c.Call(context.Background(), "nope", nil, nil); abi.CodeOf(err) != abi.ENOTSUP {
		t.Errorf("unknown op: %v", err)
	}
	if err := c.Call(context.Background(), "echo", map[string]any{}, &out); err != nil {
		t.Errorf("connection unusable after an error: %v", err)
	}
}

func rawExchange(t *testing.T, path, frame string) Response {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(frame + "\n"))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no response to %s: %v", frame, err)
	}
	var r Response
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOldClientGetsEPROTO(t *testing.T) {
	path, _ := serve(t, uint32(os.Getuid()))
	r := rawExchange(t, path, `{"v":0,"id":1,"op":"echo"}`)
	if r.OK || r.Error.Code != abi.EPROTO || !strings.Contains(r.Error.Message, "v0") || !strings.Contains(r.Error.Message, "v2") {
		t.Errorf("old client: %+v %+v", r, r.Error)
	}
	r = rawExchange(t, path, `{"id":1,"op":"echo"}`)
	if r.OK || r.Error.Code != abi.EPROTO {
		t.Errorf("no version: %+v", r)
	}
}

func TestOtherUIDRefused(t *testing.T) {
	path, refused := serve(t, uint32(os.Getuid())+1)
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Call(context.Background(), "echo", map[string]any{}, nil)
	if abi.CodeOf(err) != abi.EACCES || refused.Load() != 1 {
		t.Errorf("foreign uid: err %v refused %d", err, refused.Load())
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"v":2,"id":3,"op":"job.submit","args":{"x":1}}`))
	f.Add([]byte(`{"v":2,"op":"x","fds":5}`))
	f.Add([]byte(`{"v":1,"op":"A"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data)
		if err != nil {
			if abi.CodeOf(err) != abi.EPROTO {
				t.Fatalf("non-EPROTO: %v", err)
			}
			return
		}
		if r.V != Version || !validOp(r.Op) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
