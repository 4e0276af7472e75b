package toolsrc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/ids"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/ipc"
	"github.com/cortexfs/cortexfs/wire/jsonl"
	"github.com/cortexfs/cortexfs/wire/peer"
)

// The tier socket speaks wire/ipc's frames (versioned JSONL, one request
// per connection here): ops "ping", "sources", "refresh" and "call". A
// call's connection closing early cancels the call.

// CallArgs are the args of op "call".
type CallArgs struct {
	Run        string          `json:"run,omitempty"` // the caller's run id, logged when it is a plain id
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input"`
	Invocation Invocation      `json:"invocation"`
	DryRun     bool            `json:"dry_run,omitempty"`
	TimeoutMS  int64           `json:"timeout_ms,omitempty"`
}

// listenTier binds <tier>/.tools.sock. The name is bound through the
// tier directory's descriptor (/proc/self/fd/N/.tools.sock), so a swapped
// path cannot move the socket elsewhere; a stale socket (nobody answers)
// is removed with unlinkat, anything else in the way is EEXIST and left
// alone, a live one is EBUSY. A home tier's socket is given to its owner
// (fchownat on an O_PATH descriptor of the very socket, after checking it
// is one), so only the owner (and root) can connect.
func listenTier(ref TierRef, owner Owner) (*net.UnixListener, error) {
	d, _, err := openTier(ref)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	at := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), SocketName)
	if st, err := d.Lstat(SocketName); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, abi.Errorf(abi.EEXIST, "%s exists and is not a socket; refusing to replace it", ref.Socket())
		}
		if c, err := net.DialTimeout("unix", at, time.Second); err == nil {
			c.Close()
			return nil, abi.Errorf(abi.EBUSY, "%s is served by another daemon", ref.Socket())
		}
		if err := unix.Unlinkat(d.Fd(), SocketName, 0); err != nil {
			return nil, abi.Errorf(abi.CodeOf(err), "remove stale %s: %v", ref.Socket(), err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: at, Net: "unix"})
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "listen on %s: %v", ref.Socket(), err)
	}
	ln.SetUnlinkOnClose(false)
	fd, err := unix.Openat(d.Fd(), SocketName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		var st unix.Stat_t
		if err = unix.Fstat(fd, &st); err == nil && (st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Nlink != 1) {
			err = abi.Errorf(abi.EACCES, "%s changed under us", ref.Socket())
		}
		if err == nil && os.Geteuid() == 0 && !ref.System {
			err = unix.Fchownat(fd, "", owner.UID, owner.GID, unix.AT_EMPTY_PATH)
		}
		if err == nil {
			// The kernel checks write permission on connect: 0666 lets
			// every user reach the system tier (calls are checked per
			// peer); a home tier's socket belongs to its owner.
			mode := uint32(0o666)
			if !ref.System {
				mode = 0o600
			}
			err = unix.Fchmodat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), mode, 0)
		}
		unix.Close(fd)
	}
	if err != nil {
		ln.Close()
		_ = unix.Unlinkat(d.Fd(), SocketName, 0)
		return nil, abi.Errorf(abi.CodeOf(err), "prepare %s: %v", ref.Socket(), err)
	}
	return ln, nil
}

// removeSocket unlinks the tier's socket at shutdown.
func removeSocket(ref TierRef) {
	if d, _, err := openTier(ref); err == nil {
		_ = unix.Unlinkat(d.Fd(), SocketName, 0)
		d.Close()
	}
}

// serve accepts connections until ctx ends.
func (t *Tier) serve(ctx context.Context, ln *net.UnixListener, owner Owner) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.logf("%s: accept: %v", t.Ref.Name(), err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go t.serveConn(ctx, c, owner)
	}
}

func (t *Tier) serveConn(ctx context.Context, c *net.UnixConn, owner Owner) {
	defer c.Close()
	w := jsonl.NewWriter(c)
	reply := func(id uint64, v any, err error) {
		resp := ipc.Response{V: ipc.Version, ID: id, OK: err == nil}
		if err == nil {
			resp.Result, err = json.Marshal(v)
		}
		if err != nil {
			resp.OK, resp.Result = false, nil
			resp.Error = &ipc.ErrorBody{Code: abi.CodeOf(err), Message: err.Error()}
		}
		_ = w.Encode(resp)
	}
	cred, err := peer.Of(c)
	if err != nil {
		reply(0, nil, err)
		return
	}
	if !t.Ref.System && int(cred.UID) != owner.UID && cred.UID != 0 {
		reply(0, nil, abi.Errorf(abi.EACCES, "%s serves its owner (uid %d) only; peer is %s", t.Ref.Name(), owner.UID, cred))
		return
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	frame, err := jsonl.NewReader(c).ReadFrame()
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	req, err := ipc.DecodeRequest(frame)
	if err != nil {
		reply(0, nil, err)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the client hanging up cancels what it asked for
		_, _ = io.Copy(io.Discard, c)
		cancel()
	}()
	switch req.Op {
	case "ping":
		reply(req.ID, map[string]any{"tier": t.Ref.Name()}, nil)
	case "sources":
		reply(req.ID, t.Report(), nil)
	case "refresh":
		if int(cred.UID) != owner.UID && cred.UID != 0 {
			reply(req.ID, nil, abi.Errorf(abi.EACCES, "only the owner of %s (uid %d) or root may refresh it", t.Ref.Name(), owner.UID))
			return
		}
		err := t.Refresh(ctx, true)
		reply(req.ID, t.Report(), err)
	case "call":
		var a CallArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			reply(req.ID, nil, abi.Errorf(abi.EINVAL, "call: %v", err))
			return
		}
		res, err := t.serveCall(ctx, c, cred, a)
		reply(req.ID, res, err)
	default:
		reply(req.ID, nil, abi.Errorf(abi.EINVAL, "unknown op %q", req.Op))
	}
}

