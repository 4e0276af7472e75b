package cbth

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
)

func daemonRun(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "daemon run", "cbth daemon run [--home DIR]",
		`Run the daemon in the foreground (commands start it on demand, detached).
Before serving it takes the single-instance lock and runs the overdue sweep.`)
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	return c.out().Fail(daemon.RunForeground(ctx, h, applets.CurrentVersion(), env.Stderr))
}

func daemonEnsure(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "daemon ensure", "cbth daemon ensure [--home DIR] [--json]",
		"Start the daemon unless it runs, then print its status.")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var s daemon.Status
	if err := daemon.Call(ctx, h, daemon.OpStatus, nil, &s); err != nil {
		return c.out().Fail(err)
	}
	s.ClientVersion = applets.CurrentVersion()
	return c.out().Result(s, func(w io.Writer) { printStatus(w, &s) })
}

func printStatus(w io.Writer, s *daemon.Status) {
	if !s.Running {
		fmt.Fprintf(w, "cbth daemon: not running (home %s)\n", s.Home)
		return
	}
	printKV(w, "cbth daemon", "running", "pid", s.PID, "version", s.Version, "client_version", s.ClientVersion,
		"started_at", s.StartedAt, "home", s.Home,
		"socket", s.Socket, "protocol", s.Protocol, "active_jobs", s.ActiveJobs, "active_clients", s.ActiveClients,
		"running_tasks", s.RunningTasks, "idle_timeout_seconds", s.IdleTimeout, "store_commits", s.StoreCommits,
		"store_writes", s.StoreWrites)
}

func daemonStatus(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "daemon status", "cbth daemon status [--home DIR] [--json]",
		"Print the daemon's status without starting it (running=false when it is down).")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	s, err := daemon.StatusOf(ctx, h, applets.CurrentVersion())
	if err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(s, func(w io.Writer) { printStatus(w, s) })
}

func daemonPing(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "daemon ping", "cbth daemon ping [--home DIR] [--json]",
		"Round-trip one request to the daemon, starting it if needed.")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var r map[string]any
	if err := daemon.Call(ctx, h, daemon.OpPing, nil, &r); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(r, func(w io.Writer) { fmt.Fprintf(w, "pong from pid %v\n", r["pid"]) })
}

func daemonStop(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "daemon stop", "cbth daemon stop [--home DIR] [--json]",
		"Ask the daemon to exit and wait for it; a daemon that is not running is fine.")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	r, err := daemon.Stop(ctx, h)
	if err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(r, func(w io.Writer) {
		if r.WasRunning {
			fmt.Fprintf(w, "stopped daemon pid %d\n", r.PID)
		} else {
			fmt.Fprintln(w, "no daemon was running")
		}
	})
}

// configKey is one row of cbth daemon config.
type configKey struct {
	Section string `json:"section"`
	Key     string `json:"key"`
	Value   string `json:"value"`
	Default string `json:"default"`
	Set     bool   `json:"set"`
	Unit    string `json:"unit"`
	Doc     string `json:"doc"`
}

func daemonConfig(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "daemon config", "cbth daemon config [--sample] [--home DIR] [--json]",
		`Check $CBTH_HOME/config.ini and show every key it may hold: the effective
value, the default and what it means. An unknown key or a bad value is
EINVAL naming its line (the daemon refuses to start on it too). The daemon
writes a commented sample (every key at its default) on first start;
--sample prints it.`)
	sample := c.fs.Bool("sample", false, "print a commented config.ini holding every key at its default")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	if *sample {
		_, err := env.Stdout.Write(config.Sample())
		return err
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		return c.out().Fail(err)
	}
	def := config.Default()
	rows := []configKey{}
	for _, k := range config.Keys {
		v, d := k.Value(cfg), k.Value(def)
		rows = append(rows, configKey{Section: k.Section, Key: k.Name, Value: v, Default: d, Set: v != d, Unit: k.Unit(), Doc: k.Doc})
	}
	_, statErr := os.Stat(h.Config())
	return c.out().Result(map[string]any{"path": h.Config(), "exists": statErr == nil, "keys": rows}, func(w io.Writer) {
		fmt.Fprintf(w, "# %s", h.Config())
		if statErr != nil {
			fmt.Fprint(w, " (absent: every key at its default)")
		}
		fmt.Fprintln(w)
		section := ""
		for _, r := range rows {
			if r.Section != section {
				section = r.Section
				fmt.Fprintf(w, "[%s]\n", section)
			}
			mark := " "
			if r.Set {
				mark = "*"
			}
			fmt.Fprintf(w, "%s %-36s = %-12s %s (%s)\n", mark, r.Key, orDash(r.Value), r.Doc, r.Unit)
		}
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
