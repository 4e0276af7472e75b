package tree

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func echoObject(t *testing.T) Object {
	t.Helper()
	r := Root(filepath.Join(t.TempDir(), "ctx"))
	if _, err := Init(InitOptions{Root: r, Runner: "/usr/bin/cortexfs-object-runner", UID: os.Getuid()}); err != nil {
		t.Fatal(err)
	}
	o, err := Resolve(r.ModelPath("debug/echo"))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestTrusted(t *testing.T) {
	if err := Trusted(echoObject(t), os.Getuid()); err != nil {
		t.Fatalf("fresh tree not trusted: %v", err)
	}
	cases := []struct {
		name  string
		spoil func(o Object) error
		root  bool // needs root to set up
	}{
		{"default writable by others", func(o Object) error { return os.Chmod(o.Ctl("default"), 0o666) }, false},
		{"driver writable by group", func(o Object) error { return os.Chmod(o.Ctl("driver"), 0o664) }, false},
		{"control dir writable by others", func(o Object) error { return os.Chmod(o.Ctl(""), 0o777) }, false},
		{"provider dir writable by others", func(o Object) error { return os.Chmod(filepath.Dir(o.Path), 0o777) }, false},
		{"model dir writable by others", func(o Object) error { return os.Chmod(filepath.Dir(filepath.Dir(o.Path)), 0o757) }, false},
		{"object writable by others", func(o Object) error { return os.Chmod(o.Path, 0o757) }, false},
		{"default is a symlink", func(o Object) error {
			os.Remove(o.Ctl("default"))
			return os.Symlink("/tmp/elsewhere", o.Ctl("default"))
		}, false},
		{"default owned by another user", func(o Object) error { return os.Chown(o.Ctl("default"), 4242, 4242) }, true},
		{"object owned by another user", func(o Object) error { return os.Chown(o.Path, 4242, 4242) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("SKIP LOUDLY: needs root to chown to another uid")
			}
			o := echoObject(t)
			if err := c.spoil(o); err != nil {
				t.Fatal(err)
			}
			if err := Trusted(o, os.Getuid()); abi.CodeOf(err) != abi.EACCES {
				t.Errorf("Trusted = %v, want EACCES", err)
			}
		})
	}
}

// CheckSteering: an unprivileged owner runs their own object; anyone
// else, root included, needs the full trust rule.
func TestCheckSteering(t *testing.T) {
	o := echoObject(t)
	if err := CheckSteering(o, os.Getuid()); err != nil {
		t.Fatalf("own fresh tree: %v", err)
	}
	if err := os.Chmod(o.Ctl("default"), 0o666); err != nil {
		t.Fatal(err)
	}
	err := CheckSteering(o, os.Getuid())
	if os.Getuid() == 0 && abi.CodeOf(err) != abi.EACCES {
		t.Errorf("root, world-writable .d/default: %v, want EACCES", err)
	}
	if os.Getuid() != 0 && err != nil {
		t.Errorf("unprivileged owner: %v, want nil (their object)", err)
	}
	if err := CheckSteering(o, 4242); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("another uid, world-writable .d/default: %v, want EACCES", err)
	}
}
