package install

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func fakeBinary(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func actions(as []Action) map[string]string {
	m := map[string]string{}
	for _, a := range as {
		m[a.Name] = a.Action
	}
	return m
}

func TestInstallPlanAndApply(t *testing.T) {
	src := fakeBinary(t, "v1")
	dir := filepath.Join(t.TempDir(), "bin")
	names := []string{"ctx", "cbth", "ctx", "cortexfs"}
	as, err := Install(src, dir, names, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(as); got["cortexfs"] != "created" || got["ctx"] != "created" || got["cbth"] != "created" || len(as) != 3 {
		t.Fatalf("first install: %v", as)
	}
	as, err = Install(src, dir, names, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Action != "unchanged" {
			t.Errorf("second install: %+v", a)
		}
	}

	// A new binary is a conflict: refused whole without force.
	v2 := fakeBinary(t, "v2")
	if _, err := Install(v2, dir, names, false); abi.CodeOf(err) != abi.EEXIST {
		t.Fatalf("upgrade without force: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ctx")); string(b) != "v1" {
		t.Fatal("refused install changed a link")
	}
	as, err = Install(v2, dir, names, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cortexfs", "ctx", "cbth"} {
		if b, _ := os.ReadFile(filepath.Join(dir, n)); string(b) != "v2" {
			t.Errorf("%s not upgraded", n)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "cortexfs")); fi.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v", fi.Mode())
	}
}

func TestInstallRejectsBadNamesAndDirs(t *testing.T) {
	src := fakeBinary(t, "v1")
	dir := t.TempDir()
	if _, err := Install(src, dir, []string{"../evil"}, true); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("bad name: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ctx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(src, dir, []string{"ctx"}, true); abi.CodeOf(err) != abi.EEXIST {
		t.Errorf("directory in the way: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cortexfs")); err == nil {
		t.Error("refused install still copied the binary")
	}
}
