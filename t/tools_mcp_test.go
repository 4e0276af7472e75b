package t

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const daemonKey = "sk-daemon-provider-key-never-for-tools"
const serverSecret = "mcp-config-secret-0451"

// mcpWorld is a tree whose system tier has the real everything server
// (over stdio, behind a transcript wrapper) served by cortexfsd, which
// itself holds a provider key.
type mcpWorld struct {
	root, transcript string
	d                *daemon
}

func newMCPWorld(t *testing.T) *mcpWorld {
	t.Helper()
	w := &mcpWorld{root: newRoot(t)}
	var wrapper string
	wrapper, w.transcript = transcriptServer(t, everythingBin(t))
	r := mustOK(t, sh(t, "ctx", "mcp", "add", "everything", "--root", w.root, "--env", "EVERYTHING_TOKEN="+serverSecret, "--", wrapper))
	if !strings.Contains(r.stdout, "tool/mcp.everything.echo") {
		t.Fatalf("ctx mcp add did not list the tools:\n%s", r)
	}
	w.d = toolDaemon(t, w.root, "OPENAI_API_KEY="+daemonKey)
	waitSource(t, w.root, "everything", "ready")
	return w
}

func (w *mcpWorld) tool(name string) string { return filepath.Join(w.root, "tool", name) }

