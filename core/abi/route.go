package abi

import (
	"strings"
)

// UseCase selects a driver priority list in a route table (model-abi.md,
// .d/driver "Route keys").
type UseCase string

const (
	RouteDefault UseCase = "default" // fallback route
	RouteExec    UseCase = "exec"    // direct one-shot model file execution
	RouteSocket  UseCase = "socket"  // direct model socket calls
	RouteAgent   UseCase = "agent"   // agent-owned model calls
)

// UseCases lists the route keys in the seed's order.
var UseCases = []UseCase{RouteDefault, RouteExec, RouteSocket, RouteAgent}

// Routes is a parsed .d/driver file: for each use case, a priority list of
// driver (adapter) names. A legacy single-name file is Routes{default: [name]}.
type Routes map[UseCase][]string

// ParseRoutes parses .d/driver. Two forms exist:
//
//	debug                              (legacy: one driver name)
//	default=openai-chat                (route table: KEY=a,b,c per line)
//	agent=openai-responses,openai-chat
//
// Keys are the four route keys; each value is a non-empty comma-separated
// list of driver names without repeats. Anything else is EINVAL.
func ParseRoutes(data []byte) (Routes, error) {
	var lines []string
	var nums []int
	if err := eachLine(data, func(n int, line string) error {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			lines = append(lines, t)
			nums = append(nums, n)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, Errorf(EINVAL, "driver: empty route table")
	}
	if len(lines) == 1 && !strings.Contains(lines[0], "=") {
		if err := ValidDriverName(lines[0]); err != nil {
			return nil, Errorf(EINVAL, "line %d: %v", nums[0], err)
		}
		return Routes{RouteDefault: {lines[0]}}, nil
	}
	r := Routes{}
	for i, line := range lines {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, Errorf(EINVAL, "line %d: want KEY=DRIVER[,DRIVER…] (a bare driver name is only valid alone)", nums[i])
		}
		uc := UseCase(strings.TrimSpace(k))
		if !uc.Known() {
			return nil, Errorf(EINVAL, "line %d: unknown route key %q (want default, exec, socket or agent)", nums[i], truncate(string(uc)))
		}
		if _, dup := r[uc]; dup {
			return nil, Errorf(EINVAL, "line %d: route %q repeats", nums[i], uc)
		}
		list, err := parseDriverList(v)
		if err != nil {
			return nil, Errorf(EINVAL, "line %d: %v", nums[i], err)
		}
		r[uc] = list
	}
	return r, nil
}

func parseDriverList(v string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, d := range strings.Split(v, ",") {
		d = strings.TrimSpace(d)
		if err := ValidDriverName(d); err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, Errorf(EINVAL, "driver %q repeats", d)
		}
		seen[d] = true
		out = append(out, d)
	}
	return out, nil
}

// Select returns the priority list for a use case: its own route when the
// table has one, else the default route. The use case's list replaces the
// default rather than extending it, so "agent=a,b" means exactly a then b.
// No route at all is ENOENT; an unknown use case is EINVAL.
func (r Routes) Select(uc UseCase) ([]string, error) {
	if !uc.Known() {
		return nil, Errorf(EINVAL, "unknown route key %q", uc)
	}
	if l := r[uc]; len(l) > 0 {
		return append([]string(nil), l...), nil
	}
	if l := r[RouteDefault]; len(l) > 0 {
		return append([]string(nil), l...), nil
	}
	return nil, Errorf(ENOENT, "no driver route for %q and no default route", uc)
}

// Format writes the table in canonical form: the legacy single name when the
// table is only a one-driver default, else KEY=list lines in seed order.
func (r Routes) Format() ([]byte, error) {
	if len(r) == 0 {
		return nil, Errorf(EINVAL, "driver: empty route table")
	}
	for uc, l := range r {
		if !uc.Known() {
			return nil, Errorf(EINVAL, "unknown route key %q", uc)
		}
		if len(l) == 0 {
			return nil, Errorf(EINVAL, "route %q is empty", uc)
		}
		seen := map[string]bool{}
		for _, d := range l {
			if err := ValidDriverName(d); err != nil {
				return nil, err
			}
			if seen[d] {
				return nil, Errorf(EINVAL, "route %q: driver %q repeats", uc, d)
			}
			seen[d] = true
		}
	}
	if len(r) == 1 && len(r[RouteDefault]) == 1 {
		return []byte(r[RouteDefault][0] + "\n"), nil
	}
	var b strings.Builder
	for _, uc := range UseCases {
		if l, ok := r[uc]; ok {
			b.WriteString(string(uc) + "=" + strings.Join(l, ",") + "\n")
		}
	}
	return []byte(b.String()), nil
}

// Known reports whether uc is one of the four route keys.
func (uc UseCase) Known() bool {
	for _, k := range UseCases {
		if k == uc {
			return true
		}
	}
	return false
}

// ValidDriverName checks an adapter name: [a-z0-9][a-z0-9._-]{0,63}.
// Driver names are adapter names, never stable model names.
func ValidDriverName(d string) error {
	if d == "" {
		return Errorf(EINVAL, "empty driver name")
	}
	if len(d) > MaxNameLen {
		return Errorf(EINVAL, "driver name %q too long", truncate(d))
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return Errorf(EINVAL, "invalid driver name %q", truncate(d))
		}
	}
	return nil
}
