package home

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestEnsureAndFailClosed(t *testing.T) {
	h := Home{Root: filepath.Join(t.TempDir(), "h")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]string{h.Root}, h.Subdirs()...) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, fi.Mode(), err)
		}
	}
	os.WriteFile(filepath.Join(h.Root, "x"), nil, 0o644)
	if p, err := h.Audit(); err != nil || len(p) != 1 {
		t.Errorf("audit = %v %v", p, err)
	}
	os.Chmod(h.RunDir(), 0o755)
	if err := h.Ensure(); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("Ensure with a 0755 run dir: %v", err)
	}
}

func TestResolve(t *testing.T) {
	t.Setenv("CBTH_HOME", "/tmp/from-env")
	if h, _ := Resolve(""); h.Root != "/tmp/from-env" {
		t.Errorf("env: %s", h.Root)
	}
	if h, _ := Resolve("/tmp/flag"); h.Root != "/tmp/flag" {
		t.Errorf("flag: %s", h.Root)
	}
	t.Setenv("CBTH_HOME", "")
	t.Setenv("HOME", "/home/u")
	if h, _ := Resolve(""); h.Root != "/home/u/.cbth" {
		t.Errorf("default: %s", h.Root)
	}
}
