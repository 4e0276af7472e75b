package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cortexfs/cortexfs/applets"
)

// Cmd is one node of an applet's command table: a group of subcommands, a
// command, or a command with subcommands of its own (cbth doctor [cli]).
// Help, "did you mean", global flags and shell completion all come from
// this one table.
type Cmd struct {
	Name    string
	Summary string // one line: group listings and completion descriptions
	Run     func(ctx context.Context, env *applets.Env, args []string) error
	Subs    []*Cmd
	Hidden  bool     // internal: dispatched, never listed or completed
	Doc     string   // a group's help: text after its command list
	Flags   []string // flags of a command that parses its own arguments (no FlagSet to collect them from)

	// Globals (the applet's root only) are flags every command takes that
	// users also type before the command word (cbth --home DIR job list):
	// they are moved behind the command word.
	Globals []Global
}

// Global is a flag accepted before the command word.
type Global struct {
	Name  string // without dashes
	Value bool   // takes a value (--home DIR)
}

var (
	tablesMu sync.Mutex
	tables   = map[string]func() *Cmd{}
)

// Register makes root the command table of the applet root.Name and
// registers the applet, which dispatches through it.
func Register(root *Cmd) {
	RegisterTable(root)
	applets.Register(applets.Applet{Name: root.Name, Summary: root.Summary, Run: root.Main})
}

// RegisterTable records root as the command table of an applet that
// registers itself (and dispatches through root.Main in its own Run).
func RegisterTable(root *Cmd) { RegisterTableFunc(root.Name, func() *Cmd { return root }) }

// RegisterTableFunc records the command table of applet name, built when
// first asked for (after every init of the applet's package has added its
// commands).
func RegisterTableFunc(name string, table func() *Cmd) {
	tablesMu.Lock()
	defer tablesMu.Unlock()
	if _, dup := tables[name]; dup {
		panic("cli: duplicate command table " + name)
	}
	tables[name] = table
}

