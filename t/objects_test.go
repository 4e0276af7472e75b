package t

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// frame is the subset of a canonical JSONL frame the tests look at.
type frame struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Run     string `json:"run"`
	Model   string `json:"model"`
	Tool    string `json:"tool"`
	Text    string `json:"text"`
	Role    string `json:"role"`
	Name    string `json:"name"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	InputTokens  *int   `json:"input_tokens"`
	OutputTokens *int   `json:"output_tokens"`
	Code         string `json:"code"`
	Message      string `json:"message"`
	Status       string `json:"status"`
}

func parseFrames(t *testing.T, out string) []frame {
	t.Helper()
	var fs []frame
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 2<<20)
	for sc.Scan() {
		var f frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", sc.Text(), err)
		}
		fs = append(fs, f)
	}
	return fs
}

func types(fs []frame) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Type)
	}
	return strings.Join(s, ",")
}

// newRoot runs ctx init into a fresh temp root with the installed runner.
func newRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ctx")
	mustOK(t, sh(t, "ctx", "init", "--root", root, "--runner", applet("cortexfs-object-runner")))
	return root
}

// checkEcho asserts a full echo stream whose text is want.
func checkEcho(t *testing.T, r result, want string) {
	t.Helper()
	mustOK(t, r)
	fs := parseFrames(t, r.stdout)
	if len(fs) < 5 || fs[0].Type != "start" || fs[len(fs)-1].Type != "done" {
		t.Fatalf("want start…done, got %s", types(fs))
	}
	run := fs[0].Run
	var deltas strings.Builder
	var msg string
	sawUsage := false
	for _, f := range fs {
		if f.Run != run || run == "" {
			t.Fatalf("frame %s has run %q, want %q", f.Type, f.Run, run)
		}
		switch f.Type {
		case "delta":
			deltas.WriteString(f.Text)
		case "message":
			if f.Role != "assistant" || len(f.Content) != 1 || f.Content[0].Type != "text" {
				t.Fatalf("bad message frame %+v", f)
			}
			msg = f.Content[0].Text
		case "usage":
			sawUsage = f.InputTokens != nil && f.OutputTokens != nil && *f.OutputTokens > 0
		}
	}
	if fs[0].Model != "debug/echo" || deltas.String() != want || msg != want || !sawUsage || fs[len(fs)-1].Status != "ok" {
		t.Fatalf("echo stream wrong (model %q, deltas %q, message %q, usage %v): %s", fs[0].Model, deltas.String(), msg, sawUsage, r.stdout)
	}
}

// The objects acceptance: ctx init, then the echo model through the kernel's
// shebang handling, with argv, stdin text and stdin JSON, and via an alias.
func TestObjectsEchoThroughShebang(t *testing.T) {
	root := newRoot(t)
	echo := filepath.Join(root, "model", "debug", "echo")
	checkEcho(t, run(t, runOpts{}, echo, "hello"), "hello")
	checkEcho(t, run(t, runOpts{stdin: "hello\n"}, echo), "hello")
	checkEcho(t, run(t, runOpts{stdin: `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`}, echo), "hello")
	checkEcho(t, run(t, runOpts{}, echo, "hello", "big", "world"), "hello big world")

	main := filepath.Join(root, "model", "main")
	checkEcho(t, run(t, runOpts{}, main, "hello"), "hello")
	target, err := os.Readlink(main)
	if err != nil || filepath.Join(filepath.Dir(main), target) != echo {
		t.Errorf("model/main readlink = %q (%v), want an alias of debug/echo", target, err)
	}
	// The log got one short line per call, without the prompt.
	log, _ := os.ReadFile(filepath.Join(root, "model", "debug", "echo.d", "log"))
	if n := strings.Count(string(log), "\n"); n != 5 || strings.Contains(string(log), "hello") || !strings.Contains(string(log), "status=ok") {
		t.Errorf(".d/log has %d lines or leaks the prompt:\n%s", n, log)
	}
}

func TestObjectsAreMetadataNotCode(t *testing.T) {
	root := newRoot(t)
	runnerPath := applet("cortexfs-object-runner")
	for _, p := range []string{"model/debug/echo", "tool/fs.read", "tool/fs.write", "tool/shell.exec"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if lines[0] != "#!"+runnerPath {
			t.Errorf("%s: first line %q, want #!%s", p, lines[0], runnerPath)
		}
		for _, l := range lines[1:] {
			if !strings.Contains(l, "=") || strings.ContainsAny(l, "$`;|&") {
				t.Errorf("%s: line %q is not key=value metadata", p, l)
			}
		}
		fi, _ := os.Stat(filepath.Join(root, p))
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s mode %v, want 0755", p, fi.Mode())
		}
		for _, ctl := range []string{"status", "log"} {
			cfi, err := os.Stat(filepath.Join(root, p+".d", ctl))
			if err != nil || cfi.Mode().Perm() != 0o644 {
				t.Errorf("%s.d/%s: %v %v, want 0644", p, ctl, cfi, err)
			}
		}
	}
	if !strings.Contains(mustReadFile(t, filepath.Join(root, "model/debug/echo")), "cortexfs.object=model") {
		t.Error("echo object does not declare its class")
	}
	for _, f := range []string{"id", "driver", "cap", "default", "session", "status", "log"} {
		if _, err := os.Stat(filepath.Join(root, "model/debug/echo.d", f)); err != nil {
			t.Errorf("model/debug/echo.d/%s missing", f)
		}
	}
	for _, f := range []string{"name", "description", "schema", "cap", "policy", "status", "log"} {
		if _, err := os.Stat(filepath.Join(root, "tool/fs.read.d", f)); err != nil {
			t.Errorf("tool/fs.read.d/%s missing", f)
		}
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mustReadFile(t, filepath.Join(root, "tool/fs.read.d/schema"))), &schema); err != nil || schema["input"] == nil || schema["output"] == nil {
		t.Errorf("tool schema is not {input,output} JSON Schema: %v", err)
	}
	for _, d := range []string{"agent", "shared", "bin", "home/" + strconv.Itoa(os.Getuid()) + "/tool"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory", d)
		}
	}
}

