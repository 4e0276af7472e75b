// Package policy is policy v0 (a minimal type-enforcement allowlist), the
// agent mount file, and the attenuation rules that bound a child agent by
// its parent (agent-tool-security-abi.md "Policy v0", "Mount File").
package policy

import (
	"bytes"
	"sort"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Class is a policy v0 object class.
type Class string

// The fixed v1 object classes.
const (
	ClassTool    Class = "tool"
	ClassModel   Class = "model"
	ClassShared  Class = "shared"
	ClassSession Class = "session"
	ClassMount   Class = "mount"
	ClassAgent   Class = "agent"
	ClassNetwork Class = "network"
)

// Permissions is the fixed v1 permission set of each class.
var Permissions = map[Class][]string{
	ClassTool:    {"execute"},
	ClassModel:   {"use"},
	ClassShared:  {"read", "write"},
	ClassSession: {"read", "write", "resume"},
	ClassMount:   {"read", "write"},
	ClassAgent:   {"create", "start", "stop", "read", "write"},
	ClassNetwork: {"connect"},
}

// NetworkDefault is the only v1 network object name.
const NetworkDefault = "default"

// MaxTypeLen bounds a subject type name.
const MaxTypeLen = 64

// Rule is one allow line.
type Rule struct {
	Subject string // subject type, e.g. coder_t
	Class   Class
	Object  string // concrete object name, e.g. fs.read or openai/gpt-4o
	Perm    string
	Line    int // 1-based line in the parsed file; 0 for rules built in code
}

// String renders the rule as its policy line.
func (r Rule) String() string {
	return "allow " + r.Subject + " " + string(r.Class) + ":" + r.Object + " " + r.Perm
}

func (r Rule) key() Rule { r.Line = 0; return r }

// Policy is a parsed policy file: a set of allow rules, default deny.
type Policy struct {
	Rules []Rule // in file order, duplicates dropped
	set   map[Rule]bool
}

// Parse reads policy v0: one `allow <subject_type> <class>:<name> <perm>`
// per line; blank lines and lines starting with '#' are ignored. Anything
// else — deny, globs, an unknown class or permission, a network object
// other than default, an invalid name — is EINVAL naming the line.
func Parse(data []byte) (*Policy, error) {
	p := &Policy{set: map[Rule]bool{}}
	if len(data) > abi.MaxControlFile {
		return nil, abi.Errorf(abi.EINVAL, "policy larger than %d bytes", abi.MaxControlFile)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, abi.Errorf(abi.EINVAL, "policy contains NUL")
	}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		r, err := ParseRule(t)
		if err != nil {
			return nil, abi.Errorf(abi.EINVAL, "policy line %d: %v", n+1, err)
		}
		r.Line = n + 1
		p.add(r)
	}
	return p, nil
}

// ParseRule parses one allow line without its line number.
func ParseRule(line string) (Rule, error) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "allow" {
		return Rule{}, abi.Errorf(abi.EINVAL, "want \"allow <subject_type> <class>:<name> <permission>\" (only allow exists)")
	}
	if len(f) != 4 {
		return Rule{}, abi.Errorf(abi.EINVAL, "want 4 words, got %d", len(f))
	}
	class, name, ok := strings.Cut(f[2], ":")
	if !ok {
		return Rule{}, abi.Errorf(abi.EINVAL, "object %q: want <class>:<name>", trunc(f[2]))
	}
	r := Rule{Subject: f[1], Class: Class(class), Object: name, Perm: f[3]}
	return r, r.Valid()
}

// Valid checks a rule against the fixed classes, permissions and names.
func (r Rule) Valid() error {
	if err := ValidType(r.Subject); err != nil {
		return err
	}
	perms, ok := Permissions[r.Class]
	if !ok {
		return abi.Errorf(abi.EINVAL, "unknown class %q", trunc(string(r.Class)))
	}
	if !contains(perms, r.Perm) {
		return abi.Errorf(abi.EINVAL, "unknown permission %q for class %s", trunc(r.Perm), r.Class)
	}
	return ValidObject(r.Class, r.Object)
}

// ValidObject checks a concrete object name of class c: models are
// provider/model, network is only "default", everything else one name.
// Globs, paths and variables are not names and fail.
func ValidObject(c Class, name string) error {
	switch c {
	case ClassModel:
		return abi.ValidModelID(name)
	case ClassNetwork:
		if name != NetworkDefault {
			return abi.Errorf(abi.EINVAL, "network object %q: the only network object is %q", trunc(name), NetworkDefault)
		}
		return nil
	}
	return abi.ValidName(name)
}

// ValidType checks a subject type: [A-Za-z][A-Za-z0-9_]*, at most
// MaxTypeLen bytes.
func ValidType(t string) error {
	if t == "" || len(t) > MaxTypeLen {
		return abi.Errorf(abi.EINVAL, "invalid subject type %q", trunc(t))
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '_')
		if !ok {
			return abi.Errorf(abi.EINVAL, "invalid subject type %q", trunc(t))
		}
	}
	return nil
}

// SubjectType is the type field of an agent label: user_u:agent_r:coder_t:s0
// gives coder_t. A bare type (coder_t) is its own subject type.
func SubjectType(label string) (string, error) {
	label = strings.TrimSpace(label)
	parts := strings.Split(label, ":")
	var t string
	switch len(parts) {
	case 1:
		t = parts[0]
	case 3, 4:
		t = parts[2]
	default:
		return "", abi.Errorf(abi.EINVAL, "label %q: want user:role:type[:level] or a bare type", trunc(label))
	}
	if err := ValidType(t); err != nil {
		return "", abi.Errorf(abi.EINVAL, "label %q: %v", trunc(label), err)
	}
	return t, nil
}

func (p *Policy) add(r Rule) {
	if p.set == nil {
		p.set = map[Rule]bool{}
	}
	k := r.key()
	if p.set[k] {
		return
	}
	p.set[k] = true
	p.Rules = append(p.Rules, r)
}

// Allowed answers one check; default deny. A nil policy allows nothing.
func (p *Policy) Allowed(subject string, class Class, name, perm string) bool {
	if p == nil {
		return false
	}
	return p.set[Rule{Subject: subject, Class: class, Object: name, Perm: perm}]
}

// Check is Allowed as an error: EACCES naming the missing allow line.
func (p *Policy) Check(subject string, class Class, name, perm string) error {
	if p.Allowed(subject, class, name, perm) {
		return nil
	}
	r := Rule{Subject: subject, Class: class, Object: name, Perm: perm}
	return abi.Errorf(abi.EACCES, "policy: no %q", r.String())
}

// Empty reports whether the policy has no allow line.
func (p *Policy) Empty() bool { return p == nil || len(p.Rules) == 0 }

// Of returns the rules of one subject type.
func (p *Policy) Of(subject string) []Rule {
	var out []Rule
	if p == nil {
		return nil
	}
	for _, r := range p.Rules {
		if r.Subject == subject {
			out = append(out, r)
		}
	}
	return out
}

// New builds a policy from rules, validating each.
func New(rules ...Rule) (*Policy, error) {
	p := &Policy{set: map[Rule]bool{}}
	for _, r := range rules {
		if err := r.Valid(); err != nil {
			return nil, err
		}
		p.add(r)
	}
	return p, nil
}

// Format renders the policy as a file: one allow line per rule, sorted.
func (p *Policy) Format() []byte {
	lines := make([]string, 0, len(p.Rules))
	for _, r := range p.Rules {
		lines = append(lines, r.String())
	}
	sort.Strings(lines)
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.Bytes()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
