package abi

import (
	"reflect"
	"strings"
	"testing"
)

func TestUseCases(t *testing.T) {
	want := []UseCase{"default", "exec", "socket", "agent"}
	if !reflect.DeepEqual(UseCases, want) {
		t.Fatalf("UseCases = %q, want %q", UseCases, want)
	}
	if RouteDefault != "default" || RouteExec != "exec" || RouteSocket != "socket" || RouteAgent != "agent" {
		t.Errorf("route constants changed")
	}
	for _, uc := range want {
		if !uc.Known() {
			t.Errorf("%q.Known() = false", uc)
		}
	}
	for _, uc := range []UseCase{"", "Default", "chat", "agent ", "sockets"} {
		if uc.Known() {
			t.Errorf("%q.Known() = true", uc)
		}
	}
}

func TestValidDriverName(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"debug", true},
		{"openai-chat", true},
		{"openai-responses", true},
		{"a.b_c-d", true},
		{"0", true},
		{"9x", true},
		{"a." + strings.Repeat("x", 62), true}, // 64 bytes
		{strings.Repeat("x", 65), false},
		{"", false},
		{"Debug", false},     // lower-case only
		{"openAI", false},    // lower-case only
		{"-x", false},        // must start with [a-z0-9]
		{".x", false},        // must start with [a-z0-9]
		{"_x", false},        // must start with [a-z0-9]
		{"a+b", false},       // '+' is allowed in names, not in drivers
		{"a b", false},       // space
		{"a/b", false},       // slash
		{"a,b", false},       // list separator
		{"a=b", false},       // key separator
		{"caf\u00e9", false}, // non-ASCII
		{"a\x00", false},     // NUL
		{"a\n", false},       // newline
	}
	for _, tt := range tests {
		err := ValidDriverName(tt.in)
		if tt.ok && err != nil {
			t.Errorf("ValidDriverName(%q) = %v, want nil", tt.in, err)
		}
		if !tt.ok {
			if err == nil {
				t.Errorf("ValidDriverName(%q) = nil, want EINVAL", tt.in)
				continue
			}
			wantErr(t, err, EINVAL)
		}
	}
}

