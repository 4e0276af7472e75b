// Package cli holds what every applet shares: flag sets that print --help,
// human or JSON output, and the mapping of errors to stable codes on output.
package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

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

// FlagSet returns a flag set whose usage text is the command's synopsis and
// description followed by its flags, written to env.Stdout on --help.
func FlagSet(env *applets.Env, name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := env.Stdout
		fmt.Fprintf(w, "usage: %s\n", synopsis)
		if description != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(description))
		}
		var b bytes.Buffer
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if b.Len() > 0 {
			fmt.Fprintf(w, "\nflags:\n%s", b.String())
		}
	}
	return fs
}

// Parse parses args with flags and positional arguments interleaved
// (`cbth job query ID --json`); everything after "--" is positional as is.
// --help prints usage and returns ErrHelp; a bad flag is a usage error.
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
			return nil, Usagef("%v (see %s --help)", err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return append(positional, tail...), nil
}

// honourJSON sets a defined --json flag that appears after a bad flag, so
// the usage error itself comes out as JSON when the caller asked for JSON.
func honourJSON(fs *flag.FlagSet, args []string) {
	if fs.Lookup("json") == nil {
		return
	}
	for _, a := range args {
		if a == "--json" || a == "-json" || a == "--json=true" || a == "-json=true" {
			_ = fs.Set("json", "true")
		}
	}
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
	case n >= 0 && len(pos) != n:
		return Usagef("%s: want %d argument(s), got %d (see --help)", fs.Name(), n, len(pos))
	case n < 0 && len(pos) < -n:
		return Usagef("%s: want at least %d argument(s), got %d (see --help)", fs.Name(), -n, len(pos))
	}
	return nil
}

// Output renders results and errors in the mode the user chose.
type Output struct {
	Env  *applets.Env
	JSON bool
}

// Result prints v as one JSON object when JSON is set, else calls human.
func (o Output) Result(v any, human func(w io.Writer)) error {
	if o.JSON {
		return WriteJSON(o.Env.Stdout, v)
	}
	if human != nil {
		human(o.Env.Stdout)
	}
	return nil
}

// Fail reports err once: in JSON mode as {"ok":false,"error":{…}} on stdout,
// else as "name: message" on stderr. It returns a *Reported for main.
func (o Output) Fail(err error) error {
	if err == nil || errors.Is(err, ErrHelp) {
		return err
	}
	var rep *Reported
	if errors.As(err, &rep) {
		return err
	}
	if o.JSON {
		_ = WriteJSON(o.Env.Stdout, ErrorBody(err))
	} else {
		fmt.Fprintln(o.Env.Stderr, HumanError(o.Env.Name, err))
	}
	return &Reported{Err: err}
}

// HumanError is the one-line stderr form: "name: message (CODE)".
func HumanError(name string, err error) string {
	return fmt.Sprintf("%s: %s (%s)", name, err.Error(), abi.CodeOf(err))
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

// WriteJSON writes v as one line of JSON without HTML escaping.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
