package policy

import (
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name string
		in   string
		code abi.Code // "" means it parses
		line string   // substring of the error, e.g. "line 2"
	}{
		{"seed examples", "allow coder_t tool:fs.read execute\nallow coder_t tool:shell.exec execute\n" +
			"allow coder_t model:openai/gpt-4o use\nallow coder_t shared:project-a read\nallow coder_t shared:project-a write\n" +
			"allow coder_t network:default connect\nallow coder_t agent:reviewer create\nallow coder_t agent:reviewer start\n", "", ""},
		{"comments and blanks", "# header\n\n   \n  # indented\nallow a_t tool:x execute\r\n", "", ""},
		{"empty file", "", "", ""},
		{"every class and permission", "allow t session:s read\nallow t session:s write\nallow t session:s resume\n" +
			"allow t mount:m read\nallow t mount:m write\nallow t agent:a stop\nallow t agent:a read\nallow t agent:a write\n", "", ""},
		{"unknown class", "allow coder_t tool:a execute\nallow coder_t file:x read\n", abi.EINVAL, "line 2"},
		{"unknown permission", "\nallow coder_t tool:fs.read run\n", abi.EINVAL, "line 2"},
		{"permission of another class", "allow coder_t tool:fs.read use\n", abi.EINVAL, "line 1"},
		{"explicit deny", "deny coder_t tool:fs.read execute\n", abi.EINVAL, "line 1"},
		{"glob", "allow coder_t agent:* create\n", abi.EINVAL, "line 1"},
		{"glob in model", "allow coder_t model:openai/* use\n", abi.EINVAL, "line 1"},
		{"variable", "allow coder_t tool:$TOOL execute\n", abi.EINVAL, "line 1"},
		{"path", "allow coder_t shared:/shared/a read\n", abi.EINVAL, "line 1"},
		{"network other than default", "allow coder_t network:internet connect\n", abi.EINVAL, "line 1"},
		{"model needs provider/model", "allow coder_t model:gpt-4o use\n", abi.EINVAL, "line 1"},
		{"too few words", "allow coder_t tool:fs.read\n", abi.EINVAL, "line 1"},
		{"trailing word (priority)", "allow coder_t tool:fs.read execute 10\n", abi.EINVAL, "line 1"},
		{"no class separator", "allow coder_t fs.read execute\n", abi.EINVAL, "line 1"},
		{"bad subject", "allow coder-t tool:fs.read execute\n", abi.EINVAL, "line 1"},
		{"inline comment", "allow coder_t tool:fs.read execute # yes\n", abi.EINVAL, "line 1"},
		{"NUL", "allow coder_t tool:fs.read execute\x00\n", abi.EINVAL, "NUL"},
		{"invalid name .sock", "allow coder_t tool:x.sock execute\n", abi.EINVAL, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.in))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				for _, r := range p.Rules {
					if !p.Allowed(r.Subject, r.Class, r.Object, r.Perm) {
						t.Errorf("rule %s not allowed after parse", r)
					}
				}
				return
			}
			if abi.CodeOf(err) != tt.code {
				t.Fatalf("Parse = %v, want %s", err, tt.code)
			}
			if !contains2(err.Error(), tt.line) {
				t.Errorf("error %q does not say %q", err, tt.line)
			}
		})
	}
}

func contains2(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestAllowedDefaultDeny(t *testing.T) {
	p, err := Parse([]byte("allow coder_t tool:fs.read execute\nallow coder_t model:openai/gpt-4o use\nallow coder_t network:default connect\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		subject string
		class   Class
		name    string
		perm    string
		want    bool
	}{
		{"coder_t", ClassTool, "fs.read", "execute", true},
		{"coder_t", ClassModel, "openai/gpt-4o", "use", true},
		{"coder_t", ClassNetwork, "default", "connect", true},
		{"coder_t", ClassTool, "shell.exec", "execute", false},      // default deny
		{"reviewer_t", ClassTool, "fs.read", "execute", false},      // no inheritance between types
		{"coder_t", ClassTool, "fs.read", "read", false},            // permission must match exactly
		{"coder_t", ClassModel, "openai/gpt-4o-mini", "use", false}, // no prefix matching
		{"coder_t", ClassTool, "fs.*", "execute", false},
		{"coder_t", ClassShared, "fs.read", "read", false}, // class must match
	}
	for _, tt := range tests {
		if got := p.Allowed(tt.subject, tt.class, tt.name, tt.perm); got != tt.want {
			t.Errorf("Allowed(%s %s:%s %s) = %v, want %v", tt.subject, tt.class, tt.name, tt.perm, got, tt.want)
		}
	}
	if err := p.Check("coder_t", ClassTool, "shell.exec", "execute"); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("Check of a missing rule = %v, want EACCES", err)
	}
	var nilPolicy *Policy
	if nilPolicy.Allowed("coder_t", ClassTool, "fs.read", "execute") {
		t.Error("a nil policy allowed something")
	}
}

func TestSubjectType(t *testing.T) {
	tests := []struct {
		label, want string
		ok          bool
	}{
		{"user_u:agent_r:coder_t:s0", "coder_t", true},
		{"user_u:agent_r:reviewer_t", "reviewer_t", true},
		{"coder_t", "coder_t", true},
		{" coder_t\n", "coder_t", true},
		{"", "", false},
		{"a:b", "", false},
		{"user_u:agent_r:*:s0", "", false},
		{"a:b:c:d:e", "", false},
	}
	for _, tt := range tests {
		got, err := SubjectType(tt.label)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("SubjectType(%q) = %q, %v; want %q ok=%v", tt.label, got, err, tt.want, tt.ok)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	in := "allow b_t tool:fs.read execute\n# c\nallow a_t model:openai/gpt-4o use\nallow b_t tool:fs.read execute\n"
	p, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 2 {
		t.Errorf("duplicates kept: %v", p.Rules)
	}
	q, err := Parse(p.Format())
	if err != nil || string(q.Format()) != string(p.Format()) {
		t.Errorf("Format does not round-trip: %q %v", p.Format(), err)
	}
}
