package applets

import (
	"context"
	"fmt"
	"testing"
)

func nop(context.Context, *Env, []string) error { return nil }

var seq int

// fresh returns a name no earlier run of these tests registered (the
// registry is process-global and -count repeats tests in one process).
func fresh(base string) string {
	seq++
	return fmt.Sprintf("%s-%d", base, seq)
}

// ensure registers name unless an earlier run already did.
func ensure(name string) {
	if _, ok := Lookup(name); !ok {
		Register(Applet{Name: name, Run: nop})
	}
}

func TestRegisterPanicsOnDuplicate(t *testing.T) {
	name := fresh("t-dup")
	Register(Applet{Name: name, Run: nop})
	defer func() {
		if recover() == nil {
			t.Fatal("second Register of the same name did not panic")
		}
	}()
	Register(Applet{Name: name, Run: nop})
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
	ensure(Multiplexer)
	ensure("t-one")
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
