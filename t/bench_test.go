package t

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// `make bench` prints ONE table: figure, ours, floor, ratio, goal, ✓/✗.
// Every floor is measured in the same run on the same machine (machines
// are noisy; a ratio against a floor measured minutes apart means
// nothing). A bench prints figures; it never fails on a timing. Benches
// register with addBench and add rows with addRow (or figure, for a
// figure without floor or goal).

// floors are measured once at the start of the run and handed to every
// bench.
type floors struct {
	hello     time.Duration // median wall of a static Go hello (CGO_ENABLED=0) built in this run
	helloCgo  time.Duration // the same hello linked like ours (cgo, static glibc)
	exec      time.Duration // median wall of `cortexfs --version`
	commit    time.Duration // median of one fsync'd SQLite commit (WAL, synchronous=FULL) by a tiny program
	helloPath string
}

var benches []namedBench

// namedBench is one bench function; CORTEXFS_BENCH_ONLY (a regexp matched
// against the name) runs a subset, e.g. CORTEXFS_BENCH_ONLY=PF4 make bench.
type namedBench struct {
	name string
	fn   func(t *testing.T, f floors)
}

// addBench registers a bench under a name for CORTEXFS_BENCH_ONLY.
func addBench(name string, fn func(t *testing.T, f floors)) {
	benches = append(benches, namedBench{name, fn})
}

// measure is a figure with its unit: durations, rates, sizes.
type measure struct {
	v    float64
	unit string // "ms", "µs", rates ("runs/s", "MB/s"), "MiB", "x"
	text string // a figure given as text only (figure())
}

func (m measure) String() string {
	switch {
	case m.text != "":
		return m.text
	case m.unit == "":
		return "-"
	case m.unit == "ms" || m.unit == "µs":
		return fmt.Sprintf("%.3g %s", m.v, m.unit)
	case m.unit == "x":
		return fmt.Sprintf("%.2fx", m.v)
	case m.v >= 100:
		return fmt.Sprintf("%.0f %s", m.v, m.unit)
	default:
		return fmt.Sprintf("%.3g %s", m.v, m.unit)
	}
}

// ms is a duration as a measure (µs below a millisecond).
func ms(d time.Duration) measure {
	if d < time.Millisecond {
		return measure{v: float64(d) / float64(time.Microsecond), unit: "µs"}
	}
	return measure{v: float64(d) / float64(time.Millisecond), unit: "ms"}
}

// base is the value in the unit ratios are taken in (ms for durations,
// whichever of ms or µs a figure prints as).
func (m measure) base() float64 {
	if m.unit == "µs" {
		return m.v / 1000
	}
	return m.v
}

func per(v float64, unit string) measure { return measure{v: v, unit: unit} }

func mib(kib int64) measure { return measure{v: float64(kib) / 1024, unit: "MiB"} }

// goal is the target of a row: on the ratio (ours/floor) or on ours.
type goal struct {
	text  string
	check func(ours, ratio float64) bool
}

func ratioAtMost(x float64) goal {
	return goal{fmt.Sprintf("<= %.2gx", x), func(_, r float64) bool { return r > 0 && r <= x }}
}

func ratioAtLeast(x float64) goal {
	return goal{fmt.Sprintf(">= %.2gx", x), func(_, r float64) bool { return r >= x }}
}

func atMost(v float64, unit string) goal {
	return goal{fmt.Sprintf("<= %s", measure{v: v, unit: unit}), func(o, _ float64) bool { return o <= v }}
}

func atLeast(v float64, unit string) goal {
	return goal{fmt.Sprintf(">= %s", measure{v: v, unit: unit}), func(o, _ float64) bool { return o >= v }}
}

// row is one line of the table.
type row struct {
	figure string
	ours   measure
	floor  measure // zero: no floor
	goal   goal    // zero: no goal
	note   string  // a footnote: how it was measured, what the floor is
}

var (
	rowsMu sync.Mutex
	rows   []row
)

func addRow(r row) {
	rowsMu.Lock()
	rows = append(rows, r)
	rowsMu.Unlock()
}

