package applets

import (
	"context"
	"testing"
)

func nop(context.Context, *Env, []string) error { return nil }

func TestRegisterPanicsOnDuplicate(t *testing.T) {
	Register(Applet{Name: "t-dup", Run: nop})
	defer func() {
		if recover() == nil {
			t.Fatal("second Register of the same name did not panic")
		}
	}()
	Register(Applet{Name: "t-dup", Run: nop})
}

func TestRegisterPanicsOnEmpty(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Register without a name did not panic")
		}
	}()
	Register(Applet{Run: nop})
}

func TestResolve(t *testing.T) {
	Register(Applet{Name: Multiplexer, Run: nop})
	Register(Applet{Name: "t-one", Run: nop})
	cases := []struct {
		argv     []string
		want     string
		wantArgs int
	}{
		{[]string{"/usr/bin/t-one", "a"}, "t-one", 1},               // hardlink name
		{[]string{"t-one"}, "t-one", 0},                             // bare name
		{[]string{"/opt/x/cortexfs", "t-one", "a"}, Multiplexer, 2}, // multiplexer reads argv[1] itself
		{[]string{"/tmp/renamed", "t-one"}, Multiplexer, 1},         // unknown argv0 falls back
	}
	for _, c := range cases {
		a, args, ok := Resolve(c.argv)
		if !ok || a.Name != c.want || len(args) != c.wantArgs {
			t.Errorf("Resolve(%q) = %q %q %v, want %q with %d args", c.argv, a.Name, args, ok, c.want, c.wantArgs)
		}
	}
	if _, _, ok := Resolve(nil); ok {
		t.Error("Resolve(nil) resolved")
	}
}