// serveCall authorizes and runs one call, and logs it in the tool's
// .d/log (facts only: who, status, code, duration; never arguments).
func (t *Tier) serveCall(ctx context.Context, c *net.UnixConn, cred peer.Cred, a CallArgs) (res Result, err error) {
	start := time.Now()
	run := ids.New("r")
	if abi.ValidName(a.Run) == nil && len(a.Run) <= 40 {
		run = a.Run
	}
	var p *projected
	defer func() {
		if abi.ValidName(a.Tool) == nil {
			extra := "pid=" + strconv.Itoa(int(cred.PID))
			if p != nil {
				extra += " source=" + p.Source.key()
			}
			if a.DryRun {
				extra += " dry_run=true"
			}
			t.logCall(a.Tool, tree.LogLine{Time: start, Run: run, UID: int(cred.UID), Duration: time.Since(start), Extra: extra}, res, err)
		}
	}()
	if err := abi.ValidName(a.Tool); err != nil {
		return Result{}, err
	}
	if err := t.mayExecute(cred, c, a.Tool); err != nil {
		return Result{}, err
	}
	if p, err = t.lookup(a.Tool); err != nil {
		return Result{}, err
	}
	inv := a.Invocation
	// The seed's actor is the canonical identity a plugin may rely on.
	// Only root's claim is taken as sent (a root launcher relaying its
	// agent's call names the agent); anyone else is who its peer
	// credentials say, whatever it claims, and its source is one of the
	// values our own callers send. session_id stays the caller's word.
	if inv.Actor == nil || cred.UID != 0 {
		actor := "uid:" + strconv.Itoa(int(cred.UID))
		inv.Actor = &actor
	}
	if cred.UID != 0 && inv.Source != nil && *inv.Source != "exec" && *inv.Source != "agent" {
		source := "exec"
		inv.Source = &source
	}
	if inv.ExecutionScope == "" {
		inv.ExecutionScope = "foreground"
	}
	res, _, err = t.Call(ctx, a.Tool, CallRequest{Input: a.Input, Invocation: inv, DryRun: a.DryRun},
		time.Duration(a.TimeoutMS)*time.Millisecond)
	return res, err
}

// mayExecute applies the Linux execute bit of the projected object for the
// peer (its uid, gid and supplementary groups as the kernel recorded
// them), as exec(2) would have for the runner: a client that dials the
// socket directly gets no more than one that runs the file.
func (t *Tier) mayExecute(cred peer.Cred, c *net.UnixConn, name string) error {
	d, _, err := openTier(t.Ref)
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := d.Lstat(path.Join(tree.ToolDir, name))
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), "tool %s: %v", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return abi.Errorf(abi.EACCES, "tool %s is not a regular file", name)
	}
	who := policy.Cred{UID: cred.UID, GID: cred.GID}
	if policy.NeedsGroups(st.Mode & 0o7777) {
		who.Groups, _ = peer.Groups(c) // unreadable groups grant nothing
	}
	if !who.Permits(st.Mode&0o7777, st.Uid, st.Gid, false, policy.MayExec) {
		return abi.Errorf(abi.EACCES, "tool %s: not executable by uid %d", name, cred.UID)
	}
	return nil
}

// logCall appends one line to the tool's .d/log, fd-relative.
func (t *Tier) logCall(name string, l tree.LogLine, res Result, err error) {
	l.Status = abi.StatusOK
	switch {
	case err != nil:
		l.Status, l.Code = abi.StatusError, string(abi.CodeOf(err))
		if l.Code == string(abi.ECANCELED) {
			l.Status = abi.StatusCancelled
		}
	case res.IsError:
		l.Status, l.Code = abi.StatusError, string(abi.EREMOTEIO)
	}
	d, _, oerr := openTier(t.Ref)
	if oerr != nil {
		return
	}
	defer d.Close()
	f, oerr := d.OpenFile(path.Join(tree.ToolDir, name+abi.CtlSuffix, "log"), os.O_RDWR|os.O_APPEND, 0)
	if oerr != nil {
		return
	}
	defer f.Close()
	_ = tree.AppendLogFile(f, l)
}
