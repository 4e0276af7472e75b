package t

import (
	"os"
	"path/filepath"
	"testing"
)

// hostPrograms are the host directories that hold programs and their
// libraries: an agent whose tools run a shell (shell.exec, a #!/bin/sh
// tool) needs them in its sandbox, where nothing is visible unless a
// .d/mount line binds it.
var hostPrograms = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives"}

// sandboxBinds appends to agent name's .d/mount read-only binds of the
// host's program directories and read-write binds of rw at their own paths.
func sandboxBinds(t *testing.T, root, name string, rw ...string) {
	t.Helper()
	var lines string
	for _, d := range hostPrograms {
		if _, err := os.Stat(d); err == nil {
			lines += d + "\t" + d + "\tro\trbind,nodev\n"
		}
	}
	for _, d := range rw {
		lines += d + "\t" + d + "\trw\trbind,nosuid,nodev\n"
	}
	f, err := os.OpenFile(filepath.Join(root, "agent", name+".d", "mount"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines); err != nil {
		t.Fatal(err)
	}
}
