// Package ctxmount is ctx-mount, the FUSE projection of a CortexFS tree:
// the whole tree as each caller may see it, or one agent's view.
package ctxmount

import (
	"context"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/fs"
)

// Name is the applet name.
const Name = "ctx-mount"

func init() {
	applets.Register(applets.Applet{Name: Name, Summary: "FUSE projection of /ctx and per-agent views (mount, -d, -u)", Run: run})
}

const synopsis = `ctx-mount [--root SRC] [--agent NAME] [--uid UID] [--sock-dir DIR] [-d [--pid-file FILE] [--log FILE]] MOUNTPOINT
       ctx-mount -u [--lazy] MOUNTPOINT`

const description = `
Mount a read-only projection of the CortexFS tree SRC (default $CTX_ROOT,
then /ctx) at MOUNTPOINT and serve it in the foreground until SIGTERM or
SIGINT (or -d: in the background, printing the server's pid and writing it
to the pid file). The tree is the object ABI unchanged: object files, .d/
control files, aliases (model/main stays a symlink), tiers. A socket entry
NAME.sock is a symlink to SOCK-DIR/<its path in the tree> (default SRC), so
connect(2) and ctx send through the mount reach the serving daemon.

Without --agent every caller sees the tree as the durable tree lets them:
each request is checked against the caller's uid, gid and groups, and the
kernel checks the mode bits too (default_permissions). With --agent NAME
(agent/NAME, else home/UID/agent/NAME, or a path) the mount is that agent's
view: tool/ holds exactly the tools on its CTX_PATH it may run, model/ the
models it may use, agent/ itself and the agents it may read, home/ its own
home, shared/ the spaces it may use. Changes of the durable tree show
within 100 ms. Every write is EROFS.

--uid UID admits only UID (and root), served uncached so that the kernel asks
the server, and its check, for every access. As root the mount is made with
mount(2) directly; as another user fusermount3 must be in PATH.

ctx-mount -u MOUNTPOINT unmounts (also a mount whose server died); a mount
in use is EBUSY unless --lazy detaches it.`

func run(ctx context.Context, env *applets.Env, args []string) (err error) {
	takeReadyPipe()
	defer func() { childDone(err) }()
	fset := cli.FlagSet(env, Name, synopsis, description)
	root := fset.String("root", "", "CortexFS root to project (default $CTX_ROOT, then /ctx)")
	agentName := fset.String("agent", "", "mount this agent's view instead of the whole tree")
	uid := fset.Int("uid", -1, "admit only this uid (and root); with --agent NAME, also where home/UID/agent/NAME is looked for")
	sockDir := fset.String("sock-dir", "", "directory socket entries point into (default: the root)")
	daemon := fset.Bool("d", false, "serve in the background; print the server's pid")
	pidFile := fset.String("pid-file", "", "with -d: where the server's pid is written (default: a runtime directory)")
	logFile := fset.String("log", "", "with -d: append the server's diagnostics to this file")
	unmount := fset.Bool("u", false, "unmount MOUNTPOINT")
	lazy := fset.Bool("lazy", false, "with -u: detach a mount that is in use")
	debug := fset.Bool("debug", false, "log every FUSE request")
	pos, err := cli.ParseN(fset, args, 1)
	if err != nil {
		return err
	}
	mp := pos[0]
	if *unmount {
		return fs.Unmount(mp, *lazy)
	}
	src := tree.DefaultRoot()
	if *root != "" {
		src = *root
	}
	if src, err = filepath.Abs(src); err != nil {
		return cli.Usagef("--root: %v", err)
	}
	o := fs.Options{Source: src, SockDir: *sockDir, Debug: *debug}
	if *uid >= 0 {
		u := uint32(*uid)
		o.UID = &u
	}
	if *agentName != "" {
		if o.Agent, err = agentPath(src, *agentName, *uid); err != nil {
			return err
		}
	}
	if *daemon && !isChild() {
		return background(env, args, mp, *pidFile, *logFile)
	}
	return serve(ctx, env, o, mp)
}

// agentPath finds --agent NAME: a path is used as is; a name is the system
// agent/NAME, else home/UID/agent/NAME (UID: --uid, else the caller's).
func agentPath(root, name string, uid int) (string, error) {
	if strings.Contains(name, "/") {
		return filepath.Abs(name)
	}
	if err := abi.ValidName(name); err != nil {
		return "", err
	}
	sys := filepath.Join(root, tree.AgentDir, name)
	if _, err := os.Lstat(sys); err == nil {
		return sys, nil
	}
	if uid < 0 {
		uid = os.Getuid()
	}
	home := filepath.Join(root, tree.HomeDir, strconv.Itoa(uid), tree.AgentDir, name)
	if _, err := os.Lstat(home); err == nil {
		return home, nil
	}
	return "", abi.Errorf(abi.ENOENT, "agent %s: neither %s nor %s exists", name, sys, home)
}

// serve mounts and serves until the mount goes away or a signal asks to
// stop: SIGTERM and SIGINT unmount (detaching a mount still in use, so no
// dead mount is left behind) and return.
func serve(ctx context.Context, env *applets.Env, o fs.Options, mp string) error {
	logger := log.New(env.Stderr, Name+": ", log.LstdFlags|log.LUTC)
	o.Logf = logger.Printf
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	srv, err := fs.Mount(mp, o)
	if err != nil {
		return err
	}
	ready()
	what := "tree " + o.Source
	if o.Agent != "" {
		what = "agent view " + o.Agent
	}
	logger.Printf("serving %s at %s", what, mp)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		logger.Printf("%s was unmounted", mp)
		return nil
	case <-ctx.Done():
	case s := <-sigs:
		logger.Printf("%v: unmounting %s", s, mp)
	}
	if err := srv.Unmount(false); err != nil {
		if abi.CodeOf(err) != abi.EBUSY {
			return err
		}
		logger.Printf("%s is in use: detaching it", mp)
		if err := srv.Unmount(true); err != nil {
			return err
		}
		return nil // the remaining users see ENOTCONN once we exit
	}
	<-done
	return nil
}
