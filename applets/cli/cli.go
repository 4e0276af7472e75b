// Package cli holds what every applet shares: command tables (help,
// did-you-mean, global flags, shell completion), flag sets that print
// --help, human or JSON output in one envelope, and the mapping of errors
// to stable codes on output.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/core/abi"
)

// Reported wraps an error that was already shown to the user (as a JSON
// error object or a stderr line); main only turns it into an exit code.
type Reported struct{ Err error }

func (r *Reported) Error() string { return r.Err.Error() }
func (r *Reported) Unwrap() error { return r.Err }

// ErrHelp is returned after --help was printed; it exits 0.
var ErrHelp = errors.New("help requested")

// Usagef is a usage error: EINVAL, exit 2.
func Usagef(format string, args ...any) error { return abi.Errorf(abi.EINVAL, format, args...) }

// flagMeta is what a flag set knows beyond the flag package: the full
// command ("cbth job submit"), its help text and its required flags.
type flagMeta struct {
	env         *applets.Env
	command     string
	synopsis    string
	description string
	required    []string
}

var metas sync.Map // *flag.FlagSet -> *flagMeta

func metaOf(fs *flag.FlagSet) *flagMeta {
	if m, ok := metas.Load(fs); ok {
		return m.(*flagMeta)
	}
	return &flagMeta{command: fs.Name()}
}

// FullCommand is name as the user types it: the applet name, then the
// command words ("job submit" under cbth is "cbth job submit").
func FullCommand(env *applets.Env, name string) string {
	if env == nil || env.Name == "" || name == env.Name || strings.HasPrefix(name, env.Name+" ") {
		return name
	}
	return env.Name + " " + name
}

// FlagSet returns a flag set whose usage text is the command's synopsis and
// description followed by its flags (spelled --flag), written to
// env.Stdout on --help.
func FlagSet(env *applets.Env, name, synopsis, description string) *flag.FlagSet {
	full := FullCommand(env, name)
	fs := flag.NewFlagSet(full, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	m := &flagMeta{env: env, command: full, synopsis: synopsis, description: description}
	metas.Store(fs, m)
	fs.Usage = func() {
		if env.Describe != nil {
			env.Describe(synopsis, fs)
			return
		}
		writeUsage(env.Stdout, fs, m)
	}
	return fs
}

// MarkRequired declares flags the command cannot run without: Parse
// reports every missing one at once, and --help marks them.
func MarkRequired(fs *flag.FlagSet, names ...string) {
	m := metaOf(fs)
	for _, n := range names {
		if fs.Lookup(n) == nil {
			panic("cli: MarkRequired of undefined flag --" + n)
		}
		m.required = append(m.required, n)
	}
}

// Hint is the "see … --help" suffix of a usage error.
func Hint(fs *flag.FlagSet) string { return "see " + metaOf(fs).command + " --help" }

// Parse parses args with flags and positional arguments interleaved
// (`cbth job query ID --json`); everything after "--" is positional as is.
// --help prints usage and returns ErrHelp; a bad flag is a usage error,
// and so is any required flag left out (all of them named at once).
func Parse(fs *flag.FlagSet, args []string) (positional []string, err error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	// flag calls Usage on every parse error; only --help should print it.
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return nil, ErrHelp
		}
		if err != nil {
			honourJSON(fs, args)
			return nil, Usagef("%s (%s)", flagError(fs, err), Hint(fs))
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	if err := missingRequired(fs); err != nil {
		return nil, err
	}
	return append(positional, tail...), nil
}

func missingRequired(fs *flag.FlagSet) error { return Require(fs, metaOf(fs).required...) }

// Require reports every flag of names that was not given, at once: for
// flags required only in one mode of a command (job submit without
// --from-jsonl), checked after Parse.
func Require(fs *flag.FlagSet, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var missing []string
	for _, n := range names {
		if !set[n] {
			missing = append(missing, "--"+n)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return Usagef("missing required flag %s (%s)", missing[0], Hint(fs))
	}
	return Usagef("missing required flags %s (%s)", strings.Join(missing, ", "), Hint(fs))
}

// flagError rewrites the flag package's messages the way users type flags
// (--name) and suggests the flag that was probably meant.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		s := "unknown flag --" + name
		if m := Suggest(name, names); m != "" {
			s += " (did you mean --" + m + "?)"
		}
		return s
	}
	for _, p := range []string{"flag needs an argument: -", "for flag -", "for -", "invalid boolean flag "} {
		if i := strings.Index(msg, p); i >= 0 && !strings.HasPrefix(msg[i+len(p):], "-") {
			msg = msg[:i] + strings.TrimSuffix(p, "-") + "--" + strings.TrimPrefix(msg[i+len(p):], "-")
			break
		}
	}
	return msg
}

