package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// writeUsage is a command's --help: synopsis, description, then its flags
// spelled as users type them (--name VALUE), required ones marked.
func writeUsage(w io.Writer, fs *flag.FlagSet, m *flagMeta) {
	fmt.Fprintf(w, "usage: %s\n", m.synopsis)
	if d := strings.TrimSpace(m.description); d != "" {
		fmt.Fprintf(w, "\n%s\n", d)
	}
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		lines = append(lines, flagLine(f, slices.Contains(m.required, f.Name)))
	})
	if len(lines) > 0 {
		fmt.Fprintf(w, "\nflags:\n%s", strings.Join(lines, ""))
	}
}

// flagLine is one flag of --help: "  --name VALUE   usage (default X)".
func flagLine(f *flag.Flag, required bool) string {
	placeholder, usage := flag.UnquoteUsage(f)
	head := "  --" + f.Name
	if !IsBoolFlag(f) {
		if strings.Contains(f.Usage, "`") {
			head += " " + placeholder // named in the usage: `DIR`
		} else {
			head += " " + placeholderOf(placeholder)
		}
	}
	if required {
		usage += " (required)"
	} else if !zeroDefault(f.DefValue) {
		usage += fmt.Sprintf(" (default %s)", f.DefValue)
	}
	if len(head) < 30 {
		return fmt.Sprintf("%-30s %s\n", head, usage)
	}
	return fmt.Sprintf("%s\n%-30s %s\n", head, "", usage)
}

// IsBoolFlag reports whether f takes no value.
func IsBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func placeholderOf(t string) string {
	switch t {
	case "int", "int64", "uint", "uint64":
		return "N"
	case "duration":
		return "DURATION"
	case "float":
		return "X"
	case "string", "value", "":
		return "VALUE"
	}
	return strings.ToUpper(t)
}

func zeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}
