package objd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

func echoObject(t *testing.T) tree.Object {
	t.Helper()
	r := tree.Root(filepath.Join(t.TempDir(), "ctx"))
	if _, err := tree.Init(tree.InitOptions{Root: r, Runner: "/usr/bin/cortexfs-object-runner", UID: os.Getuid()}); err != nil {
		t.Fatal(err)
	}
	o, err := tree.Resolve(r.ModelPath("debug/echo"))
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
		spoil func(o tree.Object) error
		root  bool // needs root to set up
	}{
		{"default writable by others", func(o tree.Object) error { return os.Chmod(o.Ctl("default"), 0o666) }, false},
		{"driver writable by group", func(o tree.Object) error { return os.Chmod(o.Ctl("driver"), 0o664) }, false},
		{"control dir writable by others", func(o tree.Object) error { return os.Chmod(o.Ctl(""), 0o777) }, false},
		{"provider dir writable by others", func(o tree.Object) error { return os.Chmod(filepath.Dir(o.Path), 0o777) }, false},
		{"model dir writable by others", func(o tree.Object) error { return os.Chmod(filepath.Dir(filepath.Dir(o.Path)), 0o757) }, false},
		{"object writable by others", func(o tree.Object) error { return os.Chmod(o.Path, 0o757) }, false},
		{"default is a symlink", func(o tree.Object) error {
			os.Remove(o.Ctl("default"))
			return os.Symlink("/tmp/elsewhere", o.Ctl("default"))
		}, false},
		{"default owned by another user", func(o tree.Object) error { return os.Chown(o.Ctl("default"), 4242, 4242) }, true},
		{"object owned by another user", func(o tree.Object) error { return os.Chown(o.Path, 4242, 4242) }, true},
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

// Only the daemon's own home tier is served; another user's is not even
// listed.
func TestSocketModelsOwnHomeOnly(t *testing.T) {
	o := echoObject(t)
	other := filepath.Join(o.Root.Home(4242), tree.ModelDir, "evil", "x")
	if err := os.MkdirAll(other+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(other, []byte("#!/usr/bin/cortexfs-object-runner\ncortexfs.object=model\n"), 0o755)
	os.WriteFile(other+".d/driver", []byte("openai-chat\n"), 0o644)
	os.WriteFile(other+".d/session", []byte("socket\n"), 0o644)
	objs, err := SocketModels(o.Root, os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range objs {
		if x.Name == "evil/x" {
			t.Fatalf("another uid's home model is listed for serving: %s", x.Path)
		}
	}
	if objs, _ := SocketModels(o.Root, 4242); len(objs) != 2 {
		t.Errorf("uid 4242 sees %d socket models, want system echo + its own", len(objs))
	}
}
