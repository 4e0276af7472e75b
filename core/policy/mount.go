package policy

import (
	"bytes"
	"path"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Mount modes.
const (
	ModeRO = "ro"
	ModeRW = "rw"
)

// MountOptions is the fixed v0 option set; "-" means no extra option.
var MountOptions = []string{"bind", "rbind", "nosuid", "nodev", "noexec"}

// Mount is one line of agent/<name>.d/mount:
// source<TAB>target<TAB>mode<TAB>options.
type Mount struct {
	Source  string
	Target  string
	Mode    string   // ro | rw
	Options []string // without "-", in file order
	Line    int
}

// PolicyName is the mount's object name in policy v0 (allow <type>
// mount:<name> read|write): the last component of its target, "root" for
// "/". Policy has no paths, so this is how a mount line is named; a target
// whose last component is not a valid name can never be allowed.
func (m Mount) PolicyName() string {
	if m.Target == "/" {
		return "root"
	}
	return path.Base(m.Target)
}

// PolicyPerm is the permission a mount needs: read for ro, write for rw.
func (m Mount) PolicyPerm() string {
	if m.Mode == ModeRW {
		return "write"
	}
	return "read"
}

// MountRules are the allow lines that let subject use the mounts ms
// (mounts without a valid policy name are left out: they stay refused).
func MountRules(subject string, ms []Mount) []Rule {
	var out []Rule
	for _, m := range ms {
		r := Rule{Subject: subject, Class: ClassMount, Object: m.PolicyName(), Perm: m.PolicyPerm()}
		if r.Valid() == nil {
			out = append(out, r)
		}
	}
	return out
}

// Has reports whether the mount carries option o.
func (m Mount) Has(o string) bool { return contains(m.Options, o) }

// String renders the mount as its file line (no newline).
func (m Mount) String() string {
	opts := "-"
	if len(m.Options) > 0 {
		opts = strings.Join(m.Options, ",")
	}
	return m.Source + "\t" + m.Target + "\t" + m.Mode + "\t" + opts
}

// ParseMountFile reads a mount file. Blank lines and lines starting with
// '#' are ignored. Each other line is exactly four TAB-separated fields:
// absolute, clean source and target paths; mode ro or rw; options, a
// comma-separated list from the fixed set where "-" means no extra option,
// no other option repeats and bind and rbind are mutually exclusive.
// Anything else is EINVAL naming the line.
func ParseMountFile(data []byte) ([]Mount, error) {
	if len(data) > abi.MaxControlFile {
		return nil, abi.Errorf(abi.EINVAL, "mount file larger than %d bytes", abi.MaxControlFile)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, abi.Errorf(abi.EINVAL, "mount file contains NUL")
	}
	var out []Mount
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m, err := ParseMountLine(line)
		if err != nil {
			return nil, abi.Errorf(abi.EINVAL, "mount line %d: %v", n+1, err)
		}
		m.Line = n + 1
		out = append(out, m)
	}
	return out, nil
}

// ParseMountLine parses one mount line.
func ParseMountLine(line string) (Mount, error) {
	f := strings.Split(line, "\t")
	if len(f) != 4 {
		return Mount{}, abi.Errorf(abi.EINVAL, "want source<TAB>target<TAB>mode<TAB>options, got %d fields", len(f))
	}
	m := Mount{Source: f[0], Target: f[1], Mode: f[2]}
	for _, p := range []string{m.Source, m.Target} {
		if err := validMountPath(p); err != nil {
			return Mount{}, err
		}
	}
	if m.Mode != ModeRO && m.Mode != ModeRW {
		return Mount{}, abi.Errorf(abi.EINVAL, "mode %q: want ro or rw", trunc(m.Mode))
	}
	opts, err := parseOptions(f[3])
	if err != nil {
		return Mount{}, err
	}
	m.Options = opts
	return m, nil
}

func validMountPath(p string) error {
	switch {
	case strings.ContainsAny(p, "\t\n\r\x00"):
		return abi.Errorf(abi.EINVAL, "path %q contains TAB, newline or NUL", trunc(p))
	case !filepath.IsAbs(p):
		return abi.Errorf(abi.EINVAL, "path %q is not absolute", trunc(p))
	case filepath.Clean(p) != p:
		return abi.Errorf(abi.EINVAL, "path %q is not clean (use %q)", trunc(p), trunc(filepath.Clean(p)))
	}
	return nil
}

func parseOptions(field string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(field, ",") {
		switch {
		case o == "-":
			continue
		case !contains(MountOptions, o):
			return nil, abi.Errorf(abi.EINVAL, "unknown mount option %q", trunc(o))
		case contains(out, o):
			return nil, abi.Errorf(abi.EINVAL, "mount option %q repeats", o)
		}
		out = append(out, o)
	}
	if contains(out, "bind") && contains(out, "rbind") {
		return nil, abi.Errorf(abi.EINVAL, "bind and rbind are mutually exclusive")
	}
	return out, nil
}

// FormatMountFile renders mounts, one line each.
func FormatMountFile(ms []Mount) []byte {
	var b bytes.Buffer
	for _, m := range ms {
		b.WriteString(m.String() + "\n")
	}
	return b.Bytes()
}

// within reports whether p is base or lies below it.
func within(p, base string) bool {
	if base == "/" {
		return true
	}
	return p == base || strings.HasPrefix(p, base+"/")
}