// honourJSON sets a defined --json flag that appears after a bad flag, so
// the usage error itself comes out as JSON when the caller asked for JSON.
func honourJSON(fs *flag.FlagSet, args []string) {
	if fs.Lookup("json") == nil {
		return
	}
	if WantsJSON(args) {
		_ = fs.Set("json", "true")
	}
}

// WantsJSON reports whether args ask for JSON output anywhere before "--".
func WantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

// ParseN is Parse followed by NArgs: the positional count must be n (or at
// least -n when n < 0).
func ParseN(fs *flag.FlagSet, args []string, n int) ([]string, error) {
	pos, err := Parse(fs, args)
	if err == nil {
		err = NArgs(fs, pos, n)
	}
	return pos, err
}

// NArgs checks the positional count: exactly n, or at least n when n < 0
// means "at least -n".
func NArgs(fs *flag.FlagSet, pos []string, n int) error {
	switch {
	case n == 0 && len(pos) > 0:
		return Usagef("unexpected argument %q (%s)", pos[0], Hint(fs))
	case n >= 0 && len(pos) != n:
		return Usagef("want %d argument%s, got %d (%s)", n, plural(n), len(pos), Hint(fs))
	case n < 0 && len(pos) < -n:
		return Usagef("want at least %d argument%s, got %d (%s)", -n, plural(-n), len(pos), Hint(fs))
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Output renders results and errors in the mode the user chose.
type Output struct {
	Env  *applets.Env
	JSON bool
}

// Result prints v in the JSON envelope with "ok":true when JSON is set,
// else calls human.
func (o Output) Result(v any, human func(w io.Writer)) error { return o.ResultOK(true, v, human) }

// ResultOK is Result for a result whose exit status will be non-zero when
// ok is false (a doctor that found failures, a CAS helper's non-success
// outcome): the envelope says "ok":false.
func (o Output) ResultOK(ok bool, v any, human func(w io.Writer)) error {
	if o.JSON {
		b, err := Envelope(ok, v)
		if err != nil {
			return o.Fail(abi.Errorf(abi.EIO, "cannot encode the result: %v", err))
		}
		_, err = o.Env.Stdout.Write(append(b, '\n'))
		return err
	}
	if human != nil {
		human(o.Env.Stdout)
	}
	return nil
}

// Fail reports err once: in JSON mode as {"ok":false,"error":{…}} on stdout,
// else as "APPLET: message (CODE)" on stderr. It returns a *Reported for
// main.
func (o Output) Fail(err error) error {
	if err == nil || errors.Is(err, ErrHelp) {
		return err
	}
	var rep *Reported
	if errors.As(err, &rep) {
		return err
	}
	var exit *ExitStatus
	if errors.As(err, &exit) {
		return err
	}
	if o.JSON {
		_ = WriteJSON(o.Env.Stdout, ErrorBody(err))
	} else {
		fmt.Fprintln(o.Env.Stderr, HumanError(o.Env.Name, err))
	}
	return &Reported{Err: err}
}

// HumanError is the one-line stderr form: "APPLET: message (CODE)". A
// message that already starts with the applet's name, or already ends
// with its code, is not given them twice.
func HumanError(name string, err error) string {
	msg, code := err.Error(), abi.CodeOf(err)
	for strings.HasPrefix(msg, name+": ") {
		msg = strings.TrimPrefix(msg, name+": ")
	}
	msg = strings.TrimSuffix(msg, " ("+string(code)+")")
	return fmt.Sprintf("%s: %s (%s)", name, msg, code)
}

// ErrorBody is the JSON error shape of ARCHITECTURE.md.
func ErrorBody(err error) any {
	type body struct {
		Code    abi.Code `json:"code"`
		Message string   `json:"message"`
	}
	return struct {
		OK    bool `json:"ok"`
		Error body `json:"error"`
	}{false, body{abi.CodeOf(err), err.Error()}}
}
