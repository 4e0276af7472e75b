package t

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/wire/ipc"
)

// A root cortexfsd serves a user's own tier: the user adds an MCP server
// to home/<uid>/.mcp.json, the daemon runs it as that user (never as
// root), the projected tools and the tier's socket belong to the user,
// and another user can neither call the tool nor make the server see a
// call.
func TestSecurityHomeTierSourcesRunAsOwner(t *testing.T) {
	w := newRootWorld(t, "ctxt13a")
	other := attacker(t, "ctxt13b")
	fixture := mcpFixture(t)
	wrapper, transcript := transcriptServer(t, fixture, "serve")
	os.WriteFile(transcript, nil, 0o666)
	os.Chmod(transcript, 0o666)
	w.start(t)
	env := []string{"CTX_ROOT=" + w.root}
	r := runAs(t, w.a, runOpts{env: env}, applet("ctx"), "mcp", "add", "mine", "--home", "--", wrapper)
	if r.code != 0 {
		t.Fatalf("the user's ctx mcp add --home: %s", r)
	}
	echo := filepath.Join(w.home, "tool", "mcp.mine.echo")
	waitLong(t, "the user's tool to be ready", func() bool {
		st, err := os.ReadFile(echo + ".d/status")
		return err == nil && strings.TrimSpace(string(st)) == "ready"
	})
	fi, err := os.Stat(echo)
	if err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != w.a.uid() {
		t.Fatalf("projected tool not owned by the user: %v %v", fi, err)
	}
	sock, err := os.Lstat(filepath.Join(w.home, ".tools.sock"))
	if err != nil || int(sock.Sys().(*syscall.Stat_t).Uid) != w.a.uid() || sock.Mode().Perm() != 0o600 {
		t.Fatalf("the home tier's socket: %v %v", sock, err)
	}
	rep := runAs(t, w.a, runOpts{env: env}, applet("ctx"), "tool", "sources", "--json")
	var pid int
	for _, l := range strings.Split(rep.stdout, ",") {
		if strings.HasPrefix(l, `"pid":`) {
			pid, _ = strconv.Atoi(strings.TrimPrefix(l, `"pid":`))
		}
	}
	if pid == 0 {
		t.Fatalf("no server pid in ctx tool sources:\n%s", rep)
	}
	if uid := pidUID(t, pid); uid != w.a.uid() {
		t.Fatalf("the user's MCP server runs as uid %d, not %d", uid, w.a.uid())
	}

	r = runAs(t, w.a, runOpts{env: env}, echo, `{"message":"owner"}`)
	if text, _ := toolResult(t, r); r.code != 0 || !strings.Contains(text, "fixture: owner") {
		t.Fatalf("the owner's call: %s", r)
	}
	r = runAs(t, other, runOpts{env: env}, echo, `{"message":"intruder"}`)
	if _, code := toolResult(t, r); r.code != 13 || code != "EACCES" {
		t.Fatalf("another user's call: want 13 EACCES, got %s", r)
	}
	if strings.Contains(readTranscript(t, transcript), "intruder") {
		t.Fatalf("the server saw another user's call")
	}
	// Even speaking the protocol directly to the socket gets nothing.
	req := fmt.Sprintf(`{"v":%d,"id":1,"op":"call","args":{"tool":"mcp.mine.echo","input":{"message":"direct"}}}`, ipc.Version)
	r = runAs(t, other, runOpts{}, fixture, "call", filepath.Join(w.home, ".tools.sock"), req)
	if r.code == 0 || strings.Contains(readTranscript(t, transcript), "direct") {
		t.Fatalf("a direct connection by another user got through: %s", r)
	}
}

// rootTreeAndAttacker is a root-owned tree in a directory every user can
// reach, and the second user who attacks it.
func rootTreeAndAttacker(t *testing.T) (actor, string) {
	t.Helper()
	needRoot(t)
	a := attacker(t, "ctxt13a")
	root := filepath.Join(publicDir(t, actor{}), "ctx")
	mustOK(t, sh(t, "ctx", "init", "--root", root, "--runner", applet("cortexfs-object-runner")))
	return a, root
}

// The system tier's tools are called by everyone the mode bits allow, and
// the daemon applies those bits itself (peer credentials): a client that
// skips the runner gets no more than one that runs the file.
func TestSecuritySystemToolModeBits(t *testing.T) {
	a, root := rootTreeAndAttacker(t)
	fixture := mcpFixture(t)
	wrapper, transcript := transcriptServer(t, fixture, "serve")
	mustOK(t, sh(t, "ctx", "mcp", "add", "fx", "--root", root, "--", wrapper))
	toolDaemon(t, root)
	waitSource(t, root, "fx", "ready")
	echo := filepath.Join(root, "tool", "mcp.fx.echo")
	r := runAs(t, a, runOpts{}, echo, `{"message":"allowed"}`)
	if text, _ := toolResult(t, r); r.code != 0 || !strings.Contains(text, "fixture: allowed") {
		t.Fatalf("a user calling a 0755 system tool: %s", r)
	}
	if err := os.Chmod(echo, 0o750); err != nil {
		t.Fatal(err)
	}
	if r := runAs(t, a, runOpts{}, applet("cortexfs-object-runner"), echo, `{"message":"denied"}`); r.code != 13 {
		t.Fatalf("0750 tool run by another user: %s", r)
	}
	req := fmt.Sprintf(`{"v":%d,"id":1,"op":"call","args":{"tool":"mcp.fx.echo","input":{"message":"sneaky"}}}`, ipc.Version)
	r = runAs(t, a, runOpts{}, fixture, "call", filepath.Join(root, ".tools.sock"), req)
	if !strings.Contains(r.stdout, `"code":"EACCES"`) || strings.Contains(readTranscript(t, transcript), "sneaky") {
		t.Fatalf("a direct call of a 0750 tool: %s", r)
	}
	if !strings.Contains(readFileString(t, echo+".d/log"), "code=EACCES") {
		t.Errorf("the refused direct call is not in .d/log")
	}
	// A user may not change the system tier's sources.
	r = runAs(t, a, runOpts{env: []string{"CTX_ROOT=" + root}}, applet("ctx"), "mcp", "add", "evil", "--json", "--", "/bin/true")
	if r.code != 13 || !strings.Contains(r.stdout, "EACCES") {
		t.Fatalf("a user adding a system MCP server: %s", r)
	}
}

