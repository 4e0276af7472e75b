package ipc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// serveHandler is serve with a handler of the test's own.
func serveHandler(t *testing.T, h Handler) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{OwnerUID: uint32(os.Getuid()), Handler: h}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

// Messages larger than one frame travel as parts, both ways.
func TestLargeMessagesInParts(t *testing.T) {
	path := serveHandler(t, func(ctx context.Context, _ peer.Cred, op string, args json.RawMessage) (any, error) {
		var in struct{ S string }
		json.Unmarshal(args, &in)
		return map[string]any{"len": len(in.S), "echo": strings.Repeat(in.S, 2)}, nil
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Multi-byte runes across part boundaries must survive byte for byte.
	s := strings.Repeat("ä<\"\\x", 700<<10)
	var out struct {
		Len  int
		Echo string
	}
	if err := c.Call(context.Background(), "big", map[string]string{"s": s}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Len != len(s) || out.Echo != s+s {
		t.Fatalf("round trip of %d bytes came back as %d/%d", len(s), out.Len, len(out.Echo))
	}
	huge := strings.Repeat("a", MaxRequest)
	if err := c.Call(context.Background(), "big", map[string]string{"s": huge}, nil); abi.CodeOf(err) != abi.EMSGSIZE {
		t.Fatalf("a request over MaxRequest: %v", err)
	}
	if err := c.Call(context.Background(), "big", map[string]string{"s": "still usable"}, &out); err != nil {
		t.Fatalf("after a refused request: %v", err)
	}
}

// A reply over MaxReply is EMSGSIZE with a hint, not a dropped connection.
func TestReplyTooLarge(t *testing.T) {
	path := serveHandler(t, func(context.Context, peer.Cred, string, json.RawMessage) (any, error) {
		return strings.Repeat("x", MaxReply), nil
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Call(context.Background(), "x", nil, nil)
	if abi.CodeOf(err) != abi.EMSGSIZE || !strings.Contains(err.Error(), "--limit") {
		t.Fatalf("oversize reply: %v", err)
	}
}

// Descriptors travel with the request and are closed after the handler.
func TestFilesPassed(t *testing.T) {
	var got []string
	path := serveHandler(t, func(ctx context.Context, _ peer.Cred, op string, _ json.RawMessage) (any, error) {
		got = got[:0]
		for _, f := range Files(ctx) {
			b, err := io.ReadAll(f)
			if err != nil {
				return nil, err
			}
			got = append(got, string(b))
		}
		return len(got), nil
	})
	dir := t.TempDir()
	var files []*os.File
	for _, s := range []string{"one", "two"} {
		p := filepath.Join(dir, s)
		os.WriteFile(p, []byte(s), 0o600)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var n int
	if err := c.CallFiles(context.Background(), "read", map[string]string{"pad": strings.Repeat("p", 2<<20)}, &n, files); err != nil {
		t.Fatal(err)
	}
	if n != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("daemon read %v", got)
	}
	// Without files the next request sees none.
	if err := c.Call(context.Background(), "read", nil, &n); err != nil || n != 0 {
		t.Fatalf("files leaked into the next request: %d %v", n, err)
	}
	if err := c.CallFiles(context.Background(), "read", nil, nil, make([]*os.File, MaxFds+1)); abi.CodeOf(err) != abi.EINVAL {
		t.Fatalf("too many files: %v", err)
	}
}

// A request announcing descriptors it did not send is EPROTO.
func TestMissingFilesRefused(t *testing.T) {
	path := serveHandler(t, func(context.Context, peer.Cred, string, json.RawMessage) (any, error) { return 1, nil })
	r := rawExchange(t, path, `{"v":2,"id":1,"op":"x","fds":1}`)
	if r.OK || r.Error.Code != abi.EPROTO {
		t.Fatalf("announced but absent descriptors: %+v", r)
	}
}

// A call without a context deadline still ends: ETIMEDOUT.
func TestCallDeadline(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	path := serveHandler(t, func(context.Context, peer.Cred, string, json.RawMessage) (any, error) {
		<-block
		return nil, nil
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 200 * time.Millisecond
	start := time.Now()
	if err := c.Call(context.Background(), "x", nil, nil); abi.CodeOf(err) != abi.ETIMEDOUT {
		t.Fatalf("blocked daemon: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("the deadline did not hold")
	}
}

// FuzzReadMessage checks readMessage never panics, never returns more than
// the limit, and joins well-formed parts back into the original bytes.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte(`{"v":2,"id":1,"op":"x"}` + "\n"))
	f.Add([]byte(`{"v":2,"id":1,"part":"eyJ2Ijo=","more":true}` + "\n" + `{"v":2,"id":1,"part":"Mn0="}` + "\n"))
	f.Add([]byte(`{"v":2,"id":1,"part":"YQ==","more":true}` + "\n" + `{"v":2,"id":2,"part":"YQ=="}` + "\n"))
	f.Add([]byte(`{"v":1,"id":1,"part":"YQ=="}` + "\n"))
	f.Add([]byte(`{"v":2,"id":1,"part":"YQ==","more":true}` + "\n" + `{"v":2}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := jsonl.NewReader(bytes.NewReader(data))
		for range 8 {
			msg, err := readMessage(r, 64)
			if err != nil {
				c := abi.CodeOf(err)
				if err == io.EOF || c == abi.EPROTO || c == abi.EMSGSIZE || c == abi.EINVAL {
					if err == io.EOF {
						return
					}
					continue
				}
				t.Fatalf("unexpected error %v", err)
			}
			if len(msg) > 64 {
				t.Fatalf("message of %d bytes over the limit", len(msg))
			}
		}
	})
}
