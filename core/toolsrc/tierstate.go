package toolsrc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tool"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Tier is the tool sources of one tier and their projection. Warm (in
// cortexfsd) it keeps servers and plugin hosts running and serves calls;
// otherwise (`ctx tool refresh` with no daemon) it lists every source once
// and writes the projection with MCP and native tools unavailable.
type Tier struct {
	Ref  TierRef
	warm bool
	logf func(string, ...any)

	mu        sync.Mutex
	sources   map[string]source
	problems  []string // config files that could not be used at all
	table     map[string]*projected
	reports   map[string][]ToolReport
	projectMu sync.Mutex
	kick      chan struct{}
	dirty     atomic.Bool // a source changed since the last projection
	stopped   chan struct{}
}

// NewTier makes the sources state of one tier; warm tiers start a
// projection loop (Close ends it).
func NewTier(ref TierRef, warm bool, logf func(string, ...any)) *Tier {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	t := &Tier{Ref: ref, warm: warm, logf: logf, sources: map[string]source{}, table: map[string]*projected{},
		reports: map[string][]ToolReport{}, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	if warm {
		go t.projectLoop()
	}
	return t
}

func (t *Tier) changed() {
	t.dirty.Store(true)
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *Tier) projectLoop() {
	for {
		select {
		case <-t.stopped:
			return
		case <-t.kick:
			if err := t.project(); err != nil {
				t.logf("%s: projection: %v", t.Ref.Name(), err)
			}
		}
	}
}

// wanted is one source the configuration asks for.
type wanted struct {
	key, fp string
	make    func() source
}

// Refresh re-reads the tier's configuration: new sources start, removed
// ones stop, changed ones are replaced; then the projection is written.
// With wait, it first waits (bounded) for every new source's first
// listing, so the caller sees the tools appear.
func (t *Tier) Refresh(ctx context.Context, wait bool) error {
	ws, problems, err := t.readConfig()
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.problems = problems
	var started []source
	seen := map[string]bool{}
	for _, w := range ws {
		seen[w.key] = true
		if cur, ok := t.sources[w.key]; ok && cur.fingerprint() == w.fp {
			continue
		}
		if cur, ok := t.sources[w.key]; ok {
			t.logf("%s: %s changed; replacing it", t.Ref.Name(), w.key)
			go cur.stop()
		}
		s := w.make()
		t.sources[w.key] = s
		started = append(started, s)
	}
	for k, s := range t.sources {
		if !seen[k] {
			t.logf("%s: %s removed", t.Ref.Name(), k)
			go s.stop()
			delete(t.sources, k)
		}
	}
	t.mu.Unlock()
	for _, s := range started {
		s.start(t.warm)
	}
	if wait {
		deadline := time.NewTimer(StartTimeout + 5*time.Second)
		defer deadline.Stop()
		for _, s := range started {
			select {
			case <-s.firstDone():
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline.C:
			}
		}
	}
	return t.project()
}

// readConfig reads .mcp.json and plugins/*/manifest.toml (fd-relative,
// trusted, bounded). A config file that cannot be used at all is a
// problem of the tier; a bad entry becomes a failed source.
func (t *Tier) readConfig() ([]wanted, []string, error) {
	d, owner, err := openTier(t.Ref)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	var ws []wanted
	var problems []string
	if err := trustedStatOf(d, ".", owner.UID); err != nil {
		return nil, []string{err.Error()}, nil
	}
	raw, _, err := readTrusted(d, MCPConfigFile, owner.UID, MaxConfigFile)
	if err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", MCPConfigFile, err))
	} else if cfg, err := ParseMCPConfig(raw); err != nil {
		problems = append(problems, err.Error())
	} else {
		for _, sc := range cfg.Servers {
			sc := sc
			ws = append(ws, wanted{key: "mcp:" + sc.Name, fp: sc.Fingerprint() + errText(sc.Err), make: func() source {
				return newMCPSource(sc, owner, t.changed, t.logf)
			}})
		}
	}
	pw, pp := t.readPlugins(d, owner)
	return append(ws, pw...), append(problems, pp...), nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func trustedStatOf(d *safefs.Dir, rel string, owner int) error {
	st, err := d.Lstat(rel)
	if err != nil {
		return err
	}
	return trustedStat(st, path.Join(d.Path(), rel), owner)
}

// readPlugins scans plugins/: one source per directory holding a
// manifest.toml whose name is the directory's.
func (t *Tier) readPlugins(d *safefs.Dir, owner Owner) ([]wanted, []string) {
	pd, err := d.OpenDir(PluginsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", PluginsDir, err)}
	}
	defer pd.Close()
	if err := trustedStatOf(d, PluginsDir, owner.UID); err != nil {
		return nil, []string{err.Error()}
	}
	names, err := pd.Names()
	if err != nil {
		return nil, []string{err.Error()}
	}
	sort.Strings(names)
	var ws []wanted
	var problems []string
	for _, n := range names {
		if n[0] == '.' {
			continue // staging directories of ctx plugin install
		}
		if err := ValidSourceName(n); err != nil {
			problems = append(problems, fmt.Sprintf("%s/%s: %v", PluginsDir, n, err))
			continue
		}
		man, fp, err := loadPlugin(pd, n, owner.UID)
		key := "plugin:" + n
		if err != nil {
			err := err
			ws = append(ws, wanted{key: key, fp: "failed:" + err.Error(), make: func() source {
				return newFailedSource(n, PrefixPlugin, "plugin", err, t.changed)
			}})
			continue
		}
		ref := t.Ref
		if man.Native != nil {
			ws = append(ws, wanted{key: key, fp: fp, make: func() source {
				return newNativeSource(ref, owner, man, fp, t.changed, t.logf)
			}})
		} else {
			ws = append(ws, wanted{key: key, fp: fp, make: func() source { return newProcessSource(man, fp, t.changed) }})
		}
	}
	return ws, problems
}

// loadPlugin reads and checks one plugin directory; the fingerprint covers
// the manifest's bytes and, for a native plugin, its library file.
func loadPlugin(pd *safefs.Dir, name string, owner int) (Manifest, string, error) {
	if err := checkTrustedDir(pd, name, owner); err != nil {
		return Manifest{}, "", err
	}
	raw, _, err := readTrusted(pd, path.Join(name, ManifestFile), owner, MaxConfigFile)
	if err != nil {
		return Manifest{}, "", err
	}
	if raw == nil {
		return Manifest{}, "", abi.Errorf(abi.ENOENT, "%s/%s has no %s", PluginsDir, name, ManifestFile)
	}
	man, err := ParseManifest(raw)
	if err != nil {
		return Manifest{}, "", err
	}
	if man.Name != name {
		return Manifest{}, "", abi.Errorf(abi.EINVAL, "%s: name %q must equal the plugin's directory name %q", ManifestFile, man.Name, name)
	}
	h := sha256.New()
	h.Write(raw)
	if man.Native != nil {
		if st, err := pd.Lstat(path.Join(name, man.Native.Library)); err == nil {
			fmt.Fprintf(h, "|%d|%d|%d|%d", st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
		}
	}
	return man, hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// project computes and writes the projection from the sources' current
// tools and states.
func (t *Tier) project() error {
	t.projectMu.Lock()
	defer t.projectMu.Unlock()
	t.dirty.Store(false)
	d, owner, err := openTier(t.Ref)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	t.mu.Lock()
	sources := make([]source, 0, len(t.sources))
	for _, s := range t.sources {
		sources = append(sources, s)
	}
	t.mu.Unlock()
	sort.Slice(sources, func(i, j int) bool { return sources[i].key() < sources[j].key() })
	fo := safefs.Keep
	if os.Geteuid() == 0 {
		fo = safefs.Owner{UID: owner.UID, GID: owner.GID}
	}
	if len(sources) == 0 {
		if _, err := d.Lstat(tree.ToolDir); errors.Is(err, fs.ErrNotExist) {
			return nil // nothing projected, nothing to clean
		}
	}
	td, err := d.MkdirAll(tree.ToolDir, tree.DirMode, fo)
	if err != nil {
		return err
	}
	defer td.Close()
	disk, err := scanToolDir(td)
	if err != nil {
		return err
	}
	p := makePlan(sources, disk, t.systemNames())
	w := &writer{td: td, owner: fo, runner: runnerOf(t.Ref.Root), tier: t.Ref, grants: agentGrants(d, owner.UID)}
	errs := w.apply(p, disk, t.warm)
	t.mu.Lock()
	t.table, t.reports = p.want, p.reports
	t.mu.Unlock()
	return errors.Join(errs...)
}

// systemNames are the system tier's tool names, which a home tier's
// projection must not shadow.
func (t *Tier) systemNames() map[string]bool {
	if t.Ref.System {
		return nil
	}
	out := map[string]bool{}
	es, _ := os.ReadDir(SystemTier(t.Ref.Root).ToolDir())
	for _, e := range es {
		if abi.ValidName(e.Name()) == nil {
			out[e.Name()] = true
		}
	}
	return out
}

// Close stops every source and, for a warm tier, marks its projected
// tools unavailable (nobody serves them any more).
func (t *Tier) Close() {
	select {
	case <-t.stopped:
		return
	default:
		close(t.stopped)
	}
	t.mu.Lock()
	sources := t.sources
	t.sources = map[string]source{}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Add(1)
		go func(s source) { defer wg.Done(); s.stop() }(s)
	}
	wg.Wait()
	if !t.warm {
		return
	}
	t.projectMu.Lock()
	defer t.projectMu.Unlock()
	d, owner, err := openTier(t.Ref)
	if err != nil {
		return
	}
	defer d.Close()
	td, err := d.OpenDir(tree.ToolDir)
	if err != nil {
		return
	}
	defer td.Close()
	if disk, err := scanToolDir(td); err == nil {
		fo := safefs.Keep
		if os.Geteuid() == 0 {
			fo = safefs.Owner{UID: owner.UID, GID: owner.GID}
		}
		(&writer{td: td, owner: fo, tier: t.Ref}).setAllStatus(disk, "", "unavailable")
	}
}

// current brings the projection up to date when a source changed since
// it was written, so a report or a call never acts on an older one.
func (t *Tier) current() {
	if t.dirty.Load() {
		if err := t.project(); err != nil {
			t.logf("%s: projection: %v", t.Ref.Name(), err)
		}
		return
	}
	// A projection under way has cleared dirty but not yet published its
	// table: wait for it.
	t.projectMu.Lock()
	t.projectMu.Unlock()
}

// lookup returns the projected tool called name.
func (t *Tier) lookup(name string) (*projected, error) {
	t.current()
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.table[name]
	if !ok {
		return nil, abi.Errorf(abi.ENOENT, "tool %s is not a projected tool of %s (see ctx tool sources)", trunc(name), t.Ref.Name())
	}
	return p, nil
}

// Call runs one call of a projected tool: input validated against its
// schema, dry-run support checked, its timeout applied.
func (t *Tier) Call(ctx context.Context, name string, req CallRequest, timeout time.Duration) (Result, *projected, error) {
	p, err := t.lookup(name)
	if err != nil {
		return Result{}, nil, err
	}
	rs, err := p.inputSchema()
	if err == nil {
		err = tool.ValidateResolved(rs, req.Input)
	}
	if err != nil {
		return Result{}, p, abi.Errorf(abi.EINVAL, "%s: %v", name, err)
	}
	if req.DryRun && !tool.CanDryRun(p.Spec.Effects) {
		return Result{}, p, abi.Errorf(abi.ENOTSUP, "%s declares no dry run", name)
	}
	if p.Spec.TimeoutSecs > 0 && (timeout <= 0 || time.Duration(p.Spec.TimeoutSecs)*time.Second < timeout) {
		timeout = time.Duration(p.Spec.TimeoutSecs) * time.Second
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := p.Source.call(ctx, p.Spec, req)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && abi.CodeOf(err) != abi.ETIMEDOUT {
		err = abi.Errorf(abi.ETIMEDOUT, "%s: no result within %v: %v", name, timeout, err)
	}
	return res, p, err
}

// Report is the tier's sources, their states and tools.
func (t *Tier) Report() TierReport {
	t.current()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := TierReport{Tier: t.Ref.Name(), Path: t.Ref.Path, Served: t.warm, Problems: t.problems}
	for _, s := range t.sources {
		sr := SourceReport{Tier: t.Ref.Name(), Kind: s.kind(), Name: s.name(), SourceStatus: s.status(), Served: t.warm,
			Tools: t.reports[s.key()]}
		if !t.warm && sr.State != StateFailed {
			sr.State = StateNotServed
		}
		if m, ok := s.(*mcpSource); ok {
			sr.Transport = m.cfg.Transport
		}
		r.Sources = append(r.Sources, sr)
	}
	sort.Slice(r.Sources, func(i, j int) bool {
		if r.Sources[i].Kind != r.Sources[j].Kind {
			return r.Sources[i].Kind < r.Sources[j].Kind
		}
		return r.Sources[i].Name < r.Sources[j].Name
	})
	return r
}

// TierReport is one tier in `ctx tool sources`.
type TierReport struct {
	Tier     string         `json:"tier"`
	Path     string         `json:"path"`
	Served   bool           `json:"served"` // a cortexfsd serves this tier
	Problems []string       `json:"problems,omitempty"`
	Sources  []SourceReport `json:"sources"`
}

// SourceReport is one source in `ctx tool sources`.
type SourceReport struct {
	Tier      string `json:"tier"`
	Kind      string `json:"kind"` // mcp | native | process
	Name      string `json:"name"`
	Transport string `json:"transport,omitempty"`
	Served    bool   `json:"served"`
	SourceStatus
	Tools []ToolReport `json:"tools"`
}

// failedSource stands for a configured source that cannot be used (a bad
// manifest): it is reported, and projects nothing.
type failedSource struct {
	life
	n, pfx, kd string
	err        error
}

func newFailedSource(name, prefix, kind string, err error, changed func()) *failedSource {
	return &failedSource{life: newLife(changed), n: name, pfx: prefix, kd: kind, err: err}
}

func (s *failedSource) key() string         { return s.pfx + ":" + s.n }
func (s *failedSource) name() string        { return s.n }
func (s *failedSource) prefix() string      { return s.pfx }
func (s *failedSource) kind() string        { return s.kd }
func (s *failedSource) fingerprint() string { return "failed:" + s.err.Error() }
func (s *failedSource) start(bool)          { s.set(StateFailed, s.err, 0, nil, true) }
func (s *failedSource) stop()               { s.life.stop() }
func (s *failedSource) call(context.Context, ToolSpec, CallRequest) (Result, error) {
	return Result{}, abi.Errorf(abi.EHOSTDOWN, "%s: %v", s.key(), s.err)
}