// The real everything server over stdio: its tools are ordinary tool
// objects run through the shebang runner, input is validated before the
// server sees it, results are canonical tool output (text and structured),
// each call is one .d/log line, and neither the daemon's provider key nor
// the server's configured secret leaks into what tools or logs show.
func TestMCPStdioEverything(t *testing.T) {
	w := newMCPWorld(t)

	r := mustOK(t, run(t, runOpts{stdin: `{"a":1,"b":2}`}, w.tool("mcp.everything.get-sum")))
	if text, _ := toolResult(t, r); !strings.Contains(text, "The sum of 1 and 2 is 3.") {
		t.Fatalf("get-sum: %s", r)
	}
	fs := parseAgentFrames(t, r.stdout)
	if fs[0].Type != "start" || fs[len(fs)-1].Type != "done" || fs[len(fs)-1].Status != "ok" {
		t.Fatalf("not a canonical stream: %s", r.stdout)
	}

	// Through the kernel's shebang, as the issue writes it.
	sr := runShell(t, `echo '{"message":"shebang"}' | `+w.tool("mcp.everything.echo"))
	if text, _ := toolResult(t, mustOK(t, sr)); !strings.Contains(text, "Echo: shebang") {
		t.Fatalf("echo through the shebang: %s", sr)
	}

	// Invalid input never reaches the server.
	before := countCalls(readTranscript(t, w.transcript), "get-sum")
	r = run(t, runOpts{stdin: `{"a":"one","b":2}`}, w.tool("mcp.everything.get-sum"))
	if _, code := toolResult(t, r); r.code != 2 || code != "EINVAL" {
		t.Fatalf("bad input: want exit 2 EINVAL, got %s", r)
	}
	if after := countCalls(readTranscript(t, w.transcript), "get-sum"); after != before {
		t.Fatalf("the server saw a call that failed validation (%d -> %d)", before, after)
	}

	r = mustOK(t, run(t, runOpts{}, w.tool("mcp.everything.get-structured-content"), `{"location":"Chicago"}`))
	text, _ := toolResult(t, r)
	var out struct {
		Content           []map[string]any `json:"content"`
		StructuredContent struct {
			Temperature float64 `json:"temperature"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil || out.StructuredContent.Temperature != 36 || len(out.Content) == 0 {
		t.Fatalf("structured content: %v\n%s", err, text)
	}

	// get-env shows the server's whole environment: its configured env is
	// there, the daemon's provider key is not.
	r = mustOK(t, run(t, runOpts{}, w.tool("mcp.everything.get-env"), `{}`))
	env, _ := toolResult(t, r)
	if !strings.Contains(env, "EVERYTHING_TOKEN") || strings.Contains(env, daemonKey) || strings.Contains(env, "OPENAI_API_KEY") {
		t.Fatalf("server environment: configured env missing or the daemon's key leaked:\n%s", env)
	}

	// One .d/log line per call, facts only.
	log, _ := os.ReadFile(filepath.Join(w.tool("mcp.everything.get-sum")+".d", "log"))
	if n := strings.Count(string(log), "\n"); n != 2 || !strings.Contains(string(log), "code=EINVAL") || !strings.Contains(string(log), "status=ok") {
		t.Errorf("get-sum .d/log has %d lines (want 2: one ok, one refused with EINVAL):\n%s", n, log)
	}
	origin, _ := os.ReadFile(filepath.Join(w.tool("mcp.everything.get-sum")+".d", "origin"))
	if !strings.Contains(string(origin), "tool=get-sum") || !strings.Contains(string(origin), "server=everything") {
		t.Errorf(".d/origin: %s", origin)
	}

	// The configured secret is nowhere a tool or another user can read.
	filepath.Walk(filepath.Join(w.root, "tool"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), serverSecret) {
				t.Errorf("%s holds the server's configured secret", p)
			}
		}
		return nil
	})
	if strings.Contains(daemonLog(w.d), serverSecret) {
		t.Errorf("the daemon log holds the server's configured secret")
	}
	ls := mustOK(t, sh(t, "ctx", "mcp", "ls", "--root", w.root, "--json"))
	if strings.Contains(ls.stdout, serverSecret) || !strings.Contains(ls.stdout, `"env_keys":["EVERYTHING_TOKEN"]`) || !strings.Contains(ls.stdout, `"state":"ready"`) {
		t.Errorf("ctx mcp ls --json: %s", ls.stdout)
	}
	fi, _ := os.Stat(filepath.Join(w.root, ".mcp.json"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf(".mcp.json mode %v, want 0600 (it holds the env)", fi.Mode())
	}
}

// The server killed in the middle of a call: the call fails with a stable
// code (EHOSTDOWN, exit 69), the tools are unavailable while the daemon
// restarts it with backoff, and it comes back.
func TestMCPServerKilledMidCall(t *testing.T) {
	w := newMCPWorld(t)
	src := findSrc(toolSources(t, w.root), "system", "everything")
	cmd := exec.Command(w.tool("mcp.everything.trigger-long-running-operation"), `{"duration":60,"steps":2}`)
	var out lockedBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "the server to receive the call", func() bool {
		return countCalls(readTranscript(t, w.transcript), "trigger-long-running-operation") == 1
	})
	killGroup(src.PID)
	err := cmd.Wait()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 69 || !strings.Contains(out.String(), `"code":"EHOSTDOWN"`) {
		t.Fatalf("killed mid-call: exit %d, want 69 with EHOSTDOWN:\n%s", code, out.String())
	}
	back := waitSource(t, w.root, "everything", "ready")
	if back.Restarts < 1 || back.PID == src.PID {
		t.Fatalf("not restarted: %+v (was pid %d)", back, src.PID)
	}
	if !strings.Contains(daemonLog(w.d), "restarting") {
		t.Errorf("the daemon did not log the restart")
	}
	r := mustOK(t, run(t, runOpts{}, w.tool("mcp.everything.echo"), `{"message":"back"}`))
	if text, _ := toolResult(t, r); !strings.Contains(text, "Echo: back") {
		t.Fatalf("after restart: %s", r)
	}
	st, _ := os.ReadFile(w.tool("mcp.everything.echo") + ".d/status")
	if strings.TrimSpace(string(st)) != "ready" {
		t.Errorf(".d/status %q after the restart", st)
	}
}

// While no server can run, its tools stay projected and say unavailable;
// a call is EHOSTDOWN (exit 69), never a hang.
func TestMCPUnavailableStatus(t *testing.T) {
	w := newMCPWorld(t)
	w.d.stop(t)
	st, _ := os.ReadFile(w.tool("mcp.everything.echo") + ".d/status")
	if strings.TrimSpace(string(st)) != "unavailable" {
		t.Fatalf(".d/status after cortexfsd stopped: %q", st)
	}
	r := run(t, runOpts{}, w.tool("mcp.everything.echo"), `{"message":"x"}`)
	if _, code := toolResult(t, r); r.code != 69 || code != "EHOSTDOWN" {
		t.Fatalf("call with no daemon: %s", r)
	}
	doc := sh(t, "ctx", "doctor", "--root", w.root)
	if doc.code == 0 || !strings.Contains(doc.stdout, "no cortexfsd answers") {
		t.Errorf("ctx doctor does not flag the unserved tier:\n%s", doc)
	}
}

// Streamable HTTP: the same server over HTTP, added with --url.
func TestMCPStreamableHTTP(t *testing.T) {
	port := freePort(t)
	srv := exec.Command(everythingBin(t), "streamableHttp")
	srv.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	var log lockedBuffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	waitLong(t, "the HTTP server to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	root := newRoot(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	toolDaemon(t, root)
	r := mustOK(t, sh(t, "ctx", "mcp", "add", "web", "--root", root, "--url", url, "--header", "X-Test-Token="+serverSecret))
	if !strings.Contains(r.stdout, "tool/mcp.web.get-sum  (ready)") {
		t.Fatalf("ctx mcp add --url with a daemon running: %s", r)
	}
	r = mustOK(t, run(t, runOpts{stdin: `{"a":40,"b":2}`}, filepath.Join(root, "tool", "mcp.web.get-sum")))
	if text, _ := toolResult(t, r); !strings.Contains(text, "The sum of 40 and 2 is 42.") {
		t.Fatalf("get-sum over HTTP: %s", r)
	}
	ls := mustOK(t, sh(t, "ctx", "mcp", "ls", "--root", root))
	if !strings.Contains(ls.stdout, "web") || !strings.Contains(ls.stdout, "http") || strings.Contains(ls.stdout, serverSecret) {
		t.Errorf("ctx mcp ls: %s", ls.stdout)
	}
	mustOK(t, sh(t, "ctx", "mcp", "rm", "web", "--root", root))
	if _, err := os.Stat(filepath.Join(root, "tool", "mcp.web.get-sum")); err == nil {
		t.Errorf("ctx mcp rm left tool/mcp.web.get-sum")
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Pagination and tools/list_changed end to end, with a server that pages
// two tools at a time and adds one on request: the projection follows
// without a refresh. Names that map to one tool name clash: reported by
// ctx tool sources and ctx doctor, projected for neither.
func TestMCPListChangedAndClashes(t *testing.T) {
	root := newRoot(t)
	toolDaemon(t, root)
	mustOK(t, sh(t, "ctx", "mcp", "add", "fx", "--root", root, "--", mcpFixture(t), "serve"))
	src := waitSource(t, root, "fx", "ready")
	names := map[string]string{}
	for _, tl := range src.Tools {
		names[tl.Original] = tl.Status + " " + tl.Name + " " + tl.Clash
	}
	for _, want := range []string{"echo", "add-tool", "sleep", "fail"} {
		if !strings.HasPrefix(names[want], "ready mcp.fx."+want) {
			t.Errorf("tool %s: %q (all pages listed?)", want, names[want])
		}
	}
	for _, clash := range []string{"x/y", "x:y"} {
		if !strings.HasPrefix(names[clash], "clash") {
			t.Errorf("tool %s should clash: %q", clash, names[clash])
		}
	}
	if _, err := os.Stat(filepath.Join(root, "tool", "mcp.fx.x-y")); err == nil {
		t.Errorf("a clashing name was projected")
	}
	doc := sh(t, "ctx", "doctor", "--root", root, "--json")
	if doc.code == 0 || !strings.Contains(doc.stdout, "tool clash") {
		t.Errorf("ctx doctor does not report the clash:\n%s", doc.stdout)
	}

	mustOK(t, run(t, runOpts{}, filepath.Join(root, "tool", "mcp.fx.add-tool"), `{}`))
	added := filepath.Join(root, "tool", "mcp.fx.added-1")
	waitLong(t, "list_changed to project mcp.fx.added-1", func() bool { _, err := os.Stat(added); return err == nil })
	r := mustOK(t, run(t, runOpts{}, added, `{}`))
	if text, _ := toolResult(t, r); !strings.Contains(text, "added-1 ran") {
		t.Fatalf("the added tool: %s", r)
	}

	// An error result is the tool's result, not a transport failure.
	r = run(t, runOpts{}, filepath.Join(root, "tool", "mcp.fx.fail"), `{}`)
	text, code := toolResult(t, r)
	if r.code != 1 || code != "EREMOTEIO" || !strings.Contains(text, "the tool failed") {
		t.Fatalf("error result: want exit 1, EREMOTEIO and the content:\n%s", r)
	}

	// A hand-made tool of a projected name is never overwritten.
	mustOK(t, sh(t, "ctx", "mcp", "rm", "fx", "--root", root))
	hand := filepath.Join(root, "tool", "mcp.fx.echo")
	os.WriteFile(hand, []byte("#!"+applet("cortexfs-object-runner")+"\ncortexfs.object=tool\nname=mcp.fx.echo\n"), 0o755)
	mustOK(t, sh(t, "ctx", "mcp", "add", "fx", "--root", root, "--", mcpFixture(t), "serve"))
	src = waitSource(t, root, "fx", "ready")
	clashed := false
	for _, tl := range src.Tools {
		clashed = clashed || tl.Original == "echo" && tl.Status == "clash" && strings.Contains(tl.Clash, "already exists")
	}
	b, _ := os.ReadFile(hand)
	if !clashed || strings.Contains(string(b), "source=") {
		t.Fatalf("hand-made tool/mcp.fx.echo: clash reported=%v, content now:\n%s", clashed, b)
	}
}
