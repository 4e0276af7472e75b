package t

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/t/fake"
)

// providerKey is the sentinel credential of the fake provider "fake".
const providerKey = "sk-SENTINEL-c0rt3xfs-9f8e7d6c5b4a"

var keyEnv = []string{"FAKE_API_KEY=" + providerKey}

// addModel runs ctx model add against root with the installed runner.
func addModel(t *testing.T, root string, args ...string) {
	t.Helper()
	args = append([]string{"model", "add", "--root", root, "--runner", applet("cortexfs-object-runner")}, args...)
	mustOK(t, sh(t, "ctx", args...))
}

// modelPath is root/model/<id>.
func modelPath(root, id string) string { return filepath.Join(root, "model", filepath.FromSlash(id)) }

// checkText asserts a successful stream whose assistant text is want.
func checkText(t *testing.T, r result, model, want string) []frame {
	t.Helper()
	mustOK(t, r)
	fs := parseFrames(t, r.stdout)
	var deltas strings.Builder
	for _, f := range fs {
		if f.Type == "delta" {
			deltas.WriteString(f.Text)
		}
	}
	if len(fs) < 4 || fs[0].Type != "start" || fs[0].Model != model || fs[len(fs)-1].Status != "ok" || deltas.String() != want {
		t.Fatalf("%s: want start…done ok with text %q, got %s", model, want, r.stdout)
	}
	return fs
}

// Every driver through the installed binary and the kernel's shebang:
// R/model/fake/<driver> hello against the fake speaking that format.
func TestProviderDriversThroughShebang(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	for _, k := range fake.Kinds {
		addModel(t, root, "fake/"+string(k), "--driver", string(k), "--base-url", srv.BaseURL(k), "--id", "text")
		fs := checkText(t, run(t, runOpts{env: keyEnv}, modelPath(root, "fake/"+string(k)), "hello"), "fake/"+string(k), "hello")
		if got := types(fs); got != "start,delta,delta,message,usage,done" {
			t.Errorf("%s: frames %s", k, got)
		}
		reqs := srv.Requests()
		if last := reqs[len(reqs)-1]; last.Kind != k || !bytes.Contains(last.Body, []byte("hello")) {
			t.Errorf("%s: the fake saw %s %s", k, last.Kind, last.Path)
		}
	}
	// Tools in the JSON input reach the provider in its own format, and a
	// one-shot run emits tool_call events (nothing executes them).
	for _, k := range fake.Kinds {
		addModel(t, root, "fake/"+string(k)+"-tool", "--driver", string(k), "--base-url", srv.BaseURL(k), "--id", "tool")
		in := `{"messages":[{"role":"user","content":"read it"}],"tools":[{"name":"fs.read","parameters":{"type":"object"}},{"name":"fs.list"}]}`
		r := mustOK(t, run(t, runOpts{env: keyEnv, stdin: in}, modelPath(root, "fake/"+string(k)+"-tool")))
		if !strings.Contains(r.stdout, `"type":"tool_call"`) || !strings.Contains(r.stdout, `"name":"fs.read","arguments":{"path":"README"}`) {
			t.Errorf("%s: no decoded tool_call in %s", k, r.stdout)
		}
	}
}

