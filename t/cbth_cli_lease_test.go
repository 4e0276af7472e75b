package t

import (
	"os"
	"path/filepath"
	"testing"
)

// An app-server that takes longer than the foreground lease to start (a
// loaded machine) must not cost the waiting foreground its session: the
// lease covers attach, and renewal starts once attach answers.
func TestCbthCLISlowAppServerKeepsTheLease(t *testing.T) {
	w := newCLIWorld(t, "read-only")
	slow := filepath.Join(t.TempDir(), "codex")
	script := "#!/bin/sh\ncase \" $* \" in *\" app-server --listen \"*) sleep 12;; esac\nexec " +
		shq(filepath.Join(codexBinDir(t), "codex")) + " \"$@\"\n"
	if err := os.WriteFile(slow, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	_, thread := w.newThread("--codex-bin", slow)
	if s := w.session(thread); s.SessionState != "live" {
		t.Fatalf("session after a slow start: %+v", s)
	}
}
