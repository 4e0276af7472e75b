package ctx

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/agent"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/objd"
	"github.com/cortexfs/cortexfs/core/toolsrc"
	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/fs"
	"github.com/cortexfs/cortexfs/wire/sock"
)

func init() {
	commands["doctor"] = command{"check runner, modes, control files, daemon, sockets ctx-mount mounts and tool sources", runDoctor}
	commands["status"] = command{"summary: objects per class, daemon and sockets", runStatus}
}

// socketChecks pings the .sock of every model that declares one.
func socketChecks(ctx context.Context, r tree.Root) []tree.Check {
	objs, err := objd.SocketModels(r, os.Getuid())
	if err != nil {
		return []tree.Check{{Check: "socket", Detail: err.Error()}}
	}
	var out []tree.Check
	for _, o := range objs {
		c := tree.Check{Check: "socket", Path: o.Sock(), OK: true, Detail: "answers ping"}
		if err := ping(ctx, o.Sock()); err != nil {
			c.OK = false
			c.Detail = fmt.Sprintf("%s: %v (is cortexfsd running?)", abi.CodeOf(err), err)
		}
		out = append(out, c)
	}
	return out
}

// mountChecks reports every ctx-mount projection of root in this mount
// namespace; one whose server died (ENOTCONN) or hangs fails with the
// command that clears it. Projections of other trees are theirs to check.
func mountChecks(root tree.Root) []tree.Check {
	ms, err := fs.Mounts(2 * time.Second)
	if err != nil {
		return []tree.Check{{Check: "mount", Detail: err.Error()}}
	}
	want := canonicalPath(string(root))
	var out []tree.Check
	for _, m := range ms {
		if canonicalPath(m.Source) != want {
			continue
		}
		c := tree.Check{Check: "mount", Path: m.Mountpoint, OK: m.State == fs.StateAlive, Detail: "serving " + m.Source}
		if !c.OK {
			c.Detail = fmt.Sprintf("%s: %s; clear it with: ctx-mount -u %s (add --lazy if a process still uses it)",
				m.State, m.Detail, shellQuote(m.Mountpoint))
		} else if m.Detail != "" {
			c.Detail += " (" + m.Detail + ")"
		}
		out = append(out, c)
	}
	return out
}

// sandboxChecks says, for every agent the caller can see, whether
// ctx-agent run by the caller could build its sandbox, and if not why,
// and whether the models and tools it names exist.
func sandboxChecks(r tree.Root) []tree.Check {
	entries, err := tree.List(r, os.Getuid())
	if err != nil {
		return []tree.Check{{Check: "agent-sandbox", Detail: err.Error()}}
	}
	var out []tree.Check
	for _, e := range entries {
		if e.Class != abi.ClassAgent {
			continue
		}
		rep, err := agent.Inspect(e.Path, os.Geteuid(), os.Getegid())
		c := tree.Check{Check: "agent-sandbox", Path: e.Path, OK: true}
		switch {
		case err != nil:
			c.OK, c.Detail = false, fmt.Sprintf("%s: %v", abi.CodeOf(err), err)
		case rep.Err != nil:
			c.OK, c.Detail = false, fmt.Sprintf("cannot start: %s: %v", abi.CodeOf(rep.Err), rep.Err)
		default:
			sb := rep.Sandbox
			network := "no"
			if sb.Network {
				network = "yes"
			}
			c.Detail = fmt.Sprintf("profile=%s userns=%v uid=%d network=%s mounts=%d", sb.Profile, sb.UserNS, sb.UID, network, len(sb.Mounts))
		}
		out = append(out, c)
		if rep != nil && rep.Agent != nil {
			refs := tree.Check{Check: "agent-refs", Path: e.Path, OK: true, Detail: "models and tools exist"}
			if err := rep.Agent.MissingRefs(); err != nil {
				refs.OK, refs.Detail = false, fmt.Sprintf("%s: %v", abi.CodeOf(err), err)
			}
			out = append(out, refs)
		}
	}
	return out
}

func canonicalPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// shellQuote quotes a path for a command line a user copies.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func ping(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := sock.Dial(ctx, path)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Send(sock.Request{Op: "ping"}); err != nil {
		return err
	}
	e, err := c.Next()
	if err != nil {
		return err
	}
	if e.Type != abi.EvPong {
		return abi.Errorf(abi.EPROTO, "answered %q to ping", e.Type)
	}
	return nil
}

func runDoctor(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx doctor", "ctx doctor [--root DIR] [--verbose] [--json]",
		`Inspect the tree and its daemon without changing anything: objects, modes,
runners, control files, agents (sandbox, models and tools they name), model
sockets, and the tool sources of the system tier and of your own
(configuration trusted and parsed, sources up, no clashes, a cortexfsd
serving them). It prints the failures and a summary; --verbose prints every
check. Exit 1 when a check fails.`)
	c := commonFlags(fs)
	verbose := fs.Bool("verbose", false, "print every check, not only the failures")
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	checks, err := tree.Doctor(c.Root(), os.Getuid(), func(o tree.Object) error { _, err := model.Open(o); return err })
	if err != nil {
		return out.Fail(err)
	}
	checks = append(checks, socketChecks(ctx, c.Root())...)
	checks = append(checks, mountChecks(c.Root())...)
	checks = append(checks, sandboxChecks(c.Root())...)
	checks = append(checks, toolsrc.Doctor(ctx, c.Root(), os.Getuid())...)
	failed := 0
	for _, ch := range checks {
		if !ch.OK {
			failed++
		}
	}
	err = out.Result(map[string]any{"ok": failed == 0, "root": c.Root(), "failed": failed, "checks": checks}, func(w io.Writer) {
		for _, ch := range checks {
			mark := "ok  "
			if !ch.OK {
				mark = "FAIL"
			} else if !*verbose {
				continue
			}
			fmt.Fprintf(w, "%s %-20s %s %s\n", mark, ch.Check, ch.Path, ch.Detail)
		}
		more := ""
		if !*verbose && failed < len(checks) {
			more = " (--verbose lists the passing ones)"
		}
		fmt.Fprintf(w, "%d checks, %d failed%s\n", len(checks), failed, more)
	})
	if err == nil && failed > 0 {
		return &cli.ExitStatus{Code: abi.ExitError}
	}
	return err
}

func runStatus(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx status", "ctx status [--root DIR] [--json]", "Summarize the tree: objects per class and tier, sockets, daemon.")
	c := commonFlags(fs)
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	entries, err := tree.List(c.Root(), os.Getuid())
	if err != nil {
		return out.Fail(err)
	}
	agent.CheckEntries(entries)
	counts := map[string]int{}
	broken := 0
	for _, e := range entries {
		if e.Error != "" {
			broken++
			continue
		}
		counts[string(e.Class)]++
	}
	socks := socketChecks(ctx, c.Root())
	live := 0
	for _, s := range socks {
		if s.OK {
			live++
		}
	}
	daemon := "not running"
	if live > 0 {
		daemon = "running"
	} else if len(socks) == 0 {
		daemon = "not needed (no socket models)"
	}
	return out.Result(map[string]any{"root": c.Root(), "objects": counts, "broken": broken,
		"sockets": map[string]int{"declared": len(socks), "live": live}, "daemon": daemon}, func(w io.Writer) {
		fmt.Fprintf(w, "root     %s\nmodels   %d\ntools    %d\nagents   %d\nbroken   %d\nsockets  %d declared, %d live\ndaemon   %s\n",
			c.Root(), counts["model"], counts["tool"], counts["agent"], broken, len(socks), live, daemon)
	})
}
