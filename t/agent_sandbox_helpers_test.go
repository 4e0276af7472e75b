package t

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostPrograms are the host directories that hold programs and their
// libraries: an agent whose tools run a shell (shell.exec, a #!/bin/sh
// tool) needs them in its sandbox, where nothing is visible unless a
// .d/mount line binds it.
var hostPrograms = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives"}

// sandboxBinds appends to agent name's .d/mount read-only binds of the
// host's program directories and read-write binds of rw at their own paths,
// and to its .d/policy the mount:<name> lines that allow them (each mount
// needs one, issue 18).
func sandboxBinds(t *testing.T, root, name string, rw ...string) {
	t.Helper()
	var lines, rules string
	typ := agentType(t, root, name)
	for _, d := range hostPrograms {
		if _, err := os.Stat(d); err == nil {
			lines += d + "\t" + d + "\tro\trbind,nodev\n"
			rules += "allow " + typ + " mount:" + filepath.Base(d) + " read\n"
		}
	}
	for _, d := range rw {
		lines += d + "\t" + d + "\trw\trbind,nosuid,nodev\n"
		rules += "allow " + typ + " mount:" + filepath.Base(d) + " write\n"
	}
	p, err := os.OpenFile(filepath.Join(root, "agent", name+".d", "policy"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.WriteString(rules); err != nil {
		t.Fatal(err)
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

// agentType is the subject type of agent name's label.
func agentType(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "agent", name+".d", "label"))
	if err != nil {
		t.Fatal(err)
	}
	l := strings.TrimSpace(string(b))
	if f := strings.Split(l, ":"); len(f) >= 3 {
		return f[2]
	}
	return l
}

// allowMounts appends to agent name's .d/policy a mount:<name> line for
// each .d/mount line it lacks one for (the last component of the target;
// read for ro, write for rw), as ctx agent create does for the mounts it
// writes: a test that edits .d/mount by hand says the policy allows it.
func allowMounts(t *testing.T, root, name string) {
	t.Helper()
	ctl := filepath.Join(root, "agent", name+".d")
	mounts, err := os.ReadFile(filepath.Join(ctl, "mount"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := os.ReadFile(filepath.Join(ctl, "policy"))
	if err != nil {
		t.Fatal(err)
	}
	typ := agentType(t, root, name)
	var add string
	for _, l := range strings.Split(string(mounts), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 4 || strings.HasPrefix(l, "#") {
			continue
		}
		name, perm := filepath.Base(f[1]), "read"
		if f[1] == "/" {
			name = "root"
		}
		if f[2] == "rw" {
			perm = "write"
		}
		rule := "allow " + typ + " mount:" + name + " " + perm + "\n"
		if !strings.Contains(string(pol)+add, rule) {
			add += rule
		}
	}
	if add == "" {
		return
	}
	if len(pol) > 0 && pol[len(pol)-1] != '\n' {
		add = "\n" + add
	}
	if err := os.WriteFile(filepath.Join(ctl, "policy"), append(pol, add...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shellExecOf runs agent name one-shot on task (its fake model calls
// shell.exec once) and returns what that call printed.
func shellExecOf(t *testing.T, root, name, task string) (res struct{ Stdout string }) {
	t.Helper()
	r := mustOK(t, run(t, runOpts{stdin: `{"task":"` + task + `"}`}, filepath.Join(root, "agent", name)))
	var out string
	for _, f := range parseAgentFrames(t, r.stdout) {
		if f.Type == "message" && f.Role == "tool" && f.Name == "shell.exec" {
			out = f.text()
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("shell.exec result %q: %v\nrun:\n%s", out, err, r.stdout)
	}
	return res
}