// A configuration file another user could have written is never used:
// its servers do not start, and the refusal is reported.
func TestSecurityUntrustedConfigRefused(t *testing.T) {
	root := newRoot(t)
	mustOK(t, sh(t, "ctx", "mcp", "add", "fx", "--root", root, "--", mcpFixture(t), "serve"))
	cfg := filepath.Join(root, ".mcp.json")
	if err := os.Chmod(cfg, 0o666); err != nil {
		t.Fatal(err)
	}
	toolDaemon(t, root)
	var rep sourcesReport
	waitLong(t, "the daemon to report the untrusted config", func() bool {
		rep = toolSources(t, root)
		return len(rep.Tiers) > 0 && len(rep.Tiers[0].Problems) > 0
	})
	if !strings.Contains(strings.Join(rep.Tiers[0].Problems, " "), "writable by group or others") || len(rep.Tiers[0].Sources) != 0 {
		t.Fatalf("report: %+v", rep.Tiers[0])
	}
	if _, err := os.Stat(filepath.Join(root, "tool", "mcp.fx.echo")); err == nil {
		if st, _ := os.ReadFile(filepath.Join(root, "tool", "mcp.fx.echo.d", "status")); strings.TrimSpace(string(st)) == "ready" {
			t.Errorf("a tool of an untrusted config is ready")
		}
	}
	os.Remove(cfg)
	os.Symlink("/etc/hostname", cfg)
	doc := sh(t, "ctx", "doctor", "--root", root)
	if doc.code == 0 || !strings.Contains(doc.stdout, "mcp config") {
		t.Errorf("ctx doctor on a symlinked .mcp.json:\n%s", doc.stdout)
	}
}

// ctx plugin install reads the source directory without blocking and
// copies files of its own only: a FIFO manifest is refused at once (it
// hung root's install), a file with a second hard link is refused (it
// could be another user's file linked in), and nothing is installed.
func TestSecurityPluginInstallSourceFiles(t *testing.T) {
	root := newRoot(t)
	fifoDir := filepath.Join(t.TempDir(), "fifo")
	if err := os.MkdirAll(fifoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifoDir, "manifest.toml"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, runOpts{timeout: 10 * time.Second}, applet("ctx"), "plugin", "install", "--root", root, fifoDir)
	if r.code != 2 || !strings.Contains(r.stderr, "EINVAL") {
		t.Errorf("a FIFO manifest.toml: want EINVAL (exit 2) at once, got\n%s", r)
	}

	linked := filepath.Join(t.TempDir(), "linked")
	if err := os.MkdirAll(filepath.Join(linked, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(linked, "manifest.toml"), processManifest(`"plain"`, ""), 0o644)
	writeFile(t, filepath.Join(linked, "bin", "data.txt"), "x\n", 0o644)
	if err := os.Link(filepath.Join(linked, "bin", "data.txt"), filepath.Join(t.TempDir(), "elsewhere")); err != nil {
		t.Fatal(err)
	}
	r = run(t, runOpts{timeout: 10 * time.Second}, applet("ctx"), "plugin", "install", "--root", root, linked)
	if r.code != 13 || !strings.Contains(r.stderr, "hard link") {
		t.Errorf("a file with two hard links: want EACCES (exit 13), got\n%s", r)
	}
	if _, err := os.Lstat(filepath.Join(root, "plugins", "wc")); err == nil {
		t.Errorf("a refused install left plugins/wc behind")
	}
}

// The invocation context a plugin gets names its caller as the daemon
// knows it (peer credentials): another user speaking to the socket
// directly cannot pass itself off as root or as an agent. Only root's
// claims (a root launcher relaying its agent's call) are taken as sent.
func TestSecurityPluginInvocationIdentity(t *testing.T) {
	a, root := rootTreeAndAttacker(t)
	mustOK(t, sh(t, "ctx", "plugin", "install", cPluginDir(t, "hello-c", ""), "--root", root))
	toolDaemon(t, root)
	waitSource(t, root, "hello-c", "ready")
	fixture := mcpFixture(t)
	call := func(who actor, invocation string) string {
		req := fmt.Sprintf(`{"v":%d,"id":1,"op":"call","args":{"tool":"plugin.hello-c.whoami","input":{},"invocation":%s}}`,
			ipc.Version, invocation)
		r := runAs(t, who, runOpts{}, fixture, "call", filepath.Join(root, ".tools.sock"), req)
		return r.stdout
	}
	forged := `{"actor":"uid:0","source":"agent","session_id":"s1"}`
	out := call(a, forged)
	if !strings.Contains(out, `\"actor\":\"uid:`+strconv.Itoa(a.uid())+`\"`) || strings.Contains(out, `uid:0`) {
		t.Errorf("another user's forged actor reached the plugin: %s", out)
	}
	out = call(actor{}, `{"actor":"agent:coder","source":"agent"}`)
	if !strings.Contains(out, `\"actor\":\"agent:coder\"`) {
		t.Errorf("root's actor was not passed on: %s", out)
	}
}