func TestObjectsInitIsIdempotentAndKeepsEdits(t *testing.T) {
	root := newRoot(t)
	def := filepath.Join(root, "model/debug/echo.d/default")
	if err := os.WriteFile(def, []byte("repeat=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, run(t, runOpts{}, applet("ctx"), "init", "--root", root, "--runner", applet("cortexfs-object-runner"), "--json"))
	var out struct {
		Counts  map[string]int
		Changes []struct{ Path, Action, Reason string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Counts["created"] != 0 || out.Counts["left_alone"] != 1 {
		t.Errorf("second init: %v", out.Counts)
	}
	for _, c := range out.Changes {
		if c.Action == "left_alone" && c.Path != def {
			t.Errorf("left alone unexpectedly: %+v", c)
		}
	}
	if got := mustReadFile(t, def); got != "repeat=2\n" {
		t.Errorf("user edit of .d/default lost: %q", got)
	}
	// And the edit applies: echo now repeats.
	checkEcho(t, run(t, runOpts{}, filepath.Join(root, "model/debug/echo"), "hi "), "hi hi ")
}

func TestObjectsExitCodes(t *testing.T) {
	root := newRoot(t)
	echo := filepath.Join(root, "model/debug/echo")
	r := run(t, runOpts{stdin: `{"messages": [`}, echo)
	if r.code != 2 {
		t.Errorf("bad JSON on stdin: want exit 2, got %s", r)
	}
	if fs := parseFrames(t, r.stdout); len(fs) < 2 || fs[len(fs)-2].Code != "EINVAL" || fs[len(fs)-1].Status != "error" {
		t.Errorf("bad JSON: want error frame EINVAL then done error: %s", r.stdout)
	}
	// Not executable: the kernel refuses (126 from exec is EACCES; Go reports
	// the exec error), and the runner invoked directly says EACCES, exit 13.
	if err := os.Chmod(echo, 0o644); err != nil {
		t.Fatal(err)
	}
	// (root passes access(X_OK) only when some x bit is set; none is.)
	r = run(t, runOpts{}, applet("cortexfs-object-runner"), echo, "hi")
	if r.code != 13 || !strings.Contains(r.stderr, "not executable") {
		t.Errorf("runner on a non-executable object: want exit 13 EACCES, got %s", r)
	}
	if r := runShell(t, echo+" hi; echo status=$?"); !strings.Contains(r.stdout, "status=126") {
		t.Errorf("kernel exec of a non-executable object: %s", r)
	}
	os.Chmod(echo, 0o755)

	// Missing required field: exit 2 with a JSONL error frame.
	r = run(t, runOpts{}, filepath.Join(root, "tool/fs.read"), `{"offset":1}`)
	fs := parseFrames(t, r.stdout)
	if r.code != 2 || len(fs) < 3 || fs[0].Type != "start" || fs[0].Tool != "fs.read" || fs[1].Code != "EINVAL" || fs[2].Status != "error" {
		t.Errorf("tool call missing required field: want exit 2 + error frame, got %s", r)
	}
	// A missing object.
	if r := run(t, runOpts{}, applet("cortexfs-object-runner"), filepath.Join(root, "model/debug/nope")); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("missing object: %s", r)
	}
}

func TestObjectsBuiltinTools(t *testing.T) {
	root := newRoot(t)
	dir := t.TempDir()
	fsWrite, fsRead, shellExec := filepath.Join(root, "tool/fs.write"), filepath.Join(root, "tool/fs.read"), filepath.Join(root, "tool/shell.exec")
	target := filepath.Join(dir, "note.txt")
	r := mustOK(t, run(t, runOpts{stdin: `{"path":"` + target + `","content":"line one\n"}`}, fsWrite))
	if got := mustReadFile(t, target); got != "line one\n" {
		t.Fatalf("fs.write wrote %q", got)
	}
	r = mustOK(t, run(t, runOpts{dir: dir}, fsRead, `{"path":"note.txt"}`)) // relative to the caller's cwd
	fs := parseFrames(t, r.stdout)
	if types(fs) != "start,message,done" || fs[1].Role != "tool" || !strings.Contains(fs[1].Content[0].Text, `"content":"line one\n"`) {
		t.Fatalf("fs.read result: %s", r.stdout)
	}
	r = run(t, runOpts{}, shellExec, `{"cmd":"echo out; echo err >&2; exit 3"}`)
	fs = parseFrames(t, r.stdout)
	mustOK(t, r)
	var res struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if err := json.Unmarshal([]byte(fs[1].Content[0].Text), &res); err != nil || res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("shell.exec result %+v (%v): %s", res, err, r.stdout)
	}
	r = run(t, runOpts{}, fsRead, `{"path":"`+filepath.Join(dir, "missing")+`"}`)
	if fs := parseFrames(t, r.stdout); r.code != 1 || fs[1].Code != "ENOENT" {
		t.Errorf("fs.read of a missing file: want ENOENT exit 1, got %s", r)
	}
}

func mustReadFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
