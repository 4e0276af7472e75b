package t

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Issue 16, "one voice": one error format, help for every group, global
// flags before the command, did-you-mean, one JSON envelope, completion.

// errLine is the one stderr format: "APPLET: message (CODE)".
var errLine = regexp.MustCompile(`^([a-z-]+): (.+) \((E[A-Z]+)\)$`)

// oneError asserts r failed with exit, one stderr line in the one format
// from applet with code, and returns the message.
func oneError(t *testing.T, r result, applet, code string, exit int) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.code != exit || len(lines) != 1 || r.stdout != "" {
		t.Fatalf("want exit %d and one stderr line, got:\n%s", exit, r)
	}
	m := errLine.FindStringSubmatch(lines[0])
	if m == nil || m[1] != applet || m[3] != code {
		t.Fatalf("stderr %q is not %q: … (%s)", lines[0], applet, code)
	}
	if regexp.MustCompile(`^` + regexp.QuoteMeta(applet) + `( [a-z-]+)*: `).MatchString(m[2]) {
		t.Errorf("doubled prefix in %q", lines[0])
	}
	return m[2]
}

// helpCommands parses the "commands:" section of a group's help.
func helpCommands(t *testing.T, out string) map[string]string {
	t.Helper()
	cmds := map[string]string{}
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.TrimSpace(l) == "commands:":
			in = true
		case in && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   "):
			f := strings.Fields(l)
			cmds[f[0]] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), f[0]))
		case in && strings.TrimSpace(l) == "":
			if len(cmds) > 0 {
				in = false
			}
		}
	}
	return cmds
}

// TestHelpEveryGroupAndCommand walks every applet's help the way a user
// does: a group lists its commands with a one-line description and exits
// 0 (bare, --help and `help`), a command's --help exits 0 and spells its
// flags --flag.
func TestHelpEveryGroupAndCommand(t *testing.T) {
	home := cbthHome(t, "")
	env := []string{"CBTH_HOME=" + home, "CTX_ROOT=" + filepath.Join(t.TempDir(), "none")}
	top := mustOK(t, sh(t, "cortexfs", "--help"))
	for _, a := range listApplets(t) {
		if strings.Count(top.stdout, "\n  "+a+" ") != 1 && a != "cortexfs" {
			t.Errorf("cortexfs --help lists %s %d times, want once:\n%s", a, strings.Count(top.stdout, "\n  "+a+" "), top.stdout)
		}
	}
	for _, app := range []string{"cbth", "ctx"} {
		var walk func(path []string)
		walk = func(path []string) {
			args := append(slices.Clone(path), "--help")
			r := run(t, runOpts{env: env}, applet(app), args...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: ") {
				t.Errorf("%s %v: want usage and exit 0, got:\n%s", app, args, r)
				return
			}
			if regexp.MustCompile(`(?m)^\s+-[a-z]`).MatchString(r.stdout) {
				t.Errorf("%s %v spells a flag -flag, README spells --flag:\n%s", app, args, r.stdout)
			}
			cmds := helpCommands(t, r.stdout)
			if !strings.Contains(r.stdout, "\ncommands:\n") {
				return // a command, not a group
			}
			for _, how := range [][]string{path, append([]string{"help"}, path...)} {
				b := run(t, runOpts{env: env}, applet(app), how...)
				if b.code != 0 || b.stdout != r.stdout {
					t.Errorf("%s %v: want the same listing as --help and exit 0, got:\n%s", app, how, b)
				}
			}
			for name, desc := range cmds {
				if desc == "" || strings.Contains(desc, "\n") {
					t.Errorf("%s %v: command %s has no one-line description", app, path, name)
				}
				walk(append(slices.Clone(path), name))
			}
		}
		walk(nil)
	}
	// ctx help CMD is ctx CMD --help.
	a, b := sh(t, "ctx", "help", "init"), sh(t, "ctx", "init", "--help")
	if a.code != 0 || a.stdout != b.stdout || !strings.Contains(a.stdout, "--root") {
		t.Errorf("ctx help init differs from ctx init --help:\n%s\n%s", a, b)
	}
	mustOK(t, sh(t, "cbth", "help", "job", "submit"))
}

