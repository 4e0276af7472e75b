package t

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
	"time"
)

// A bench prints figures; it never fails on a timing. Later issues append
// to benches; each receives the floors measured at the start of the run.
type floors struct {
	exec time.Duration // median wall of `cortexfs --version`
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

// TestBench is run by `make bench` only (CORTEXFS_BENCH=1); `make test`
// skips it because timings are figures, not pass/fail results.
func TestBench(t *testing.T) {
	if os.Getenv("CORTEXFS_BENCH") == "" {
		t.Skip("benchmarks print figures only; run `make bench` (sets CORTEXFS_BENCH=1)")
	}
	fi, err := os.Stat(binPath)
	if err != nil {
		t.Fatal(err)
	}
	figure("binary size", fmt.Sprintf("%.2f MiB", float64(fi.Size())/(1<<20)), fmt.Sprintf("%d bytes, static", fi.Size()))
	trueBin, _ := exec.LookPath("true")
	var f floors
	f.exec = medianWall(t, 60, applet("cortexfs"), "--version")
	figure("exec floor: cortexfs --version", f.exec.String(), "median wall of 60 runs; later figures divide by this")
	if trueBin != "" {
		tr := medianWall(t, 60, trueBin)
		figure("reference: /bin/true", tr.String(), fmt.Sprintf("floor is %.2fx of a trivial dynamic binary", ratio(f.exec, tr)))
	}
	only, err := regexp.Compile(os.Getenv("CORTEXFS_BENCH_ONLY"))
	if err != nil {
		t.Fatalf("CORTEXFS_BENCH_ONLY: %v", err)
	}
	for _, b := range benches {
		if only.MatchString(b.name) {
			b.fn(t, f)
		}
	}
}

// figure prints one line of the bench table.
func figure(name, value, note string) {
	fmt.Printf("%-44s %14s   %s\n", name, value, note)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
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
