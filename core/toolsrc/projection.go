package toolsrc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tool"
	"github.com/cortexfs/cortexfs/core/tree"
)

// A projected tool is an ordinary tool object in the tier's tool/:
//
//	tool/mcp.everything.echo        #!<runner>, cortexfs.object=tool, name=…, description=…, source=mcp
//	tool/mcp.everything.echo.d/
//	    name  description  schema  cap  policy  status  log
//	    origin    diagnostic, not stable ABI: source=, server= or plugin=, tool=<original name>, …
//	    effects   the seed's ToolEffects as a JSON array (when it has any)
//	    timeout   timeout_secs (when set)
//
// The object file's "source" metadata marks it as projected; only such
// files are ever rewritten or removed. .d/policy is created once with the
// usual comment header and never touched again (admins add allow lines);
// .d/log is created once and appended to per call.

// projected is one tool in the tier's current projection.
type projected struct {
	Name   string
	Source source
	Spec   ToolSpec

	schemaOnce sync.Once
	schema     *jsonschema.Resolved
	schemaErr  error
}

// inputSchema is the tool's compiled input schema (compiled once).
func (p *projected) inputSchema() (*jsonschema.Resolved, error) {
	p.schemaOnce.Do(func() { p.schema, p.schemaErr = tool.CompileInput(p.Spec.Input) })
	return p.schema, p.schemaErr
}

// ToolReport is one tool of a source in `ctx tool sources`.
type ToolReport struct {
	Name     string `json:"name,omitempty"` // the projected name ("" when it clashes)
	Original string `json:"original"`
	Status   string `json:"status"` // ready | unavailable | clash
	Clash    string `json:"clash,omitempty"`
}

// diskEntry is what a tool/ entry is, as far as projection cares.
type diskEntry struct {
	ours      bool   // projected (object metadata has source=)
	sourceKey string // "mcp:NAME" / "plugin:NAME" from .d/origin
	original  string
	kind      string // .d/origin kind= (plugins)
}

// scanToolDir reads tool/ of a tier: every entry that could be a tool.
func scanToolDir(td *safefs.Dir) (map[string]diskEntry, error) {
	names, err := td.Names()
	if err != nil {
		return nil, err
	}
	out := map[string]diskEntry{}
	for _, n := range names {
		if abi.ValidName(n) != nil {
			continue
		}
		e := diskEntry{}
		if b, err := td.ReadFile(n, abi.MaxControlFile); err == nil {
			if m, err := tree.ParseMeta(b); err == nil && m.Get("source") != "" {
				e.ours = true
				if ob, err := td.ReadFile(n+abi.CtlSuffix+"/origin", abi.MaxControlFile); err == nil {
					kv, _ := abi.ParseKV(ob)
					e.sourceKey, e.original, e.kind = originKey(kv), kvGet(kv, "tool"), kvGet(kv, "kind")
				}
			}
		}
		out[n] = e
	}
	return out, nil
}

func originKey(kv []abi.KV) string {
	switch kvGet(kv, "source") {
	case PrefixMCP:
		return "mcp:" + kvGet(kv, "server")
	case PrefixPlugin:
		return "plugin:" + kvGet(kv, "plugin")
	}
	return ""
}

func kvGet(kv []abi.KV, k string) string {
	for _, x := range kv {
		if x.Key == k {
			return x.Value
		}
	}
	return ""
}

// plan is the projection a tier's sources ask for.
type plan struct {
	want    map[string]*projected // written (status from the source's state)
	keep    map[string]string     // on disk, of a source that has not listed yet: name → source key
	reports map[string][]ToolReport
}

// makePlan maps every source's tools to names and resolves clashes: a
// name wanted twice, or already a tool that is not this source's
// projection, or (for a home tier) already a tool of the system tier, is
// projected for nobody and reported on every source that wanted it.
func makePlan(sources []source, disk map[string]diskEntry, system map[string]bool) plan {
	p := plan{want: map[string]*projected{}, keep: map[string]string{}, reports: map[string][]ToolReport{}}
	type cand struct {
		name string
		src  source
		spec *ToolSpec // nil: kept from disk
		orig string
	}
	var cands []cand
	for _, s := range sources {
		specs, listed := s.tools()
		if !listed {
			for n, e := range disk {
				if e.ours && e.sourceKey == s.key() {
					cands = append(cands, cand{name: n, src: s, orig: e.original})
				}
			}
			continue
		}
		for i := range specs {
			n, err := ProjectedName(s.prefix(), s.name(), specs[i].Original)
			if err != nil {
				p.reports[s.key()] = append(p.reports[s.key()], ToolReport{Original: specs[i].Original, Status: "clash", Clash: err.Error()})
				continue
			}
			cands = append(cands, cand{name: n, src: s, spec: &specs[i], orig: specs[i].Original})
		}
	}
	count := map[string]int{}
	for _, c := range cands {
		count[c.name]++
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].name < cands[j].name })
	for _, c := range cands {
		why := ""
		switch e, onDisk := disk[c.name]; {
		case count[c.name] > 1:
			why = "two tools map to " + c.name
		case onDisk && (!e.ours || e.sourceKey != "" && e.sourceKey != c.src.key()):
			why = "tool/" + c.name + " already exists in this tier and is not this source's"
		case system[c.name]:
			why = "the system tier has tool/" + c.name + " (it comes first on CTX_PATH)"
		}
		if why != "" {
			p.reports[c.src.key()] = append(p.reports[c.src.key()], ToolReport{Original: c.orig, Status: "clash", Clash: why})
			continue
		}
		if c.spec == nil {
			p.keep[c.name] = c.src.key()
			p.reports[c.src.key()] = append(p.reports[c.src.key()], ToolReport{Name: c.name, Original: c.orig, Status: toolStatus(c.src, false)})
			continue
		}
		p.want[c.name] = &projected{Name: c.name, Source: c.src, Spec: *c.spec}
		p.reports[c.src.key()] = append(p.reports[c.src.key()], ToolReport{Name: c.name, Original: c.orig, Status: toolStatus(c.src, true)})
	}
	return p
}

