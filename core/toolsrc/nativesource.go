package toolsrc

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/plughost"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// HostStartTimeout bounds loading a native plugin.
var HostStartTimeout = 30 * time.Second

// nativeSource is one trusted native plugin, loaded by a plugin host
// process. Warm, the host stays up; when it dies (the plugin crashed, or a
// call overran its timeout and the host was killed) it is restarted with
// backoff and the plugin's tools are unavailable meanwhile. A changed
// library or manifest replaces the source: the new code is loaded without
// restarting cortexfsd.
type nativeSource struct {
	life
	tier  TierRef
	owner Owner
	man   Manifest
	fp    string
	logf  func(string, ...any)

	hmu  sync.Mutex
	host *plughost.Host
}

func newNativeSource(t TierRef, owner Owner, man Manifest, fp string, changed func(), logf func(string, ...any)) *nativeSource {
	return &nativeSource{life: newLife(changed), tier: t, owner: owner, man: man, fp: fp, logf: logf}
}

func (s *nativeSource) key() string         { return "plugin:" + s.man.Name }
func (s *nativeSource) name() string        { return s.man.Name }
func (s *nativeSource) prefix() string      { return PrefixPlugin }
func (s *nativeSource) kind() string        { return KindNative }
func (s *nativeSource) fingerprint() string { return s.fp }

func (s *nativeSource) start(warm bool) {
	if !warm {
		go s.probe()
		return
	}
	go s.run()
}

func (s *nativeSource) probe() {
	h, specs, err := s.load()
	if err != nil {
		s.set(StateNotServed, err, 0, nil, false)
		return
	}
	_ = h.Close(5 * time.Second)
	s.set(StateNotServed, nil, 0, specs, true)
}

func (s *nativeSource) run() {
	var b backoff
	for !s.stopped() {
		started := time.Now()
		h, specs, err := s.load()
		if err != nil {
			if code := abi.CodeOf(err); code == abi.ENOTSUP || code == abi.EINVAL || code == abi.EACCES || code == abi.EPROTO {
				// Refused as it is (wrong ABI version, not a plugin, not
				// trusted, bad descriptors): retrying cannot help; a
				// change to the plugin replaces this source.
				s.set(StateFailed, err, 0, nil, true)
				s.logf("plugin %s: %v", s.man.Name, err)
				return
			}
			s.set(StateUnavailable, err, 0, nil, false)
			s.logf("plugin %s: %v", s.man.Name, err)
		} else {
			s.hmu.Lock()
			s.host = h
			s.hmu.Unlock()
			s.set(StateReady, nil, h.Pid(), specs, true)
			s.logf("plugin %s: loaded, %d tools (host pid %d)", s.man.Name, len(specs), h.Pid())
			select {
			case <-s.stopCh:
				if err := h.Close(10 * time.Second); err != nil {
					s.logf("plugin %s: %v", s.man.Name, err)
				}
				return
			case <-h.Done():
			}
			s.hmu.Lock()
			s.host = nil
			s.hmu.Unlock()
			_ = h.Close(time.Second)
			err = abi.Errorf(abi.EHOSTDOWN, "plugin host ended (%s)", h.ExitText())
			s.set(StateUnavailable, err, 0, nil, false)
			s.logf("plugin %s: %v; restarting", s.man.Name, err)
		}
		if !s.wait(b.next(time.Since(started))) {
			return
		}
		s.restarted()
	}
}

// load opens the library (fd-relative, no symlinks, trusted) and starts a
// host for it.
func (s *nativeSource) load() (*plughost.Host, []ToolSpec, error) {
	lib, err := s.openLibrary()
	if err != nil {
		return nil, nil, err
	}
	defer lib.Close()
	ctx, cancel := context.WithTimeout(context.Background(), HostStartTimeout)
	defer cancel()
	h, err := plughost.Start(ctx, plughost.Options{Library: lib, Credential: s.owner.Credential(),
		Env: serverEnv(s.owner, nil), Stderr: prefixWriter{s.logf, "plugin " + s.man.Name + ": "}})
	if err != nil {
		return nil, nil, err
	}
	specs, err := s.describe(h)
	if err != nil {
		_ = h.Close(5 * time.Second)
		return nil, nil, err
	}
	return h, specs, nil
}

func (s *nativeSource) describe(h *plughost.Host) ([]ToolSpec, error) {
	info, err := DecodePluginInfo(h.Info)
	if err != nil {
		return nil, err
	}
	var specs []ToolSpec
	seen := map[string]bool{}
	for i, d := range h.Descriptors {
		spec, err := DecodeDescriptor(s.man.Name, d)
		if err != nil {
			return nil, abi.Errorf(abi.EPROTO, "descriptor %d: %v", i, err)
		}
		if seen[spec.Original] {
			return nil, abi.Errorf(abi.EPROTO, "two tools are called %q", trunc(spec.Original))
		}
		seen[spec.Original] = true
		spec.Origin = []abi.KV{{Key: "plugin_info", Value: info.Name + " " + info.Version}}
		specs = append(specs, spec)
	}
	return specs, nil
}

// openLibrary opens plugins/<name>/<library> beneath the tier: every
// directory on the way and the library itself must be trusted.
func (s *nativeSource) openLibrary() (*os.File, error) {
	d, owner, err := openTier(s.tier)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	rel := path.Join(PluginsDir, s.man.Name, s.man.Native.Library)
	dirs := strings.Split(path.Dir(rel), "/")
	for i := range dirs {
		if err := checkTrustedDir(d, path.Join(dirs[:i+1]...), owner.UID); err != nil {
			return nil, err
		}
	}
	f, err := d.Open(rel)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "plugin %s: library: %v", s.man.Name, err)
	}
	st, err := safefs.Fstat(f)
	if err == nil {
		err = trustedStat(st, f.Name(), owner.UID)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (s *nativeSource) stop() {
	s.life.stop()
}

func (s *nativeSource) call(ctx context.Context, spec ToolSpec, req CallRequest) (Result, error) {
	s.hmu.Lock()
	h := s.host
	s.hmu.Unlock()
	if h == nil {
		st := s.status()
		return Result{}, abi.Errorf(abi.EHOSTDOWN, "plugin %s is %s: %s", s.man.Name, st.State, st.Error)
	}
	inv := req.Invocation
	inv.ToolName, inv.DryRun = spec.Original, req.DryRun
	invJSON, _ := json.Marshal(inv)
	out, err := h.Execute(ctx, spec.Original, req.Input, invJSON)
	if err != nil {
		return Result{}, err
	}
	r, err := DecodeToolResult(out)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: r.Encode(), IsError: r.IsError}, nil
}

// prefixWriter logs a host's stderr line by line.
type prefixWriter struct {
	logf   func(string, ...any)
	prefix string
}

func (w prefixWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" && w.logf != nil {
			w.logf("%s%s", w.prefix, oneLine(l, 500))
		}
	}
	return len(p), nil
}
