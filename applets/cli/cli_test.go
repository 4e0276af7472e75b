package cli

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/core/abi"
)

func testEnv() (*applets.Env, *bytes.Buffer, *bytes.Buffer) {
	var o, e bytes.Buffer
	return &applets.Env{Stdout: &o, Stderr: &e, Name: "x"}, &o, &e
}

func TestParseInterspersed(t *testing.T) {
	env, out, _ := testEnv()
	fs := FlagSet(env, "q", "q ID [--json]", "")
	j := fs.Bool("json", false, "")
	n := fs.Int("limit", 0, "")
	pos, err := Parse(fs, []string{"job-1", "--json", "--limit", "3", "b", "--", "--not-a-flag", "-x"})
	if err != nil {
		t.Fatal(err)
	}
	if !*j || *n != 3 || !slices.Equal(pos, []string{"job-1", "b", "--not-a-flag", "-x"}) {
		t.Errorf("got json=%v limit=%d pos=%q", *j, *n, pos)
	}
	if out.Len() != 0 {
		t.Errorf("parse printed %q", out)
	}
}

func TestParseErrors(t *testing.T) {
	env, out, _ := testEnv()
	fs := FlagSet(env, "q", "q [--json]", "does q")
	fs.Bool("json", false, "json output")
	if _, err := Parse(fs, []string{"--nope"}); abi.CodeOf(err) != abi.EINVAL || out.Len() != 0 {
		t.Errorf("bad flag: err=%v stdout=%q", err, out)
	}
	if _, err := Parse(fs, []string{"--help"}); !errors.Is(err, ErrHelp) || !strings.Contains(out.String(), "usage: q [--json]") || !strings.Contains(out.String(), "json output") {
		t.Errorf("--help: err=%v stdout=%q", err, out)
	}
}

func TestFailJSONAndHuman(t *testing.T) {
	env, out, errw := testEnv()
	err := Output{Env: env, JSON: true}.Fail(abi.Errorf(abi.ENOENT, "no job %q", "j1"))
	if want := `{"ok":false,"error":{"code":"ENOENT","message":"no job \"j1\""}}` + "\n"; out.String() != want {
		t.Errorf("JSON error = %q, want %q", out, want)
	}
	if ExitCode(env, err) != 1 || errw.Len() != 0 {
		t.Errorf("reported error printed again or wrong exit: %q", errw)
	}
	env, out, errw = testEnv()
	err = Output{Env: env}.Fail(abi.Errorf(abi.EACCES, "denied"))
	if out.Len() != 0 || errw.String() != "x: denied (EACCES)\n" || ExitCode(env, err) != 13 {
		t.Errorf("human error: stdout=%q stderr=%q", out, errw)
	}
	env, _, errw = testEnv()
	if ExitCode(env, errors.New("boom")) != 70 || errw.String() != "x: boom (EIO)\n" {
		t.Errorf("unreported plain error: %q", errw)
	}
	if ExitCode(env, &ExitStatus{Code: 3}) != 3 {
		t.Error("ExitStatus not honoured")
	}
}

func TestParseBadFlagStillHonoursJSON(t *testing.T) {
	env, _, _ := testEnv()
	fs := FlagSet(env, "q", "q [--json]", "")
	j := fs.Bool("json", false, "")
	if _, err := Parse(fs, []string{"--nope", "--json"}); abi.CodeOf(err) != abi.EINVAL || !*j {
		t.Errorf("bad flag before --json: err=%v json=%v", err, *j)
	}
}

func TestParseN(t *testing.T) {
	env, _, _ := testEnv()
	for _, c := range []struct {
		args []string
		n    int
		ok   bool
	}{{[]string{"a"}, 1, true}, {[]string{}, 1, false}, {[]string{"a", "b"}, 1, false}, {[]string{"a", "b"}, -1, true}, {nil, -1, false}, {nil, 0, true}} {
		fs := FlagSet(env, "q", "q", "")
		if _, err := ParseN(fs, c.args, c.n); (err == nil) != c.ok || err != nil && abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("ParseN(%q, %d) = %v, want ok=%v", c.args, c.n, err, c.ok)
		}
	}
}