// TestGlobalFlagsBeforeTheCommand: --home, --root and --json work where
// users type them, before the command word.
func TestGlobalFlagsBeforeTheCommand(t *testing.T) {
	home := cbthHome(t, "")
	r := run(t, runOpts{env: []string{"CBTH_HOME=/nonexistent-should-not-be-used"}}, applet("cbth"),
		"--home", home, "--json", "job", "list")
	var l struct {
		OK    bool
		Items []any
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil || !l.OK || l.Items == nil {
		t.Fatalf("cbth --home DIR --json job list:\n%s", r)
	}
	mustOK(t, sh(t, "cbth", "--home="+home, "daemon", "status"))
	root := newRoot(t)
	for _, args := range [][]string{{"--root", root, "ls"}, {"--json", "--root", root, "status"}, {"--root=" + root, "model", "ls"}} {
		mustOK(t, run(t, runOpts{env: []string{"CTX_ROOT=/nonexistent"}}, applet("ctx"), args...))
	}
	js := mustOK(t, sh(t, "ctx", "--json", "--root", root, "ls"))
	if !strings.HasPrefix(js.stdout, `{"ok":true,"items":[`) {
		t.Errorf("ctx --json --root R ls: %s", js.stdout)
	}
}

// TestErrorsOneVoice: every error is one line "APPLET: message (CODE)",
// hints name the full command, required flags are reported together and a
// mistyped command or flag gets a suggestion.
func TestErrorsOneVoice(t *testing.T) {
	home := cbthHome(t, "")
	msg := oneError(t, cbth(t, home, "job", "submit", "--thread-id", "x"), "cbth", "EINVAL", 2)
	if !strings.Contains(msg, "--target, --task-kind, --summary") || !strings.Contains(msg, "see cbth job submit --help") {
		t.Errorf("missing flags not named at once, or the hint is not the full command: %q", msg)
	}
	if msg := oneError(t, cbth(t, home, "jbo", "list"), "cbth", "EINVAL", 2); !strings.Contains(msg, "did you mean cbth job?") {
		t.Errorf("no suggestion: %q", msg)
	}
	if msg := oneError(t, cbth(t, home, "job", "lsit"), "cbth", "EINVAL", 2); !strings.Contains(msg, "did you mean cbth job list?") {
		t.Errorf("no suggestion: %q", msg)
	}
	if msg := oneError(t, cbth(t, home, "job", "submit", "--tagret", "cli"), "cbth", "EINVAL", 2); !strings.Contains(msg, "did you mean --target?") {
		t.Errorf("no flag suggestion: %q", msg)
	}
	if msg := oneError(t, sh(t, "ctx", "sned"), "ctx", "EINVAL", 2); !strings.Contains(msg, "did you mean ctx send?") {
		t.Errorf("no suggestion: %q", msg)
	}
	if msg := oneError(t, sh(t, "cortexfs", "cbht"), "cortexfs", "EINVAL", 2); !strings.Contains(msg, "did you mean cbth?") {
		t.Errorf("no applet suggestion: %q", msg)
	}
	// Through the multiplexer the applet still speaks for itself, once.
	if msg := oneError(t, sh(t, "cortexfs", "ctx", "send"), "ctx", "EINVAL", 2); !strings.Contains(msg, "see ctx send --help") {
		t.Errorf("hint without the full command: %q", msg)
	}
	for _, c := range [][]string{{"ctx", "model", "frobnicate"}, {"ctx", "agent", "nope"}, {"ctx", "init", "extra"}, {"ctx-agent", "start"}} {
		oneError(t, sh(t, c[0], c[1:]...), c[0], "EINVAL", 2)
	}
	// JSON mode: the same error as an object, nothing on stderr.
	r := cbth(t, home, "jbo", "--json")
	var e struct {
		OK    bool
		Error struct{ Code, Message string }
	}
	if r.code != 2 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &e) != nil || e.OK || e.Error.Code != "EINVAL" {
		t.Errorf("unknown command with --json:\n%s", r)
	}
}

// TestCompletionScripts: cortexfs completion bash|zsh|fish come from the
// command tables; bash is exercised for real, zsh and fish when present.
func TestCompletionScripts(t *testing.T) {
	dir := t.TempDir()
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := mustOK(t, run(t, runOpts{}, applet("cortexfs"), "completion", sh))
		if err := os.WriteFile(filepath.Join(dir, sh), []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oneError(t, sh(t, "cortexfs", "completion", "tcsh"), "cortexfs", "EINVAL", 2)
	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		script := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _cortexfs_complete; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", append([]string{"-c", script, "x", filepath.Join(dir, "bash")}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion of %q: %v\n%s", line, err, out)
		}
		return strings.Fields(string(out))
	}
	for _, c := range []struct {
		line string
		want []string
	}{
		{"cbth jo", []string{"job"}},
		{"cbth job ", []string{"submit", "complete", "fail", "cancel", "query", "list"}},
		{"cbth --home /tmp/h job sub", []string{"submit"}},
		{"cbth job submit --thread", []string{"--thread-id"}},
		{"cbth cli session ", []string{"list", "inspect"}},
		{"cortexfs cbth batch inspect-h", []string{"inspect-head"}},
		{"cortexfs cb", []string{"cbth"}},
		{"ctx mo", []string{"model"}},
		{"ctx model add --dri", []string{"--driver"}},
		{"/usr/local/bin/ctx in", []string{"init"}},
	} {
		got := complete(c.line)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("completing %q: got %v, want %s among them", c.line, got, w)
			}
		}
	}
	// make install puts them where bash-completion, zsh and fish look,
	// under every applet name.
	dest := t.TempDir()
	out, err := exec.Command("make", "-s", "-C", repoRoot, "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+binPath,
		"-o", binPath).CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"bash-completion/completions/cbth", "bash-completion/completions/ctx", "zsh/site-functions/_cortexfs",
		"fish/vendor_completions.d/cortexfs.fish", "fish/vendor_completions.d/ctx.fish"} {
		b, err := os.ReadFile(filepath.Join(dest, "usr/share", f))
		if err != nil || !strings.Contains(string(b), "cbth") {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
	if zsh, err := exec.LookPath("zsh"); err == nil {
		if out, err := exec.Command(zsh, "-n", filepath.Join(dir, "zsh")).CombinedOutput(); err != nil {
			t.Errorf("zsh -n: %v\n%s", err, out)
		}
	} else {
		t.Log("zsh not installed: the zsh script is only generated, not parsed (apt-get install zsh)")
	}
	if fish, err := exec.LookPath("fish"); err == nil {
		if out, err := exec.Command(fish, "-n", filepath.Join(dir, "fish")).CombinedOutput(); err != nil {
			t.Errorf("fish -n: %v\n%s", err, out)
		}
		out, err := exec.Command(fish, "-c", "source "+filepath.Join(dir, "fish")+"; complete -C 'cbth job su'").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "submit") {
			t.Errorf("fish completing 'cbth job su': %v\n%s", err, out)
		}
	} else {
		t.Log("fish not installed: the fish script is only generated, not parsed (apt-get install fish)")
	}
}