// An unconfigured provider fails with ENOKEY, exit 69, before anything is
// sent.
func TestProviderUnconfiguredIsENOKEY(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	for _, k := range fake.Kinds[:4] {
		addModel(t, root, "nokey/"+string(k), "--driver", string(k), "--base-url", srv.BaseURL(k))
		r := run(t, runOpts{env: []string{"NOKEY_API_KEY="}}, modelPath(root, "nokey/"+string(k)), "hello")
		fs := parseFrames(t, r.stdout)
		if r.code != 69 || types(fs) != "start,error,done" || fs[1].Code != "ENOKEY" || !strings.Contains(fs[1].Message, "NOKEY_API_KEY") {
			t.Errorf("%s: want ENOKEY exit 69, got %s", k, r)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the fake saw %d requests from unconfigured models", n)
	}
	// A host-named provider reads <HOST>_API_KEY.
	addModel(t, root, "hosted", "--driver", "openai-chat", "--base-url", strings.Replace(srv.BaseURL(fake.OpenAIChat), "127.0.0.1", "localhost", 1))
	checkText(t, run(t, runOpts{env: []string{"LOCALHOST_API_KEY=" + providerKey}}, modelPath(root, "localhost/hosted"), "hello"), "localhost/hosted", "hello")
}

// HTTP statuses and transport failures map to stable codes and exit codes;
// a stream cut mid-way is an error frame then done status error.
func TestProviderErrorsMapToStableCodes(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	cases := []struct {
		scenario, code string
		exit           int
		partial        bool
	}{
		{"e401", "EACCES", 13, false}, {"e429", "EBUSY", 69, false}, {"e500", "EHOSTDOWN", 69, false},
		{"missing", "ENOENT", 1, false}, {"truncated", "EHOSTDOWN", 69, true}, {"cut", "EHOSTDOWN", 69, true},
		{"error", "EHOSTDOWN", 69, true}, {"slow", "ETIMEDOUT", 69, false},
	}
	for _, c := range cases {
		id := "fake/" + c.scenario
		addModel(t, root, id, "--driver", "openai-chat", "--base-url", srv.BaseURL(fake.OpenAIChat))
		if c.scenario == "slow" {
			appendFile(t, modelPath(root, id)+".d/default", "idle_timeout_ms=300\n")
		}
		r := run(t, runOpts{env: keyEnv}, modelPath(root, id), "hello")
		fs := parseFrames(t, r.stdout)
		n := len(fs)
		if r.code != c.exit || n < 3 || fs[n-2].Type != "error" || fs[n-2].Code != c.code || fs[n-1].Status != "error" ||
			c.partial != strings.Contains(types(fs), "delta") {
			t.Errorf("%s: want %s exit %d (partial %v), got %s", c.scenario, c.code, c.exit, c.partial, r)
		}
		log := mustReadFile(t, modelPath(root, id)+".d/log")
		if !strings.Contains(log, "code="+c.code) {
			t.Errorf("%s: .d/log lacks code=%s: %s", c.scenario, c.code, log)
		}
	}
	addModel(t, root, "fake/refused", "--driver", "ollama", "--base-url", "http://127.0.0.1:1")
	if r := run(t, runOpts{}, modelPath(root, "fake/refused"), "hello"); r.code != 69 || !strings.Contains(r.stdout, `"code":"EHOSTDOWN"`) {
		t.Errorf("refused: want EHOSTDOWN exit 69, got %s", r)
	}
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// A route falls back to its next driver when the endpoint does not speak
// the first one (404 on the Responses path), and .d/log shows the choice;
// .d/default applies with per-call overrides.
func TestProviderRouteFallbackAndDefaults(t *testing.T) {
	srv := fake.New()
	srv.NoResponses = true
	defer srv.Close()
	root := newRoot(t)
	addModel(t, root, "fake/routed", "--driver", "default=openai-chat;exec=openai-responses,openai-chat", "--base-url", srv.BaseURL(fake.OpenAIChat), "--id", "text")
	appendFile(t, modelPath(root, "fake/routed")+".d/default", "temperature=0.25\nmax_tokens=77\n")
	checkText(t, run(t, runOpts{env: keyEnv, stdin: `{"messages":[{"role":"user","content":"hello"}],"params":{"temperature":0.75}}`},
		modelPath(root, "fake/routed")), "fake/routed", "hello")
	log := mustReadFile(t, modelPath(root, "fake/routed")+".d/log")
	if !strings.Contains(log, "status=ok") || !strings.Contains(log, "driver=openai-responses(ENOTSUP),openai-chat") {
		t.Errorf(".d/log does not show the fallback: %s", log)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Kind != fake.OpenAIResponses || reqs[1].Kind != fake.OpenAIChat {
		t.Fatalf("want a Responses then a Chat request, got %+v", reqs)
	}
	var body struct {
		Temperature float64 `json:"temperature"`
		MaxTokens   int     `json:"max_tokens"`
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil || body.Temperature != 0.75 || body.MaxTokens != 77 {
		t.Errorf("parameters not applied: %s", reqs[1].Body)
	}
	if native := mustReadFile(t, modelPath(root, "fake/routed")+".d/native"); !strings.Contains(native, "endpoint=openai-chat") {
		t.Errorf(".d/native = %q", native)
	}
}

// refresh fills objects from each provider's listing; ls shows them with
// where the credential comes from.
func TestProviderModelRefreshAndLs(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	for _, c := range []struct {
		prov   string
		kind   fake.Kind
		id     string
		fields []string
	}{
		{"oa", fake.OpenAIChat, "oa/gpt-4o", []string{"id=gpt-4o", "type=chat", "created_at=2024-05-10T18:50:49Z", "owned_by=system"}},
		{"an", fake.Anthropic, "an/claude-sonnet-4-20250514", []string{"name=Claude Sonnet 4", "created_at=2025-05-22T00:00:00Z"}},
		{"gm", fake.Gemini, "gm/gemini-2.5-pro", []string{"name=Gemini 2.5 Pro", "description=Stable release of Gemini 2.5 Pro", "context_length=1048576"}},
		{"ol", fake.Ollama, "ol/llama3.2-latest", []string{"id=llama3.2:latest", "description=llama 3.2B"}},
	} {
		r := run(t, runOpts{env: []string{strings.ToUpper(c.prov) + "_API_KEY=" + providerKey}}, applet("ctx"), "model", "refresh", c.prov,
			"--root", root, "--driver", string(c.kind), "--base-url", srv.BaseURL(c.kind), "--json")
		mustOK(t, r)
		meta := mustReadFile(t, modelPath(root, c.id))
		for _, f := range c.fields {
			if !strings.Contains(meta, "\n"+f+"\n") {
				t.Errorf("%s: metadata lacks %q:\n%s", c.id, f, meta)
			}
		}
		if !strings.HasPrefix(meta, "#!"+applet("cortexfs-object-runner")+"\ncortexfs.object=model\nid=") {
			t.Errorf("%s: object file:\n%s", c.id, meta)
		}
	}
	r := mustOK(t, run(t, runOpts{env: []string{"OA_API_KEY=" + providerKey}}, applet("ctx"), "model", "ls", "--root", root, "--json"))
	var rows []map[string]string
	if err := fromEnvelope([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, r.stdout)
	}
	cred := map[string]string{}
	for _, row := range rows {
		cred[row["id"]] = row["credential"]
	}
	if cred["oa/gpt-4o"] != "env" || cred["an/claude-sonnet-4-20250514"] != "none" || cred["debug/echo"] != "not_needed" {
		t.Errorf("ls credentials: %v", cred)
	}
	if strings.Contains(r.stdout, providerKey) {
		t.Fatal("ctx model ls printed the key")
	}
}

// The sentinel key never lands in the tree, logs, events, error messages
// or any output: one-shot runs, provider errors that echo the key, a
// socket session through cortexfsd, listings.
func TestProviderSentinelSecret(t *testing.T) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	var outputs bytes.Buffer
	for _, sc := range []string{"text", "tool", "e401", "error", "truncated"} {
		addModel(t, root, "fake/"+sc, "--driver", "openai-chat", "--base-url", srv.BaseURL(fake.OpenAIChat), "--id", sc)
		r := run(t, runOpts{env: keyEnv}, modelPath(root, "fake/"+sc), "hello")
		outputs.WriteString(r.stdout + r.stderr)
	}
	addModel(t, root, "fake/anth", "--driver", "anthropic-messages", "--base-url", srv.BaseURL(fake.Anthropic), "--id", "e401")
	r := run(t, runOpts{env: keyEnv}, modelPath(root, "fake/anth"), "--text", "hello")
	outputs.WriteString(r.stdout + r.stderr)
	addModel(t, root, "fake/chat", "--driver", "openai-chat", "--base-url", srv.BaseURL(fake.OpenAIChat), "--id", "text", "--session", "socket")
	r = run(t, runOpts{env: keyEnv}, applet("ctx"), "model", "refresh", "fake", "--root", root, "--json")
	outputs.WriteString(r.stdout + r.stderr)

	// A socket session: cortexfsd holds the key in its environment.
	var derr bytes.Buffer
	cmd := exec.Command(applet("cortexfsd"), "--root", root)
	cmd.Env, cmd.Stderr = append(os.Environ(), keyEnv...), &derr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{root: root, cmd: cmd, sock: modelPath(root, "fake/chat") + ".sock"}
	defer d.stop(t)
	waitSock(t, d.sock)
	c := dial(t, d.sock)
	for i, in := range []string{"first", "second"} {
		c.send(sendReq("m"+string(rune('1'+i)), "s1", in))
		fs := c.untilDone()
		if fs[len(fs)-1].Status != "ok" {
			t.Fatalf("socket turn %d: %+v", i, fs)
		}
	}
	// The second turn replayed the first (CortexFS history, not native).
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1].Body; !bytes.Contains(last, []byte("first")) || !bytes.Contains(last, []byte(`"role":"assistant"`)) {
		t.Errorf("socket turn 2 did not replay the session: %s", last)
	}
	d.stop(t)
	outputs.Write(derr.Bytes())

	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+providerKey {
		t.Fatalf("the key was not used: %q", got)
	}
	if bytes.Contains(outputs.Bytes(), []byte(providerKey)) || bytes.Contains(outputs.Bytes(), []byte(providerKey[3:15])) {
		t.Errorf("an output holds the sentinel:\n%s", outputs.String())
	}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || strings.HasPrefix(p, filepath.Join(root, "bin")) {
			return nil
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(providerKey)) || bytes.Contains(b, []byte(providerKey[3:15])) {
			t.Errorf("%s holds the sentinel", p)
		}
		return nil
	})
}

func waitSock(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
