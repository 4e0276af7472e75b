package toolsrc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/tree"
)

// Manager is the tool-source half of cortexfsd: for every tier it serves
// (ServedTiers) it keeps the tier's MCP servers and native plugin hosts
// warm, projects their tools, serves calls on <tier>/.tools.sock, and
// watches the configuration (polling .mcp.json, plugins/ and each
// plugin's manifest and library) so edits apply without a restart.
type Manager struct {
	Root tree.Root
	Logf func(format string, args ...any)
	Poll time.Duration // configuration poll interval; 0 means one second

	mu    sync.Mutex
	tiers map[string]*served
}

type served struct {
	tier   *Tier
	owner  Owner
	cancel context.CancelFunc
	done   chan struct{}
	fp     string
}

func (m *Manager) logf(format string, args ...any) {
	if m.Logf != nil {
		m.Logf(format, args...)
	}
}

// Run serves until ctx ends, then stops every source, marks the projected
// tools unavailable and removes the sockets.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.tiers = map[string]*served{}
	m.mu.Unlock()
	poll := m.Poll
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		m.scan(ctx)
		select {
		case <-ctx.Done():
			m.shutdown()
			return nil
		case <-tick.C:
		}
	}
}

// scan picks up new tiers and refreshes those whose configuration changed.
func (m *Manager) scan(ctx context.Context) {
	for _, ref := range ServedTiers(m.Root, os.Geteuid()) {
		m.mu.Lock()
		s, ok := m.tiers[ref.Path]
		m.mu.Unlock()
		fp := configFingerprint(ref)
		if !ok {
			if !ref.System && fp == "" && !hasProjection(ref) {
				continue // a home tier with nothing configured gets no socket
			}
			m.start(ctx, ref, fp)
			continue
		}
		if s != nil && s.fp != fp {
			s.fp = fp
			go func() {
				if err := s.tier.Refresh(ctx, false); err != nil {
					m.logf("%s: refresh: %v", ref.Name(), err)
				}
			}()
		}
	}
}

func (m *Manager) start(ctx context.Context, ref TierRef, fp string) {
	d, owner, err := openTier(ref)
	if err != nil {
		m.logf("%s: not serving tool sources: %v", ref.Name(), err)
		m.mu.Lock()
		m.tiers[ref.Path] = nil // do not retry every poll; a restart or SIGHUP does
		m.mu.Unlock()
		return
	}
	d.Close()
	ln, err := listenTier(ref, owner)
	if err != nil {
		m.logf("%s: not serving tool sources: %v", ref.Name(), err)
		m.mu.Lock()
		m.tiers[ref.Path] = nil
		m.mu.Unlock()
		return
	}
	tctx, cancel := context.WithCancel(ctx)
	s := &served{tier: NewTier(ref, true, m.Logf), owner: owner, cancel: cancel, done: make(chan struct{}), fp: fp}
	m.mu.Lock()
	m.tiers[ref.Path] = s
	m.mu.Unlock()
	m.logf("%s: serving tool sources on %s", ref.Name(), ref.Socket())
	go func() {
		defer close(s.done)
		s.tier.serve(tctx, ln, owner)
	}()
	go func() {
		if err := s.tier.Refresh(tctx, false); err != nil {
			m.logf("%s: refresh: %v", ref.Name(), err)
		}
	}()
}

// RefreshAll re-reads every served tier (SIGHUP), and retries tiers that
// could not be served before.
func (m *Manager) RefreshAll(ctx context.Context) {
	m.mu.Lock()
	var ts []*served
	for p, s := range m.tiers {
		if s == nil {
			delete(m.tiers, p)
			continue
		}
		ts = append(ts, s)
	}
	m.mu.Unlock()
	for _, s := range ts {
		if err := s.tier.Refresh(ctx, false); err != nil {
			m.logf("%s: refresh: %v", s.tier.Ref.Name(), err)
		}
	}
}

func (m *Manager) shutdown() {
	m.mu.Lock()
	ts := m.tiers
	m.tiers = map[string]*served{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ts {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func(s *served) {
			defer wg.Done()
			s.cancel()
			<-s.done
			s.tier.Close()
			removeSocket(s.tier.Ref)
		}(s)
	}
	wg.Wait()
}

// configFingerprint summarizes the stat of every file the configuration
// of a tier is made of; "" when there is none.
func configFingerprint(ref TierRef) string {
	d, _, err := openTier(ref)
	if err != nil {
		return ""
	}
	defer d.Close()
	h := sha256.New()
	any := false
	stat := func(rel string) {
		if st, err := d.Lstat(rel); err == nil {
			any = true
			fmt.Fprintf(h, "%s|%d|%d|%d|%d|%o|%d\n", rel, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano(), st.Mode, st.Uid)
		}
	}
	stat(MCPConfigFile)
	if pd, err := d.OpenDir(PluginsDir); err == nil {
		stat(PluginsDir)
		names, _ := pd.Names()
		sort.Strings(names)
		for _, n := range names {
			stat(path.Join(PluginsDir, n))
			stat(path.Join(PluginsDir, n, ManifestFile))
			if b, err := pd.ReadFile(path.Join(n, ManifestFile), MaxConfigFile); err == nil {
				if man, err := ParseManifest(b); err == nil && man.Native != nil {
					stat(path.Join(PluginsDir, n, man.Native.Library))
				}
			}
		}
		pd.Close()
	}
	if !any {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// hasProjection reports whether the tier's tool/ holds projected tools
// (left from an earlier configuration, to be cleaned up).
func hasProjection(ref TierRef) bool {
	d, _, err := openTier(ref)
	if err != nil {
		return false
	}
	defer d.Close()
	td, err := d.OpenDir(tree.ToolDir)
	if err != nil {
		return false
	}
	defer td.Close()
	disk, err := scanToolDir(td)
	if err != nil {
		return false
	}
	for _, e := range disk {
		if e.ours {
			return true
		}
	}
	return false
}
