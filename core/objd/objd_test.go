package objd

import (
	"os"
	"path/filepath"
	"testing"

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
