package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/jsonl"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// Handler serves one request from an authenticated peer.
type Handler func(ctx context.Context, from peer.Cred, op string, args json.RawMessage) (any, error)

// Server accepts connections on a Unix socket and serves requests from
// peers with the owner's uid only.
type Server struct {
	OwnerUID uint32
	Handler  Handler
	// OnRefuse is told about every refused peer (for the audit log).
	OnRefuse func(from peer.Cred, why error)
	// OnConn is called with +1 when a peer is accepted and -1 when it leaves.
	OnConn func(delta int)

	wg sync.WaitGroup
}

// Listen binds a Unix socket at path with mode 0600. The caller must hold
// the daemon lock: a leftover socket file is removed first.
func Listen(path string) (*net.UnixListener, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, abi.Errorf(abi.CodeOf(err), "ipc: cannot remove stale socket: %v", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "ipc: listen %s: %v", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, abi.Errorf(abi.EIO, "ipc: chmod socket: %v", err)
	}
	return ln, nil
}

// Serve accepts until ctx is done or ln fails, then waits for open
// connections to finish their current request.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	defer s.wg.Wait()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	w := &writer{c: c}
	send := func(r Response) error {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return w.write(r.ID, b, nil)
	}
	cred, err := peer.Of(c)
	if err == nil && cred.UID != s.OwnerUID {
		err = abi.Errorf(abi.EACCES, "cbth daemon serves uid %d only; peer is %s", s.OwnerUID, cred)
	}
	if err != nil {
		if s.OnRefuse != nil {
			s.OnRefuse(cred, err)
		}
		_ = send(errorResponse(0, err))
		return
	}
	if s.OnConn != nil {
		s.OnConn(1)
		defer s.OnConn(-1)
	}
	// On shutdown an idle connection stops waiting for its next request;
	// a request being served still gets its answer.
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	fr := newFDReader(c)
	defer fr.closeAll()
	r := jsonl.NewReader(fr)
	for {
		msg, err := readMessage(r, MaxRequest)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				_ = send(errorResponse(0, err))
			}
			return
		}
		req, err := DecodeRequest(msg)
		if err != nil {
			_ = send(errorResponse(req.ID, err))
			return
		}
		files, err := fr.take(req.Fds)
		if err != nil {
			_ = send(errorResponse(req.ID, err))
			return
		}
		resp := s.serve(ctx, cred, req, files)
		if send(resp) != nil {
			return
		}
	}
}

// serve runs the handler with the request's files in its context and
// closes them after.
func (s *Server) serve(ctx context.Context, cred peer.Cred, req Request, files []*os.File) Response {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	v, err := s.Handler(withFiles(ctx, files), cred, req.Op, req.Args)
	var resp Response
	if err == nil {
		resp, err = okResponse(req.ID, v)
	}
	if err != nil {
		resp = errorResponse(req.ID, err)
	}
	return resp
}

type filesKey struct{}

func withFiles(ctx context.Context, files []*os.File) context.Context {
	if len(files) == 0 {
		return ctx
	}
	return context.WithValue(ctx, filesKey{}, files)
}

// Files returns the descriptors that came with the request being served,
// in the order the client attached them. They are closed when the handler
// returns.
func Files(ctx context.Context) []*os.File {
	f, _ := ctx.Value(filesKey{}).([]*os.File)
	return f
}
