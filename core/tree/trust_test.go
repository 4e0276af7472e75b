package tree

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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

// A trust stamp stands for the content of what it covers only once that
// content is older than the read by the margin; then it stays equal until
// anything it covers changes: a same-size rewrite of .d/default, a chmod
// (still trusted), a new file in .d/, a rename over a steering file.
func TestTrustStamp(t *testing.T) {
	o := echoObject(t)
	uid := os.Getuid()
	if s, err := TrustStamp(o, uid, time.Now()); err != nil || s != "" {
		t.Fatalf("a tree made just now: stamp %q, %v; want no stamp (its files changed within the margin)", s, err)
	}
	time.Sleep(stampMargin + 100*time.Millisecond)
	first, err := TrustStamp(o, uid, time.Now())
	if err != nil || first == "" {
		t.Fatalf("settled tree: stamp %q, %v", first, err)
	}
	if again, _ := TrustStamp(o, uid, time.Now()); again != first {
		t.Fatalf("nothing changed, yet the stamp did:\n%s\n%s", first, again)
	}
	def, _ := os.ReadFile(o.Ctl("default"))
	for _, change := range []struct {
		name string
		do   func() error
	}{
		{"same-size rewrite of .d/default", func() error {
			b := append([]byte(nil), def...)
			if len(b) > 0 {
				b[0] ^= 1
			}
			return os.WriteFile(o.Ctl("default"), b, 0o644)
		}},
		{"chmod of .d/driver", func() error { return os.Chmod(o.Ctl("driver"), 0o600) }},
		{"a new file in .d/", func() error { return os.WriteFile(o.Ctl("extra"), nil, 0o644) }},
		{"rename over .d/id", func() error {
			os.WriteFile(o.Ctl("id.new"), []byte("echo\n"), 0o644)
			return os.Rename(o.Ctl("id.new"), o.Ctl("id"))
		}},
	} {
		before, _ := TrustStamp(o, uid, time.Now().Add(time.Hour)) // a read time far ahead: always stamped
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		after, err := TrustStamp(o, uid, time.Now().Add(time.Hour))
		if err != nil || after == before {
			t.Errorf("%s: stamp unchanged (%v)", change.name, err)
		}
		if now, _ := TrustStamp(o, uid, time.Now()); now != "" {
			t.Errorf("%s: stamped right after the change, within the margin", change.name)
		}
	}
}
