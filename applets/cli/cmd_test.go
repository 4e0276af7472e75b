package cli

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/core/abi"
)

func TestEnvelope(t *testing.T) {
	type obj struct {
		ID string `json:"id"`
	}
	type withOK struct {
		OK bool `json:"ok"`
	}
	var nilList []string
	for _, c := range []struct {
		ok   bool
		v    any
		want string
	}{
		{true, obj{"j1"}, `{"ok":true,"id":"j1"}`},
		{true, &obj{"<&>"}, `{"ok":true,"id":"<&>"}`},
		{true, []obj{{"a"}}, `{"ok":true,"items":[{"id":"a"}]}`},
		{true, nilList, `{"ok":true,"items":[]}`},
		{true, &nilList, `{"ok":true,"items":[]}`},
		{true, map[string]any{}, `{"ok":true}`},
		{true, nil, `{"ok":true}`},
		{false, obj{"x"}, `{"ok":false,"id":"x"}`},
		{true, withOK{false}, `{"ok":false}`},
		{true, 3, `{"ok":true,"value":3}`},
	} {
		b, err := Envelope(c.ok, c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("Envelope(%v, %#v) = %s, %v; want %s", c.ok, c.v, b, err, c.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"submit", "complete", "fail", "cancel", "query", "list", "inspect-head", "inspect"}
	for word, want := range map[string]string{"sumbit": "submit", "lsit": "list", "qeury": "query", "inspct": "inspect",
		"inspect-hed": "inspect-head", "xyzzy": "", "li": "list", "c": "", "compl": "complete"} {
		if got := Suggest(word, names); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestFlagErrorsAndRequired(t *testing.T) {
	env, out, _ := testEnv()
	env.Name = "cbth"
	fs := FlagSet(env, "job submit", "cbth job submit …", "")
	fs.String("target", "", "")
	fs.String("thread-id", "", "")
	fs.Int("limit", 0, "")
	MarkRequired(fs, "target", "thread-id")
	_, err := Parse(fs, []string{"--tagret", "x"})
	if err == nil || err.Error() != "unknown flag --tagret (did you mean --target?) (see cbth job submit --help)" {
		t.Errorf("unknown flag: %v", err)
	}
	_, err = Parse(fs, []string{"--limit", "x"})
	if err == nil || !strings.Contains(err.Error(), "for flag --limit") {
		t.Errorf("bad value: %v", err)
	}
	_, err = Parse(fs, nil)
	if err == nil || err.Error() != "missing required flags --target, --thread-id (see cbth job submit --help)" {
		t.Errorf("missing: %v", err)
	}
	if _, err := Parse(fs, []string{"--target", "cli", "--thread-id", "t"}); err != nil {
		t.Error(err)
	}
	if _, err := Parse(fs, []string{"--help"}); err != ErrHelp || !strings.Contains(out.String(), "--target VALUE") ||
		!strings.Contains(out.String(), "(required)") || strings.Contains(out.String(), "\n  -target") {
		t.Errorf("help:\n%s", out)
	}
}

func TestHumanErrorOneVoice(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"ctx: ctx send: boom", "ctx: ctx send: boom (EINVAL)"},
		{"ctx: boom", "ctx: boom (EINVAL)"},
		{"boom (EINVAL)", "ctx: boom (EINVAL)"},
	} {
		if got := HumanError("ctx", abi.Errorf(abi.EINVAL, "%s", c.msg)); got != c.want {
			t.Errorf("HumanError(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}

func testTable(ran *[]string) *Cmd {
	leaf := func(name string) func(ctx context.Context, env *applets.Env, args []string) error {
		return func(ctx context.Context, env *applets.Env, args []string) error {
			fs := FlagSet(env, name, "t "+name, "")
			fs.String("home", "", "")
			fs.Bool("json", false, "")
			fs.Bool("x", false, "")
			pos, err := Parse(fs, args)
			if err != nil {
				return Output{Env: env}.Fail(err)
			}
			*ran = append(*ran, name+" "+strings.Join(append(pos, fs.Lookup("home").Value.String()), " "))
			return nil
		}
	}
	return &Cmd{Name: "t", Summary: "test applet", Globals: []Global{{Name: "home", Value: true}, {Name: "json"}},
		Subs: []*Cmd{
			{Name: "job", Summary: "jobs", Subs: []*Cmd{{Name: "list", Summary: "list jobs", Run: leaf("job list")}}},
			{Name: "doctor", Summary: "check", Run: leaf("doctor"), Subs: []*Cmd{{Name: "cli", Summary: "codex", Run: leaf("doctor cli")}}},
			{Name: "shim", Hidden: true, Run: leaf("shim")},
		}}
}

func TestCmdDispatch(t *testing.T) {
	var ran []string
	tab := testTable(&ran)
	for _, c := range []struct {
		args []string
		code int
		ran  string
		out  string
		err  string
	}{
		{[]string{"--home", "/h", "job", "list", "a", "--", "-z"}, 0, "job list a -z /h", "", ""},
		{[]string{"--home=/h", "--json", "doctor"}, 0, "doctor /h", "", ""},
		{[]string{"doctor", "cli"}, 0, "doctor cli ", "", ""},
		{[]string{"shim"}, 0, "shim ", "", ""},
		{nil, 0, "", "commands:\n  job       jobs: list\n  doctor    check: cli\n", ""},
		{[]string{"job"}, 0, "", "usage: t job COMMAND", ""},
		{[]string{"help", "job"}, 0, "", "  list      list jobs", ""},
		{[]string{"jbo"}, 2, "", "", `t: unknown command "jbo" (did you mean t job?) (EINVAL)`},
		{[]string{"job", "lst"}, 2, "", "", `t: unknown command "lst" (did you mean t job list?) (EINVAL)`},
		{[]string{"--home"}, 2, "", "", "needs a value"},
		{[]string{"job", "list", "--nope"}, 2, "", "", "unknown flag --nope (see t job list --help)"},
	} {
		ran = nil
		env, out, errw := testEnv()
		env.Name = "t"
		code := ExitCode(env, tab.Main(context.Background(), env, c.args))
		if code != c.code || c.ran != "" && !slices.Equal(ran, []string{c.ran}) || !strings.Contains(out.String(), c.out) ||
			!strings.Contains(errw.String(), c.err) {
			t.Errorf("%q: exit %d ran %q\nstdout %s\nstderr %s", c.args, code, ran, out, errw)
		}
		if strings.Contains(out.String(), "shim") {
			t.Errorf("%q: hidden command listed", c.args)
		}
	}
}

func TestCompletionFromTable(t *testing.T) {
	var ran []string
	tab := testTable(&ran)
	var b bytes.Buffer
	if err := Completion(&b, "bash", "t", []*Cmd{tab}); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{`'t job') echo 'list'`, `'t job list') echo '--home --json --x --help'`, `'t job list') echo '--home'`,
		"complete -o default -F _cortexfs_complete t"} {
		if !strings.Contains(s, want) {
			t.Errorf("bash script lacks %q:\n%s", want, s)
		}
	}
	if len(ran) != 0 || strings.Contains(s, "shim") {
		t.Errorf("collecting flags ran commands %v or listed a hidden one", ran)
	}
	if err := Completion(&b, "tcsh", "t", []*Cmd{tab}); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("tcsh: %v", err)
	}
}