func TestParseRoutes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Routes
		msg  string
	}{
		// Legacy single name.
		{"legacy", "debug", Routes{RouteDefault: {"debug"}}, ""},
		{"legacy newline", "debug\n", Routes{RouteDefault: {"debug"}}, ""},
		{"legacy padded CRLF", "  debug \t\r\n", Routes{RouteDefault: {"debug"}}, ""},
		{"legacy with comments", "# driver\n\ndebug\n# end\n", Routes{RouteDefault: {"debug"}}, ""},
		{"legacy dotted", "openai-chat.v2", Routes{RouteDefault: {"openai-chat.v2"}}, ""},

		// Route table.
		{"seed table", "default=openai-chat\nagent=openai-responses,openai-chat\n",
			Routes{RouteDefault: {"openai-chat"}, RouteAgent: {"openai-responses", "openai-chat"}}, ""},
		{"all keys", "default=d\nexec=e1,e2\nsocket=s\nagent=a\n",
			Routes{RouteDefault: {"d"}, RouteExec: {"e1", "e2"}, RouteSocket: {"s"}, RouteAgent: {"a"}}, ""},
		{"single table line", "default=debug\n", Routes{RouteDefault: {"debug"}}, ""},
		{"table without default", "exec=a\n", Routes{RouteExec: {"a"}}, ""},
		{"whitespace everywhere", "  default = a , b \t\r\n\tagent=\tc\n", Routes{RouteDefault: {"a", "b"}, RouteAgent: {"c"}}, ""},
		{"comments and blanks", "# routes\n\ndefault=a\n  # x\nexec=b\n\n", Routes{RouteDefault: {"a"}, RouteExec: {"b"}}, ""},
		{"any key order", "agent=a\ndefault=b\n", Routes{RouteAgent: {"a"}, RouteDefault: {"b"}}, ""},

		// Errors.
		{"empty file", "", nil, "empty route table"},
		{"only blanks", "\n \n\t\n", nil, "empty route table"},
		{"only comments", "# a\n# b\n", nil, "empty route table"},
		{"legacy bad name", "Debug\n", nil, `line 1: invalid driver name "Debug"`},
		{"legacy bad name line number", "\n# c\n\n-x\n", nil, "line 4:"},
		{"legacy with comma", "a,b\n", nil, "line 1:"},
		{"two bare names", "a\nb\n", nil, "line 1: want KEY=DRIVER"},
		{"bare then table", "debug\ndefault=a\n", nil, "line 1: want KEY=DRIVER"},
		{"table then bare", "default=a\ndebug\n", nil, "line 2: want KEY=DRIVER"},
		{"unknown key", "default=a\nchat=b\n", nil, `line 2: unknown route key "chat"`},
		{"unknown key alone", "chat=a\n", nil, `unknown route key "chat"`},
		{"key case-sensitive", "Default=a\n", nil, "unknown route key"},
		{"empty key", "=a\n", nil, `unknown route key ""`},
		{"duplicate key", "default=a\nexec=b\ndefault=c\n", nil, `line 3: route "default" repeats`},
		{"duplicate key padded", "agent=a\n  agent = b\n", nil, `line 2: route "agent" repeats`},
		{"empty list", "default=\n", nil, "line 1: empty driver name"},
		{"blank list", "default=  \n", nil, "empty driver name"},
		{"empty item", "default=a,,b\n", nil, "line 1: empty driver name"},
		{"trailing comma", "default=a,\n", nil, "empty driver name"},
		{"leading comma", "default=,a\n", nil, "empty driver name"},
		{"repeat in list", "agent=a,b,a\n", nil, `line 1: driver "a" repeats`},
		{"repeat after trim", "agent=a, a\n", nil, `driver "a" repeats`},
		{"invalid driver in list", "default=a,B\n", nil, `invalid driver name "B"`},
		{"space inside driver", "default=a b\n", nil, "invalid driver name"},
		{"second equals", "default=a=b\n", nil, "invalid driver name"},
		{"NUL", "debug\x00", nil, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRoutes([]byte(tt.in))
			if tt.msg != "" {
				wantErr(t, err, EINVAL, tt.msg)
				if got != nil {
					t.Errorf("ParseRoutes returned %v with the error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRoutes(%q) = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseRoutes(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// MaxControlFile "bounds every small control file we parse".
func TestParseRoutesSize(t *testing.T) {
	in := strings.Repeat("#\n", MaxControlFile) + "debug\n"
	if _, err := ParseRoutes([]byte(in)); err == nil {
		t.Fatalf("ParseRoutes accepted a %d-byte file (> MaxControlFile=%d)", len(in), MaxControlFile)
	} else {
		wantErr(t, err, EINVAL)
	}
}

func TestRoutesSelect(t *testing.T) {
	seed := Routes{RouteDefault: {"openai-chat"}, RouteAgent: {"openai-responses", "openai-chat"}}
	execOnly := Routes{RouteExec: {"exec-driver"}}
	legacy := Routes{RouteDefault: {"debug"}}
	replace := Routes{RouteDefault: {"c"}, RouteAgent: {"a", "b"}}
	emptyAgent := Routes{RouteDefault: {"d"}, RouteAgent: {}}
	tests := []struct {
		name string
		r    Routes
		uc   UseCase
		want []string
		code Code
	}{
		{"seed agent uses own list", seed, RouteAgent, []string{"openai-responses", "openai-chat"}, ""},
		{"seed exec falls back", seed, RouteExec, []string{"openai-chat"}, ""},
		{"seed socket falls back", seed, RouteSocket, []string{"openai-chat"}, ""},
		{"seed default", seed, RouteDefault, []string{"openai-chat"}, ""},
		{"own list replaces default", replace, RouteAgent, []string{"a", "b"}, ""},
		{"legacy exec", legacy, RouteExec, []string{"debug"}, ""},
		{"legacy socket", legacy, RouteSocket, []string{"debug"}, ""},
		{"legacy agent", legacy, RouteAgent, []string{"debug"}, ""},
		{"legacy default", legacy, RouteDefault, []string{"debug"}, ""},
		{"exec only: exec", execOnly, RouteExec, []string{"exec-driver"}, ""},
		{"exec only: agent has nothing", execOnly, RouteAgent, nil, ENOENT},
		{"exec only: socket has nothing", execOnly, RouteSocket, nil, ENOENT},
		{"exec only: default has nothing", execOnly, RouteDefault, nil, ENOENT},
		{"empty own list falls back", emptyAgent, RouteAgent, []string{"d"}, ""},
		{"nil routes", nil, RouteExec, nil, ENOENT},
		{"nil routes default", nil, RouteDefault, nil, ENOENT},
		{"unknown use case", seed, "chat", nil, EINVAL},
		{"empty use case", seed, "", nil, EINVAL},
		{"unknown use case on nil", nil, "Agent", nil, EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.Select(tt.uc)
			if tt.code != "" {
				wantErr(t, err, tt.code)
				if got != nil {
					t.Errorf("Select returned %q with the error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Select(%q) = %v", tt.uc, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Select(%q) = %q, want %q", tt.uc, got, tt.want)
			}
		})
	}
}

func TestRoutesFormat(t *testing.T) {
	tests := []struct {
		name string
		r    Routes
		want string
		msg  string
	}{
		{"legacy", Routes{RouteDefault: {"debug"}}, "debug\n", ""},
		{"default two drivers", Routes{RouteDefault: {"a", "b"}}, "default=a,b\n", ""},
		{"exec only is not legacy", Routes{RouteExec: {"a"}}, "exec=a\n", ""},
		{"seed order", Routes{RouteAgent: {"openai-responses", "openai-chat"}, RouteDefault: {"openai-chat"}},
			"default=openai-chat\nagent=openai-responses,openai-chat\n", ""},
		{"all keys", Routes{RouteAgent: {"a"}, RouteSocket: {"s"}, RouteExec: {"e"}, RouteDefault: {"d"}},
			"default=d\nexec=e\nsocket=s\nagent=a\n", ""},
		{"unknown key", Routes{"chat": {"a"}}, "", `unknown route key "chat"`},
		{"empty list", Routes{RouteDefault: {"a"}, RouteAgent: {}}, "", `route "agent" is empty`},
		{"nil list", Routes{RouteAgent: nil}, "", "is empty"},
		{"invalid driver", Routes{RouteDefault: {"A"}}, "", "invalid driver name"},
		{"empty driver", Routes{RouteDefault: {"a", ""}}, "", "empty driver name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.Format()
			if tt.msg != "" {
				wantErr(t, err, EINVAL, tt.msg)
				return
			}
			if err != nil {
				t.Fatalf("Format: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Format = %q, want %q", got, tt.want)
			}
			back, err := ParseRoutes(got)
			if err != nil {
				t.Fatalf("ParseRoutes(Format) = %v", err)
			}
			if !reflect.DeepEqual(back, tt.r) {
				t.Errorf("round trip = %v, want %v", back, tt.r)
			}
		})
	}
}

// Parse -> Format is canonical and stable.
func TestRoutesCanonicalRoundTrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  debug \r\n", "debug\n"},
		{"default = debug\n", "debug\n"},
		{"# x\nagent = a , b\n\ndefault=c\n", "default=c\nagent=a,b\n"},
		{"socket=s\nexec=e\n", "exec=e\nsocket=s\n"},
	}
	for _, tt := range tests {
		r, err := ParseRoutes([]byte(tt.in))
		if err != nil {
			t.Fatalf("ParseRoutes(%q): %v", tt.in, err)
		}
		out, err := r.Format()
		if err != nil {
			t.Fatalf("Format: %v", err)
		}
		if string(out) != tt.want {
			t.Errorf("canonical(%q) = %q, want %q", tt.in, out, tt.want)
		}
		r2, err := ParseRoutes(out)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Errorf("reparse(%q) = %v, %v; want %v", out, r2, err, r)
		}
	}
}

// Format must not write a table that ParseRoutes rejects.
func TestRoutesFormatRejectsWhatParseRejects(t *testing.T) {
	tests := []struct {
		name string
		r    Routes
	}{
		{"repeated driver", Routes{RouteDefault: {"a", "a"}}},
		{"empty table", Routes{}},
		{"nil table", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.r.Format()
			if err != nil {
				wantErr(t, err, EINVAL)
				return
			}
			if _, perr := ParseRoutes(out); perr != nil {
				t.Fatalf("Routes(%#v).Format() = %q, nil but ParseRoutes of it fails: %v", tt.r, out, perr)
			}
		})
	}
}
