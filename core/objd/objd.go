// Package objd is the heart of cortexfsd: it serves <object>.sock for every
// model whose .d/session is "socket", keeping each user's sessions on disk.
package objd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/sockstore"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/wire/sock"
)

// Daemon serves the sockets of one CortexFS root.
type Daemon struct {
	Root tree.Root
	Logf func(format string, args ...any)
	// Limits bound each peer uid on every socket (zero fields: the
	// defaults of sock.DefaultLimits). One account of session bytes per
	// uid is shared by all sockets, measured at first use from
	// home/<uid>/session, so a uid's quota covers all its sessions.
	Limits sock.Limits
}

// SocketModels returns every model object (aliases excluded) of the system
// tier and of home/<uid> whose .d/session says socket. Other users' home
// tiers are never included: their models are theirs to serve.
func SocketModels(r tree.Root, uid int) ([]tree.Object, error) {
	tiers := []string{string(r), r.Home(uid)}
	var out []tree.Object
	for _, tier := range tiers {
		providers, err := os.ReadDir(filepath.Join(tier, tree.ModelDir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, p := range providers {
			if !p.IsDir() || abi.ValidName(p.Name()) != nil {
				continue
			}
			entries, _ := os.ReadDir(filepath.Join(tier, tree.ModelDir, p.Name()))
			for _, e := range entries {
				if e.Type()&fs.ModeSymlink != 0 || !e.Type().IsRegular() || abi.ValidName(e.Name()) != nil {
					continue
				}
				o, err := tree.Resolve(filepath.Join(tier, tree.ModelDir, p.Name(), e.Name()))
				if err != nil {
					continue
				}
				if s, _ := o.CtlString("session"); s == model.SessionSocket {
					out = append(out, o)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Run listens on every socket model's .sock and serves until ctx is done,
// then removes its socket files. Another live daemon on any of the sockets
// is EBUSY; a stale socket file (nobody listening) is replaced; a non-socket
// file in the way is EEXIST and is never deleted.
func (d *Daemon) Run(ctx context.Context) error {
	// The configured root is the administrator's choice: resolve it once,
	// so a symlinked /ctx works; nothing beneath it is ever followed.
	real, err := filepath.EvalSymlinks(string(d.Root))
	if err != nil {
		return abi.Errorf(abi.CodeOf(err), "root %s: %w", d.Root, err)
	}
	d.Root = tree.Root(real)
	all, err := SocketModels(d.Root, os.Geteuid())
	if err != nil {
		return err
	}
	var objs []tree.Object
	for _, o := range all {
		if err := tree.Trusted(o, os.Geteuid()); err != nil {
			d.logf("not serving %s: %v", o.Name, err)
			continue
		}
		objs = append(objs, o)
	}
	var lns []*net.UnixListener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for _, o := range objs {
		ln, err := sock.Listen(o.Sock(), 0o666) // system models are for every user; sessions are per peer uid
		if err != nil {
			closeAll()
			return err
		}
		lns = append(lns, ln)
		d.logf("serving %s for %s", o.Sock(), o.Name)
	}
	if len(objs) == 0 {
		d.logf("no model declares session=socket under %s; waiting for SIGTERM", d.Root)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(objs))
	usage := sock.NewUsage(d.measure)
	for i, o := range objs {
		srv := &sock.Server{Runner: &modelRunner{obj: o}, Store: d.store(o), Logf: d.Logf, Limits: d.Limits, Usage: usage}
		wg.Add(1)
		go func(ln *net.UnixListener) {
			defer wg.Done()
			if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("serve %s: %w", ln.Addr(), err)
			}
		}(lns[i])
	}
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	closeAll()
	wg.Wait()
	for _, o := range objs {
		_ = sock.Unlink(o.Sock())
	}
	return err
}

func (d *Daemon) store(o tree.Object) sock.Store {
	return sockstore.DirStore{Root: string(d.Root), Dir: func(k sockstore.SessionKey) string {
		return d.Root.ModelSessionDir(k.UID, o.Name, k.Name)
	}}
}

// measure is what uid's sessions already hold on disk: every file under
// home/<uid>/session, walked by descriptor.
func (d *Daemon) measure(uid uint32) (int64, error) {
	root, err := safefs.OpenRoot(string(d.Root))
	if err != nil {
		return 0, err
	}
	defer root.Close()
	return sockstore.DirBytes(root, filepath.Join(tree.HomeDir, strconv.FormatUint(uint64(uid), 10), "session"), 8)
}

func (d *Daemon) logf(format string, args ...any) {
	if d.Logf != nil {
		d.Logf(format, args...)
	}
}
