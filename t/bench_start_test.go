package t

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func init() { addBench("START", benchStart) }

// START (PF1 included): every applet's cheapest path against a static Go
// hello built in this run, run in turn with it; and what runs before main
// (GODEBUG=inittrace=1).
func benchStart(t *testing.T, f floors) {
	root := newRoot(t)
	home := cbthHome(t, "")
	var j cbthJob
	cbthJSON(t, home, &j, "job", "submit", "--target", "cli", "--thread-id", "s", "--task-kind", "k", "--summary", "s")
	paths := []struct {
		name string
		argv []string
	}{
		{"START cortexfs --version", []string{applet("cortexfs"), "--version"}},
		{"START ctx status", []string{applet("ctx"), "status", "--root", root}},
		{"START cbth job query (warm daemon)", []string{applet("cbth"), "job", "query", j.JobID}},
		{"PF1 model/debug/echo hi (shebang)", []string{filepath.Join(root, "model/debug/echo"), "hi"}},
	}
	for _, p := range paths {
		hello, ours := alternate(t, 60, []string{f.helloPath}, p.argv, "CBTH_HOME="+home)
		addRow(row{figure: p.name, ours: ms(ours), floor: ms(hello), goal: ratioAtMost(1.3),
			note: "floor: static Go hello (CGO_ENABLED=0) built in this run; median of 60 each, alternating"})
	}
	ours := inittrace(t, applet("cortexfs"), "--version")
	floor := inittrace(t, f.helloPath)
	addRow(row{figure: "START package init before main", ours: ms(ours.total), floor: ms(floor.total),
		note: fmt.Sprintf("GODEBUG=inittrace=1 cortexfs --version, median of 21: %d packages (%d ours, %d third-party, %d std), "+
			"%.1f KiB in %d allocations; ours %v, third-party %v, std %v; slowest: %s. Floor: the same for hello (%d packages)",
			ours.pkgs, ours.byKind["ours"].n, ours.byKind["third"].n, ours.byKind["std"].n, float64(ours.bytes)/1024, ours.allocs,
			ours.byKind["ours"].d.Round(time.Microsecond), ours.byKind["third"].d.Round(time.Microsecond),
			ours.byKind["std"].d.Round(time.Microsecond), ours.slowest, floor.pkgs)})
}

type initKind struct {
	n int
	d time.Duration
}

// initTrace sums one binary's package initialisation.
type initTrace struct {
	pkgs          int
	total         time.Duration
	bytes, allocs int
	byKind        map[string]initKind
	slowest       string
}

// inittrace runs argv 21 times under GODEBUG=inittrace=1 and returns the
// run with the median total init time.
func inittrace(t *testing.T, argv ...string) initTrace {
	t.Helper()
	var runs []initTrace
	for range 21 {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		runs = append(runs, parseInittrace(stderr.String()))
	}
	sort.Slice(runs, func(i, k int) bool { return runs[i].total < runs[k].total })
	return runs[len(runs)/2]
}

// parseInittrace reads lines like
// "init net/http @1.2 ms, 0.018 ms clock, 4712 bytes, 49 allocs".
func parseInittrace(s string) initTrace {
	tr := initTrace{byKind: map[string]initKind{}}
	type pkg struct {
		name string
		d    time.Duration
	}
	var all []pkg
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" {
			continue
		}
		msClock, _ := strconv.ParseFloat(f[4], 64)
		b, _ := strconv.Atoi(f[7])
		a, _ := strconv.Atoi(f[9])
		d := time.Duration(msClock * float64(time.Millisecond))
		kind := "std"
		switch {
		case strings.HasPrefix(f[1], "github.com/cortexfs/"):
			kind = "ours"
		case strings.Contains(strings.SplitN(f[1], "/", 2)[0], "."):
			kind = "third"
		}
		k := tr.byKind[kind]
		k.n++
		k.d += d
		tr.byKind[kind] = k
		tr.pkgs++
		tr.total += d
		tr.bytes += b
		tr.allocs += a
		all = append(all, pkg{f[1], d})
	}
	slices.SortFunc(all, func(a, b pkg) int { return int(b.d - a.d) })
	var top []string
	for _, p := range all[:min(4, len(all))] {
		top = append(top, fmt.Sprintf("%s %v", p.name, p.d.Round(time.Microsecond)))
	}
	tr.slowest = strings.Join(top, ", ")
	return tr
}