// figure adds a row that has no floor and no goal (value as printed).
func figure(name, value, note string) {
	addRow(row{figure: name, ours: measure{text: value}, note: note})
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (r row) ratio() float64 {
	if r.floor.unit == "" || r.floor.base() == 0 || r.ours.unit == "" || r.ours.text != "" {
		return 0
	}
	return r.ours.base() / r.floor.base()
}

// printTable writes the collected rows as one table with footnotes.
func printTable(w *os.File) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "\nmachine: %d cores (GOMAXPROCS %d), %s, load %s\n\n", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.GOARCH, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	head := []string{"figure", "ours", "floor", "ratio", "goal", "ok"}
	cells := [][]string{head}
	var notes []string
	for _, r := range rows {
		name := r.figure
		if r.note != "" {
			n := slices.Index(notes, r.note) + 1
			if n == 0 {
				notes = append(notes, r.note)
				n = len(notes)
			}
			name = fmt.Sprintf("%s [%d]", name, n)
		}
		ours := r.ours.String()
		ratio, ok, floor, g := "", "", "", ""
		if r.floor.unit != "" {
			floor = r.floor.String()
			ratio = fmt.Sprintf("%.3gx", r.ratio())
		}
		if r.goal.text != "" {
			g = r.goal.text
			ok = "✗"
			if r.goal.check(r.ours.v, r.ratio()) {
				ok = "✓"
			}
		}
		cells = append(cells, []string{name, ours, floor, ratio, g, ok})
	}
	width := make([]int, len(head))
	for _, c := range cells {
		for i, s := range c {
			width[i] = max(width[i], len([]rune(s)))
		}
	}
	for n, c := range cells {
		var b strings.Builder
		for i, s := range c {
			pad := width[i] - len([]rune(s))
			if i > 0 && i < 4 {
				b.WriteString(strings.Repeat(" ", pad) + s + "  ")
			} else {
				b.WriteString(s + strings.Repeat(" ", pad) + "  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		if n == 0 {
			total := 0
			for _, x := range width {
				total += x + 2
			}
			fmt.Fprintln(w, strings.Repeat("-", total-2))
		}
	}
	fmt.Fprintln(w)
	for i, n := range notes {
		fmt.Fprintf(w, "[%d] %s\n", i+1, n)
	}
}

// TestBench is run by `make bench` only (CORTEXFS_BENCH=1); `make test`
// skips it because timings are figures, not pass/fail results.
func TestBench(t *testing.T) {
	if os.Getenv("CORTEXFS_BENCH") == "" {
		t.Skip("benchmarks print figures only; run `make bench` (sets CORTEXFS_BENCH=1)")
	}
	only, err := regexp.Compile(os.Getenv("CORTEXFS_BENCH_ONLY"))
	if err != nil {
		t.Fatalf("CORTEXFS_BENCH_ONLY: %v", err)
	}
	defer printTable(os.Stdout)
	fi, err := os.Stat(binPath)
	if err != nil {
		t.Fatal(err)
	}
	var f floors
	f.helloPath = staticHello(t, false)
	helloCgo := staticHello(t, true)
	f.hello, f.helloCgo = alternate(t, 60, []string{f.helloPath}, []string{helloCgo})
	f.exec = medianWall(t, 60, applet("cortexfs"), "--version")
	f.commit = sqliteCommitFloor(t)
	addRow(row{figure: "binary size", ours: mib(fi.Size() / 1024),
		note: "static, cgo (SQLite), stripped of nothing"})
	addRow(row{figure: "floor: static Go hello", ours: ms(f.hello),
		note: "CGO_ENABLED=0 `hello` built in this run; median wall of 60 runs, alternating with the cgo hello"})
	addRow(row{figure: "reference: static cgo hello", ours: ms(f.helloCgo), floor: ms(f.hello),
		note: "the same hello linked as cortexfs is (cgo, -extldflags -static): what glibc and cgo cost any such binary"})
	addRow(row{figure: "floor: one fsync'd SQLite commit", ours: ms(f.commit),
		note: "a tiny program in this run: one-row INSERT + COMMIT, WAL, synchronous=FULL, median of 200, same filesystem as the benches"})
	for _, b := range benches {
		if only.MatchString(b.name) {
			t.Run(b.name, func(t *testing.T) { b.fn(t, f) })
		}
	}
}

// staticHello builds a static "hello" in this run: pure Go (the floor of
// any Go binary) or linked like ours (cgo, static glibc).
func staticHello(t *testing.T, cgo bool) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n"
	env := []string{"CGO_ENABLED=0", "GOFLAGS="}
	args := []string{"build", "-o", filepath.Join(dir, "hello"), "."}
	if cgo {
		src = "package main\n\n// int one(void) { return 1; }\nimport \"C\"\nimport \"os\"\n\n" +
			"func main() { os.Stdout.WriteString(\"hello\\n\") }\n"
		env = []string{"CGO_ENABLED=1", "GOFLAGS="}
		args = []string{"build", "-ldflags", "-linkmode external -extldflags -static", "-o", filepath.Join(dir, "hello"), "."}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hello: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hello")
}

// sqliteCommitFloor builds and runs t/benchtools/sqlitecommit, which
// times single-row fsync'd commits with the store's settings.
func sqliteCommitFloor(t *testing.T) time.Duration {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sqlitecommit")
	cmd := exec.Command("go", "build", "-tags", "osusergo netgo sqlite_omit_load_extension", "-o", bin, "./benchtools/sqlitecommit")
	cmd.Dir = filepath.Join(repoRoot, "t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build sqlitecommit: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, filepath.Join(t.TempDir(), "floor.db"), "200").Output()
	if err != nil {
		t.Fatalf("sqlitecommit: %v", err)
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("sqlitecommit said %q", out)
	}
	return d
}

// medianWall runs a command n times and returns the median wall time.
func medianWall(t *testing.T, n int, path string, args ...string) time.Duration {
	t.Helper()
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", path, args, err, out)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[n/2]
}

// alternate runs a and b in turn n times each (A B A B …, so drift hits
// both alike) and returns their median walls.
func alternate(t *testing.T, n int, a, b []string, env ...string) (time.Duration, time.Duration) {
	t.Helper()
	once := func(argv []string) time.Duration {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return time.Since(start)
	}
	once(a)
	once(b)
	da, db := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		da[i], db[i] = once(a), once(b)
	}
	slices.Sort(da)
	slices.Sort(db)
	return da[n/2], db[n/2]
}
