package t

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Issue 15, defect 4: tools must get exactly the seed's environment and
// never a credential. The agent runtime holds a provider key (it calls the
// model); an agent allowed fs.read and a plain-program tool reads its own
// /proc/self/environ, its parent's (the runtime's) and the environment it
// was given, and the model is told everything. The sentinel key must show
// up nowhere but in the Authorization header the provider received: not
// in any tool's environment, any frame, stderr, the model's input, or any
// file of the tree.
func TestSecurityAgentToolsNeverSeeCredentials(t *testing.T) {
	a := attacker(t, "ctxt15a")
	const key = "sk-ctxt15-SENTINEL-4f1e9c2b7a"
	base := publicDir(t, a)
	root, work := filepath.Join(base, "ctx"), filepath.Join(base, "work")
	mustOK(t, runAs(t, a, runOpts{}, applet("ctx"), "init", "--root", root, "--runner", applet("cortexfs-object-runner")))
	mustOK(t, runAs(t, a, runOpts{}, "/bin/mkdir", work))
	dump := filepath.Join(work, "envdump.out")
	fake, auths := recordingFake(t,
		fakeStep{Calls: []fakeCall{{Name: "fs.read", Args: `{"path":"/proc/self/environ"}`}}},
		fakeStep{Calls: []fakeCall{{Name: "envdump", Args: `{}`}}},
		fakeStep{Text: "finished"})
	home := filepath.Join(root, "home", strconv.Itoa(a.uid()))
	writeModel(t, home, "fake/chat", map[string]string{
		"id": "fake-chat\n", "driver": "openai-chat\n", "session": "none\n", "status": "ready\n", "log": "",
		"default": "base_url=" + fake.srv.URL + "/v1\nauth=required\n",
	})
	tool := filepath.Join(home, "tool", "envdump")
	script := "#!/bin/sh\n{ echo '== self'; tr '\\0' '\\n' < /proc/self/environ; echo '== parent'; tr '\\0' '\\n' < /proc/$PPID/environ; echo '== env'; env; } > " + dump + " 2>&1\ncat " + dump + "\n"
	if err := os.WriteFile(tool, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	chownTree(t, home, a)
	mustOK(t, runAs(t, a, runOpts{}, applet("ctx"), "agent", "create", "coder", "--root", root, "--model", "fake/chat",
		"--cwd", work, "--tool", "fs.read", "--tool", "envdump"))
	sandboxBinds(t, root, "coder") // the envdump tool is a shell script

	r := runAs(t, a, runOpts{env: []string{"FAKE_API_KEY=" + key, "CTXT15_CALLER_ONLY=leak"}},
		filepath.Join(root, "agent", "coder"), "look around")
	mustOK(t, r)
	if got := auths(); len(got) < 3 || got[0] != "Bearer "+key {
		t.Fatalf("the provider did not get the key (so this test proves nothing): %q", got)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the envdump tool did not run: %v\n%s", err, r)
	}
	dumpAll := string(b)
	self, rest, _ := strings.Cut(dumpAll, "== parent")
	if _, env, ok := strings.Cut(rest, "== env"); ok {
		self += env
	}
	if !strings.Contains(rest, "ermission denied") {
		t.Errorf("the tool could read the runtime's /proc/PID/environ (or did not try):\n%s", rest)
	}
	// The seed's runtime environment, as the agent's sandbox names the tree.
	inHome := "/ctx/home/" + strconv.Itoa(a.uid())
	for _, want := range []string{"CTX_ROOT=/ctx\n", "CTX_HOME=" + inHome + "\n", "CTX_PATH=/ctx/tool:" + inHome + "/tool\n",
		"HOME=" + inHome + "/agent/coder\n", "PATH=", "LANG=C.UTF-8", "TERM=dumb"} {
		if !strings.Contains(self, want) {
			t.Errorf("the tool's environment lacks %q:\n%s", want, self)
		}
	}
	if strings.Contains(self, "CTXT15_CALLER_ONLY") {
		t.Errorf("the caller's environment leaked into the tool:\n%s", self)
	}
	where := map[string]string{"stdout": r.stdout, "stderr": r.stderr, "tool environ dump": dumpAll}
	for i, req := range fake.requests() {
		for _, m := range req.Messages {
			if m.Content != nil {
				where["model request "+strconv.Itoa(i)] += *m.Content
			}
		}
	}
	if !strings.Contains(where["model request 1"], "CTX_HOME=") {
		t.Errorf("fs.read of /proc/self/environ did not reach the model (the check would prove nothing): %q", where["model request 1"])
	}
	for name, s := range where {
		if strings.Contains(s, key) {
			t.Errorf("the key leaked into %s", name)
		}
	}
	for _, dir := range []string{root, work} {
		if hits := grepTree(t, dir, key); len(hits) > 0 {
			t.Errorf("the key is in files: %v", hits)
		}
	}
}