// Tables returns every registered command table, sorted by applet name.
func Tables() []*Cmd {
	tablesMu.Lock()
	fns := make([]func() *Cmd, 0, len(tables))
	for _, f := range tables {
		fns = append(fns, f)
	}
	tablesMu.Unlock()
	out := make([]*Cmd, 0, len(fns))
	for _, f := range fns {
		out = append(out, f())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Sub returns the subcommand called name (hidden ones included).
func (c *Cmd) Sub(name string) *Cmd {
	for _, s := range c.Subs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Add appends subcommands (packages that add a group at init time).
func (c *Cmd) Add(subs ...*Cmd) { c.Subs = append(c.Subs, subs...) }

// Main runs the applet: global flags typed before the command word are
// taken, then the command is looked up along the table.
func (c *Cmd) Main(ctx context.Context, env *applets.Env, args []string) error {
	globals, rest, err := c.takeGlobals(args)
	if err != nil {
		return Output{Env: env, JSON: WantsJSON(args)}.Fail(err)
	}
	return c.dispatch(ctx, env, []string{c.Name}, rest, globals)
}

// takeGlobals splits the leading global flags off args.
func (c *Cmd) takeGlobals(args []string) (globals, rest []string, err error) {
	for len(args) > 0 {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !strings.HasPrefix(args[0], "-") || args[0] == "--" {
			break
		}
		i := slices.IndexFunc(c.Globals, func(g Global) bool { return g.Name == name })
		if i < 0 {
			break
		}
		n := 1
		if c.Globals[i].Value && !hasValue {
			if len(args) < 2 {
				return nil, nil, Usagef("flag --%s needs a value (see %s --help)", name, c.Name)
			}
			n = 2
		}
		globals, args = append(globals, args[:n]...), args[n:]
	}
	return globals, args, nil
}

// withGlobals puts the global flags back among a command's own, before a
// "--" (after which everything is positional).
func withGlobals(args, globals []string) []string {
	if len(globals) == 0 {
		return args
	}
	i := slices.Index(args, "--")
	if i < 0 {
		i = len(args)
	}
	out := append(append(append([]string{}, args[:i]...), globals...), args[i:]...)
	return out
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

func (c *Cmd) dispatch(ctx context.Context, env *applets.Env, path, args, globals []string) error {
	if len(c.Subs) > 0 && len(args) > 0 {
		a := args[0]
		if s := c.Sub(a); s != nil {
			return s.dispatch(ctx, env, append(path, a), args[1:], globals)
		}
		if c.Run == nil && a == "help" {
			return c.help(ctx, env, path, args[1:], globals)
		}
		if c.Run == nil && isHelp(a) {
			c.WriteHelp(env.Stdout, path)
			return nil
		}
		if !strings.HasPrefix(a, "-") {
			return Output{Env: env, JSON: WantsJSON(args) || WantsJSON(globals)}.Fail(c.unknown(path, a))
		}
	}
	if c.Run != nil {
		return c.Run(ctx, env, withGlobals(args, globals))
	}
	// A group without a command: its help, on stdout, exit 0; a flag
	// that is not --help here cannot belong to any command yet.
	if len(args) > 0 && !WantsJSON(args) {
		return Output{Env: env}.Fail(Usagef("%s needs a command before %s (see %s --help)",
			strings.Join(path, " "), args[0], strings.Join(path, " ")))
	}
	c.WriteHelp(env.Stdout, path)
	return nil
}

// unknown is the error for a command word that is not in the table, with
// the closest one suggested.
func (c *Cmd) unknown(path []string, word string) error {
	var names []string
	for _, s := range c.Subs {
		if !s.Hidden {
			names = append(names, s.Name)
		}
	}
	where := strings.Join(path, " ")
	if m := Suggest(word, names); m != "" {
		return Usagef("unknown command %q (did you mean %s %s?)", word, where, m)
	}
	return Usagef("unknown command %q (see %s --help)", word, where)
}

// help is "APPLET help [COMMAND…]": a group's listing or a command's
// --help.
func (c *Cmd) help(ctx context.Context, env *applets.Env, path, words, globals []string) error {
	cur := c
	for _, w := range words {
		s := cur.Sub(w)
		if s == nil || s.Hidden {
			return Output{Env: env}.Fail(cur.unknown(path, w))
		}
		cur, path = s, append(path, w)
	}
	if cur.Run != nil {
		return cur.Run(ctx, env, []string{"--help"})
	}
	cur.WriteHelp(env.Stdout, path)
	return nil
}

// WriteHelp prints a group's help: usage, summary, one line per command.
func (c *Cmd) WriteHelp(w io.Writer, path []string) {
	where := strings.Join(path, " ")
	if len(path) == 1 {
		fmt.Fprintf(w, "usage: %s COMMAND [SUBCOMMAND…] [FLAGS] [ARG…]\n", where)
	} else {
		fmt.Fprintf(w, "usage: %s COMMAND [FLAGS] [ARG…]\n", where)
	}
	if c.Summary != "" {
		fmt.Fprintf(w, "\n%s\n", c.Summary)
	}
	fmt.Fprintf(w, "\ncommands:\n")
	width := 8
	for _, s := range c.Subs {
		if !s.Hidden {
			width = max(width, len(s.Name))
		}
	}
	for _, s := range c.Subs {
		if s.Hidden {
			continue
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.Name, s.listing())
	}
	if d := strings.TrimSpace(c.Doc); d != "" {
		fmt.Fprintf(w, "\n%s\n", d)
	}
	fmt.Fprintf(w, "\n'%s help COMMAND' or '%s COMMAND --help' shows a command's flags.\n", path[0], where)
}

// listing is the one-line summary of a command in its group's help; a
// group names its commands.
func (c *Cmd) listing() string {
	var subs []string
	for _, s := range c.Subs {
		if !s.Hidden {
			subs = append(subs, s.Name)
		}
	}
	switch {
	case len(subs) == 0:
		return c.Summary
	case len(subs) > 6:
		subs = append(subs[:5], "…")
	}
	return fmt.Sprintf("%s: %s", c.Summary, strings.Join(subs, ", "))
}
