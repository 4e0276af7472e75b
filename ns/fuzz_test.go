package ns

import (
	"os"
	"strings"
	"testing"
)

// The init parses the spec line the launcher sends; whatever the bytes, it
// returns a valid spec or an error, never panics, and a spec it accepts
// has only absolute clean paths.
func FuzzSpec(f *testing.F) {
	f.Add([]byte(`{"root":{"kind":"bind","source":"/srv/root","nosuid":true},"mounts":[{"kind":"proc","target":"/proc"},{"kind":"bind","source":"/work","target":"/work","recursive":true,"ro":true,"line":3}],"argv":["ctx-agent","runtime"],"cwd":"/work"}` + "\n"))
	f.Add([]byte(`{"root":{"source":"relative"},"argv":["x"]}` + "\n"))
	f.Add([]byte("{\"root\":{\"source\":\"/\"},\"mounts\":[{\"kind\":\"bind\",\"source\":\"/a/../b\",\"target\":\"/x\"}],\"argv\":[\"x\"]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Skip(err)
		}
		go func() { w.Write(b); w.Close() }()
		s, _, err := readSpec(r)
		r.Close()
		if err != nil {
			return
		}
		paths := []string{s.Root.Source}
		for _, m := range s.Mounts {
			paths = append(paths, m.Target)
			if m.Kind == KindBind {
				paths = append(paths, m.Source)
			}
		}
		for _, p := range paths {
			if !cleanAbs(p) {
				t.Fatalf("accepted a spec with path %q", p)
			}
		}
		if len(s.Argv) == 0 {
			t.Fatalf("accepted a spec without a program")
		}
	})
}

// mountinfo paths are octal-escaped; unescaping never panics and leaves
// plain paths alone.
func FuzzUnescapeMountinfo(f *testing.F) {
	f.Add(`/a\040b`)
	f.Add(`/x\134y\`)
	f.Add(`\0`)
	f.Fuzz(func(t *testing.T, s string) {
		got := unescapeMountinfo(s)
		if !strings.Contains(s, `\`) && got != s {
			t.Fatalf("unescape(%q) = %q", s, got)
		}
		if len(got) > len(s) {
			t.Fatalf("unescape grew %q to %q", s, got)
		}
	})
}
