package policy

import (
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// restrictive are the options a child mount must keep when its parent's
// mount has them: dropping one would widen what the child may do.
var restrictive = []string{"nosuid", "nodev", "noexec"}

// AttenuatePolicy checks that child ⊆ parent: every rule of the child
// policy is a rule of childType whose (class, object, permission) the
// parent policy allows parentType. A child rule for any other subject type
// would grant someone else something, so it is refused too. The error is
// EACCES naming the first widening rule.
func AttenuatePolicy(parent *Policy, parentType string, child *Policy, childType string) error {
	if child == nil {
		return nil
	}
	for _, r := range child.Rules {
		if r.Subject != childType {
			return abi.Errorf(abi.EACCES, "attenuation: child rule %q names subject %s, not the child's %s", r.String(), r.Subject, childType)
		}
		if !parent.Allowed(parentType, r.Class, r.Object, r.Perm) {
			return abi.Errorf(abi.EACCES, "attenuation: child rule %q widens the parent's policy (no %s %s:%s %s)",
				r.String(), parentType, r.Class, r.Object, r.Perm)
		}
	}
	return nil
}

// AttenuateGroups checks that every child group is a parent group.
func AttenuateGroups(parent, child []int) error {
	have := map[int]bool{}
	for _, g := range parent {
		have[g] = true
	}
	for _, g := range child {
		if !have[g] {
			return abi.Errorf(abi.EACCES, "attenuation: group %d is not one of the parent's groups", g)
		}
	}
	return nil
}

// AttenuateMounts checks that each child mount is derived from a mount the
// parent sees: its source lies within a parent mount's source (the most
// specific one decides), it is not rw where the parent is ro, and it keeps
// the parent's nosuid, nodev and noexec. A source outside every parent
// mount would make a hidden path visible. Errors are EACCES.
func AttenuateMounts(parent, child []Mount) error {
	for _, c := range child {
		p, ok := covering(parent, c.Source, func(m Mount) string { return m.Source })
		if !ok {
			return abi.Errorf(abi.EACCES, "attenuation: mount %s is not visible to the parent", c.Source)
		}
		err := narrower(p, c)
		for _, q := range parent { // an equally specific parent mount may be wider
			if err != nil && q.Source == p.Source && narrower(q, c) == nil {
				err = nil
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// DeriveMount turns a child mount request written in the parent's view
// (view path as the parent sees it, child target, mode) into a mount line
// on the parent's real source, inheriting the parent mount's options. The
// view path must lie within a parent mount target; ro must stay ro.
func DeriveMount(parent []Mount, view, target, mode string) (Mount, error) {
	for _, p := range []string{view, target} {
		if err := validMountPath(p); err != nil {
			return Mount{}, err
		}
	}
	if mode != ModeRO && mode != ModeRW {
		return Mount{}, abi.Errorf(abi.EINVAL, "mode %q: want ro or rw", trunc(mode))
	}
	p, ok := covering(parent, view, func(m Mount) string { return m.Target })
	if !ok {
		return Mount{}, abi.Errorf(abi.EACCES, "attenuation: %s is not visible to the parent", view)
	}
	src := p.Source + strings.TrimPrefix(view, p.Target)
	if p.Target == "/" {
		src = strings.TrimSuffix(p.Source, "/") + view
	}
	c := Mount{Source: src, Target: target, Mode: mode, Options: append([]string(nil), p.Options...)}
	return c, narrower(p, c)
}

// covering finds the mount whose key path holds p most specifically.
func covering(ms []Mount, p string, key func(Mount) string) (Mount, bool) {
	best, found := Mount{}, false
	for _, m := range ms {
		if within(p, key(m)) && (!found || len(key(m)) > len(key(best))) {
			best, found = m, true
		}
	}
	return best, found
}

func narrower(p, c Mount) error {
	if p.Mode == ModeRO && c.Mode == ModeRW {
		return abi.Errorf(abi.EACCES, "attenuation: %s is read-only for the parent; the child may not mount it rw", c.Source)
	}
	for _, o := range restrictive {
		if p.Has(o) && !c.Has(o) {
			return abi.Errorf(abi.EACCES, "attenuation: mount %s drops the parent's %s", c.Source, o)
		}
	}
	return nil
}
