// Command progress runs `go test -json …` and shows its progress the way a
// person watching `make test` wants it: one line per package and per
// top-level test as it finishes, the full output of whatever failed, and
// go test's own exit status. Test tooling, never part of the binary.
//
//	go run ./t/progress [-tests] go test -json ./...
//
// Without -tests only packages are listed as they finish (and failed tests
// with their output); with it every top-level test too.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	args, tests := os.Args[1:], false
	if len(args) > 0 && args[0] == "-tests" {
		args, tests = args[1:], true
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: progress [-tests] go test -json [ARG…]")
		os.Exit(2)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "progress:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "progress:", err)
		os.Exit(2)
	}
	r := newReporter(os.Stdout)
	r.tests = tests
	r.read(out)
	err = cmd.Wait()
	r.summary()
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "progress:", err)
		os.Exit(2)
	}
	if r.failed > 0 {
		os.Exit(1) // never green when something failed, whatever go test said
	}
}

type reporter struct {
	w       io.Writer
	tests   bool // list passing tests too, not only packages
	start   time.Time
	outputs map[string]*strings.Builder // package + top-level test -> output
	passed  int
	skipped []string
	failed  int
	failedT []string
}

func newReporter(w io.Writer) *reporter {
	return &reporter{w: w, start: time.Now(), outputs: map[string]*strings.Builder{}}
}

func (r *reporter) read(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(r.w, sc.Text()) // a build error, not an event
			continue
		}
		r.handle(e)
	}
}

func (r *reporter) handle(e event) {
	top, _, sub := strings.Cut(e.Test, "/")
	key := e.Package + " " + top
	switch e.Action {
	case "output":
		b := r.outputs[key]
		if b == nil {
			b = &strings.Builder{}
			r.outputs[key] = b
		}
		if b.Len() < 4<<20 {
			b.WriteString(e.Output)
		}
		return
	case "pass", "fail", "skip":
	default:
		return
	}
	if sub {
		return // subtests are reported with their parent
	}
	stamp := time.Since(r.start).Truncate(time.Second)
	name := shortPkg(e.Package)
	if e.Test != "" {
		name += " " + e.Test
	}
	switch e.Action {
	case "pass":
		if e.Test != "" {
			r.passed++
			if !r.tests {
				break
			}
		}
		fmt.Fprintf(r.w, "%6s ok   %s (%.1fs)\n", stamp, name, e.Elapsed)
	case "skip":
		if e.Test != "" {
			r.skipped = append(r.skipped, name)
			if r.tests {
				fmt.Fprintf(r.w, "%6s skip %s\n", stamp, name)
			}
		}
	case "fail":
		r.failed++
		r.failedT = append(r.failedT, name)
		fmt.Fprintf(r.w, "%6s FAIL %s (%.1fs)\n", stamp, name, e.Elapsed)
		if b := r.outputs[key]; b != nil && e.Test != "" {
			fmt.Fprintf(r.w, "%s\n", indent(b.String()))
		} else if b != nil && e.Test == "" {
			fmt.Fprintf(r.w, "%s\n", indent(lastLines(b.String(), 40)))
		}
	}
	delete(r.outputs, key)
}

func (r *reporter) summary() {
	sort.Strings(r.failedT)
	fmt.Fprintf(r.w, "%6s %d tests passed, %d skipped, %d failed\n", time.Since(r.start).Truncate(time.Second),
		r.passed, len(r.skipped), len(r.failedT))
	for _, f := range r.failedT {
		fmt.Fprintf(r.w, "       FAIL %s\n", f)
	}
}

func shortPkg(p string) string { return strings.TrimPrefix(p, "github.com/cortexfs/cortexfs/") }

func indent(s string) string {
	return "       " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n       ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
