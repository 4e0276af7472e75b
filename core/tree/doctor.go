package tree

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Check is one finding of Doctor.
type Check struct {
	Check  string `json:"check"`
	Path   string `json:"path,omitempty"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Doctor inspects a tree without changing it: every object parses as
// metadata, its runner exists and is executable, modes are the expected
// ones (objects 0755, control files 0644), and model control files parse.
func Doctor(r Root, uid int, checkModel func(Object) error) ([]Check, error) {
	entries, err := List(r, uid)
	if err != nil {
		return nil, err
	}
	var out []Check
	add := func(c Check) { out = append(out, c) }
	runners := map[string]bool{}
	for _, e := range entries {
		if e.Error != "" {
			add(Check{Check: "object", Path: e.Path, Detail: e.Error})
			if o, err := Resolve(e.Path); err == nil && e.AliasOf == "" {
				runners[o.Meta.Runner] = true // an object that cannot run: say so of its runner too
			}
			continue
		}
		if e.AliasOf != "" {
			add(Check{Check: "alias", Path: e.Path, OK: true, Detail: "-> " + e.AliasOf})
			continue
		}
		o, err := Resolve(e.Path)
		if err != nil {
			add(Check{Check: "object", Path: e.Path, Detail: err.Error()})
			continue
		}
		add(modeCheck("object mode", o.Path, ObjectMode))
		for _, f := range ctlFiles(o) {
			add(modeCheck("control mode", f, ControlMode))
		}
		runners[o.Meta.Runner] = true
		if o.Class == abi.ClassModel && checkModel != nil {
			c := Check{Check: "model control files", Path: o.Path, OK: true}
			if err := checkModel(o); err != nil {
				c.OK, c.Detail = false, err.Error()
			}
			add(c)
		}
	}
	for rp := range runners {
		c := Check{Check: "runner", Path: rp, OK: true}
		if err := RunnerProblem(rp); err != nil {
			c.OK, c.Detail = false, fmt.Sprintf("%v (objects using it cannot run; ctx init --runner PATH)", err)
		} else if filepath.Base(rp) != "cortexfs-object-runner" {
			c.Detail = "runner is not named cortexfs-object-runner; dispatch happens on that name"
			c.OK = false
		}
		add(c)
	}
	return out, nil
}

func ctlFiles(o Object) []string {
	es, _ := os.ReadDir(o.Ctl(""))
	var out []string
	for _, e := range es {
		if e.Type().IsRegular() {
			out = append(out, o.Ctl(e.Name()))
		}
	}
	return out
}

func modeCheck(name, p string, want os.FileMode) Check {
	c := Check{Check: name, Path: p, OK: true}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		c.OK, c.Detail = false, err.Error()
	case fi.Mode().Perm() != want:
		c.OK, c.Detail = false, fmt.Sprintf("mode %04o, want %04o", fi.Mode().Perm(), want)
	}
	return c
}
