package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Issue 15: a tool's .d/effects decides whether a call needs approval; the
// runtime (root, for a root-launched agent) read it by path, following
// symlinks. It is now read like every control file of another user: no
// symlink anywhere (ELOOP), only a regular file (EINVAL, and a FIFO never
// blocks), bounded; a missing file or .d/ is still "no effects".
func TestReadCtlStrictIsSafe(t *testing.T) {
	base := t.TempDir()
	tools, outside := filepath.Join(base, "tool"), filepath.Join(base, "outside")
	for _, d := range []string{tools, outside, filepath.Join(tools, "link.d"), filepath.Join(tools, "fifo.d"), filepath.Join(tools, "big.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "effects"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "effects"), filepath.Join(tools, "link.d", "effects")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(tools, "dirlink.d")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(tools, "fifo.d", "effects"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "big.d", "effects"), bytes.Repeat([]byte("#\n"), abi.MaxControlFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		want abi.Code // "": no error, nothing read
	}{
		{"link", abi.ELOOP},
		{"dirlink", abi.ELOOP},
		{"fifo", abi.EINVAL},
		{"big", abi.EMSGSIZE},
		{"missing", ""},
	} {
		done := make(chan struct{})
		var b []byte
		var err error
		go func() {
			defer close(done)
			b, err = Tool{Name: c.tool, Ctl: filepath.Join(tools, c.tool+".d")}.readCtlStrict("effects")
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: readCtlStrict blocked", c.tool)
		}
		if strings.Contains(string(b), "secret") {
			t.Errorf("%s: read the file outside through a symlink", c.tool)
		}
		if c.want == "" && (err != nil || b != nil) {
			t.Errorf("%s: %q, %v; want nothing and no error", c.tool, b, err)
		}
		if c.want != "" && abi.CodeOf(err) != c.want {
			t.Errorf("%s: %v, want %s", c.tool, err, c.want)
		}
	}
}

// Issue 15: wantsRelay read the tool file with os.ReadFile after isObject
// had checked it: a user who swaps a FIFO in between hangs the runtime in
// open(2). The second read is now non-blocking and regular-file-only, so
// however the swaps fall no call blocks.
func TestWantsRelayNeverBlocksOnASwappedFIFO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tool")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file, obj, fifo := filepath.Join(dir, "relayme"), filepath.Join(dir, ".obj"), filepath.Join(dir, ".fifo")
	body := []byte("#!/usr/local/bin/" + ObjectRunner + "\ncortexfs.object=tool\nsource=mcp:x\n")
	if err := os.WriteFile(file, body, 0o755); err != nil {
		t.Fatal(err)
	}
	if !wantsRelay(Tool{Name: "relayme", File: file}) {
		t.Fatal("a projected tool object does not want a relay")
	}
	var stop atomic.Bool
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for !stop.Load() {
			if os.WriteFile(obj, body, 0o755) == nil {
				os.Rename(obj, file)
			}
			if unix.Mkfifo(fifo, 0o644) == nil {
				os.Rename(fifo, file)
			}
		}
	}()
	defer func() {
		stop.Store(true)
		<-swapped
	}()
	calls := make(chan struct{})
	go func() {
		defer close(calls)
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
			wantsRelay(Tool{Name: "relayme", File: file})
		}
	}()
	select {
	case <-calls:
	case <-time.After(10 * time.Second):
		stop.Store(true)
		// Let the blocked open return, then fail.
		if f, err := os.OpenFile(file, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("wantsRelay blocked on a FIFO swapped in for the tool file")
	}
}