// toolStatus is a projected tool's .d/status: ready when its source can
// serve a call now, unavailable otherwise.
func toolStatus(s source, listed bool) string {
	if listed && (s.status().State == StateReady || s.kind() == KindProcess) {
		return "ready"
	}
	return "unavailable"
}

// writer writes a tier's projection.
type writer struct {
	td     *safefs.Dir
	owner  safefs.Owner
	runner string
	tier   TierRef
	grants map[string][]string // tool name → agent types to allow in a new .d/policy
}

// apply makes tool/ match the plan: wanted entries written (only files
// whose content changed), kept entries' status set, stale projections
// (ours, neither wanted nor kept) removed. Errors are collected, not
// fatal: one bad entry must not stop the rest.
func (w *writer) apply(p plan, disk map[string]diskEntry, served bool) []error {
	var errs []error
	for _, n := range sortedNames(p.want) {
		pr := p.want[n]
		status := toolStatus(pr.Source, true)
		if !served && pr.Source.kind() != KindProcess {
			status = "unavailable"
		}
		if err := w.write(pr, status); err != nil {
			errs = append(errs, err)
		}
	}
	for n := range p.keep {
		if err := w.control(n, "status", []byte("unavailable\n")); err != nil {
			errs = append(errs, err)
		}
	}
	for n, e := range disk {
		if _, ok := p.want[n]; ok || !e.ours {
			continue
		}
		if _, ok := p.keep[n]; ok {
			continue
		}
		if err := w.remove(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func sortedNames(m map[string]*projected) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// write writes one projected tool.
func (w *writer) write(pr *projected, status string) error {
	s, spec := pr.Source, pr.Spec
	meta, err := tree.Meta{Runner: w.runner, Class: abi.ClassTool, KV: []abi.KV{
		{Key: "name", Value: pr.Name}, {Key: "description", Value: oneLine(spec.Description, 200)},
		{Key: "source", Value: s.prefix()}}}.Format()
	if err != nil {
		return err
	}
	ctl := pr.Name + abi.CtlSuffix
	if _, err := w.td.Lstat(ctl); errors.Is(err, fs.ErrNotExist) {
		d, err := w.td.MkdirAll(ctl, tree.DirMode, w.owner)
		if err != nil {
			return err
		}
		d.Close()
	}
	schema, _ := json.MarshalIndent(struct {
		Input  json.RawMessage `json:"input"`
		Output json.RawMessage `json:"output,omitempty"`
	}{spec.Input, spec.Output}, "", "  ")
	origin := []abi.KV{{Key: "source", Value: s.prefix()}}
	if s.prefix() == PrefixMCP {
		origin = append(origin, abi.KV{Key: "server", Value: s.name()})
	} else {
		origin = append(origin, abi.KV{Key: "plugin", Value: s.name()}, abi.KV{Key: "kind", Value: s.kind()})
	}
	origin = append(origin, abi.KV{Key: "tool", Value: spec.Original}, abi.KV{Key: "tier", Value: w.tier.Name()})
	for _, kv := range spec.Origin {
		origin = append(origin, abi.KV{Key: kv.Key, Value: oneLine(kv.Value, 2000)})
	}
	ob, err := abi.FormatKV(origin)
	if err != nil {
		return err
	}
	caps := spec.Caps
	for _, e := range spec.Effects {
		caps = append(caps, e.Kind)
	}
	files := []struct {
		name string
		data []byte
	}{
		{"name", []byte(pr.Name + "\n")},
		{"description", []byte(strings.TrimSpace(spec.Description) + "\n")},
		{"schema", append(schema, '\n')},
		{"cap", []byte(lines(caps))},
		{"origin", ob},
		{"status", []byte(status + "\n")},
	}
	for _, f := range files {
		if err := w.control(pr.Name, f.name, f.data); err != nil {
			return err
		}
	}
	if err := w.optional(pr.Name, "effects", tool.FormatEffects(spec.Effects)); err != nil {
		return err
	}
	timeout := []byte(nil)
	if spec.TimeoutSecs > 0 {
		timeout = []byte(strconv.Itoa(spec.TimeoutSecs) + "\n")
	}
	if err := w.optional(pr.Name, "timeout", timeout); err != nil {
		return err
	}
	own := []byte(tree.ToolPolicyHeader)
	for _, typ := range w.grants[pr.Name] {
		own = append(own, policy.Rule{Subject: typ, Class: policy.ClassTool, Object: pr.Name, Perm: "execute"}.String()+"\n"...)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"policy", own}, {"log", nil}} {
		if err := w.createOnce(path.Join(ctl, f.name), f.data); err != nil {
			return err
		}
	}
	// The object file last: once it is there, so is everything it needs.
	return w.file(pr.Name, meta, tree.ObjectMode)
}

func lines(words []string) string {
	if len(words) == 0 {
		return ""
	}
	return strings.Join(words, "\n") + "\n"
}

// file writes rel with data unless it already holds exactly that.
func (w *writer) file(rel string, data []byte, mode os.FileMode) error {
	if cur, err := w.td.ReadFile(rel, int64(len(data))+1); err == nil && bytes.Equal(cur, data) {
		if st, err := w.td.Lstat(rel); err == nil && os.FileMode(st.Mode&0o777) == mode {
			return nil
		}
	}
	return w.td.WriteFile(rel, data, mode, w.owner)
}

func (w *writer) control(name, file string, data []byte) error {
	return w.file(path.Join(name+abi.CtlSuffix, file), data, tree.ControlMode)
}

// optional writes a control file, or removes it when data is empty.
func (w *writer) optional(name, file string, data []byte) error {
	if len(data) == 0 {
		err := w.td.Remove(path.Join(name+abi.CtlSuffix, file))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return w.control(name, file, data)
}

// createOnce creates rel with data when it does not exist; an existing
// file is never changed.
func (w *writer) createOnce(rel string, data []byte) error {
	f, err := w.td.Create(rel, tree.ControlMode, w.owner)
	if abi.CodeOf(err) == abi.EEXIST {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(data)
	return err
}

// remove deletes a projected tool (object and .d/) after re-checking,
// under the same descriptor, that it is a projection.
func (w *writer) remove(name string) error {
	b, err := w.td.ReadFile(name, abi.MaxControlFile)
	if err != nil {
		return err
	}
	if m, err := tree.ParseMeta(b); err != nil || m.Get("source") == "" {
		return nil
	}
	// The object first, so nothing finds it half removed.
	if err := w.td.Remove(name); err != nil {
		return err
	}
	return w.td.RemoveAll(name + abi.CtlSuffix)
}

// setAllStatus writes status into every projection that a daemon serves
// (MCP and native tools; process plugins need none) of source key, or of
// every source when key is "": used at shutdown.
func (w *writer) setAllStatus(disk map[string]diskEntry, key, status string) {
	for n, e := range disk {
		if e.ours && e.kind != KindProcess && (key == "" || e.sourceKey == key) {
			_ = w.control(n, "status", []byte(status+"\n"))
		}
	}
}

// runnerOf is the interpreter in the #! line of the system tier's built-in
// tools (what `ctx init --runner` chose), else tree.DefaultRunner.
func runnerOf(r tree.Root) string {
	root, err := safefs.OpenRoot(string(r))
	if err != nil {
		return tree.DefaultRunner
	}
	defer root.Close()
	for _, t := range tool.All() {
		b, err := root.ReadFile(path.Join(tree.ToolDir, t.Name), abi.MaxControlFile)
		if err != nil {
			continue
		}
		if m, err := tree.ParseMeta(b); err == nil && m.Get("source") == "" {
			return m.Runner
		}
	}
	return tree.DefaultRunner
}

// agentGrants reads the agents of the tier (agent/<name>.d/policy, trusted
// files of the tier's owner only) and returns, per tool name, the agent
// types their policies allow to execute it.
func agentGrants(d *safefs.Dir, owner int) map[string][]string {
	out := map[string][]string{}
	ad, err := d.OpenDir(tree.AgentDir)
	if err != nil {
		return out
	}
	defer ad.Close()
	names, _ := ad.Names()
	sort.Strings(names)
	for _, n := range names {
		if abi.ValidName(n) != nil {
			continue
		}
		b, _, err := readTrusted(ad, path.Join(n+abi.CtlSuffix, "policy"), owner, abi.MaxControlFile)
		if err != nil || b == nil {
			continue
		}
		p, err := policy.Parse(b)
		if err != nil {
			continue
		}
		for _, r := range p.Rules {
			if r.Class == policy.ClassTool && r.Perm == "execute" && !slices.Contains(out[r.Object], r.Subject) {
				out[r.Object] = append(out[r.Object], r.Subject)
			}
		}
	}
	return out
}
