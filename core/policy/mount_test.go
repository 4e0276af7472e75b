package policy

import (
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestParseMountFile(t *testing.T) {
	seed := "/ctx\t/ctx\tro\trbind,nosuid,nodev\n" +
		"/ctx/home/1000/agent/coder\t/home/agent\trw\trbind,nosuid,nodev\n" +
		"/home/me/project\t/work\trw\trbind,nosuid,nodev\n" +
		"/ctx/shared/project-a\t/shared/project-a\trw\trbind,nosuid,nodev\n" +
		"/tmp\t/tmp\trw\trbind,nosuid,nodev\n"
	tests := []struct {
		name string
		in   string
		ok   bool
		n    int
	}{
		{"seed example", seed, true, 5},
		{"dash means nothing", "/a\t/b\tro\t-\n", true, 1},
		{"every option", "/a\t/b\trw\tbind,nosuid,nodev,noexec\n", true, 1},
		{"comments and blanks", "# x\n\n/a\t/b\tro\tbind\n", true, 1},
		{"relative source", "a\t/b\tro\tbind\n", false, 0},
		{"relative target", "/a\tb\tro\tbind\n", false, 0},
		{"unclean path", "/a/../etc\t/b\tro\tbind\n", false, 0},
		{"spaces instead of tabs", "/a /b ro bind\n", false, 0},
		{"three fields", "/a\t/b\tro\n", false, 0},
		{"five fields (tab in a path)", "/a\tx\t/b\tro\tbind\n", false, 0},
		{"mode", "/a\t/b\trwx\tbind\n", false, 0},
		{"unknown option", "/a\t/b\tro\tbind,suid\n", false, 0},
		{"repeated option", "/a\t/b\tro\tnodev,nodev\n", false, 0},
		{"bind and rbind", "/a\t/b\tro\tbind,rbind\n", false, 0},
		{"empty options", "/a\t/b\tro\t\n", false, 0},
		{"empty option word", "/a\t/b\tro\tbind,,nodev\n", false, 0},
		{"NUL", "/a\x00\t/b\tro\tbind\n", false, 0},
		{"CR in a path", "/a\r\r\t/b\tro\tbind\n", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := ParseMountFile([]byte(tt.in))
			if !tt.ok {
				if abi.CodeOf(err) != abi.EINVAL {
					t.Fatalf("ParseMountFile = %v, want EINVAL", err)
				}
				return
			}
			if err != nil || len(ms) != tt.n {
				t.Fatalf("ParseMountFile = %v, %v; want %d mounts", ms, err, tt.n)
			}
			again, err := ParseMountFile(FormatMountFile(ms))
			if err != nil || len(again) != len(ms) {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
	_, err := ParseMountFile([]byte("/a\t/b\tro\tbind\n/c\t/d\tro\tfoo\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error does not name line 2: %v", err)
	}
}
