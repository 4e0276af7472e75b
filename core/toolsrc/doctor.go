package toolsrc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/cortexfs/cortexfs/core/plughost"
	"github.com/cortexfs/cortexfs/core/tree"
)

// Doctor checks the tool sources of the system tier and of uid's tier
// without changing anything: the configuration files are trusted (owner,
// no group/other write), parse, and do not show credentials to other
// users; every source is up; no tool clashes; a daemon serves every tier
// that needs one; this binary carries the native plugin host when a
// native plugin is installed.
func Doctor(ctx context.Context, r tree.Root, uid int) []tree.Check {
	var out []tree.Check
	for _, ref := range CallerTiers(r, uid) {
		out = append(out, doctorTier(ctx, ref)...)
	}
	return out
}

func doctorTier(ctx context.Context, ref TierRef) []tree.Check {
	var out []tree.Check
	add := func(check, path string, err error, ok string) {
		c := tree.Check{Check: check, Path: path, OK: err == nil, Detail: ok}
		if err != nil {
			c.Detail = err.Error()
		}
		out = append(out, c)
	}
	d, owner, err := openTier(ref)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		add("tool sources", ref.Path, err, "")
		return out
	}
	raw, st, err := readTrusted(d, MCPConfigFile, owner.UID, MaxConfigFile)
	d.Close()
	if err != nil || raw != nil {
		var cfg MCPConfig
		if err == nil {
			cfg, err = ParseMCPConfig(raw)
		}
		add("mcp config", ref.ConfigFile(), err, fmt.Sprintf("%d servers", len(cfg.Servers)))
		secrets := false
		for _, s := range cfg.Servers {
			secrets = secrets || len(s.Env) > 0 || len(s.Headers) > 0
		}
		if err == nil && secrets && st.Mode&0o044 != 0 {
			add("mcp config mode", ref.ConfigFile(), fmt.Errorf("holds env or header values (credentials?) and is readable by others (mode %04o): chmod 600", st.Mode&0o777), "")
		}
	}
	rep, serr := Sources(ctx, ref)
	if serr != nil {
		rep = Inspect(ref)
	}
	for _, p := range rep.Problems {
		add("tool sources", ref.Path, errors.New(p), "")
	}
	needsDaemon, native := false, false
	for _, s := range rep.Sources {
		path := ref.Path + "/" + MCPConfigFile + "#" + s.Name
		if s.Kind != KindMCP {
			path = ref.PluginsDir() + "/" + s.Name
		}
		needsDaemon = needsDaemon || s.Kind == KindMCP || s.Kind == KindNative
		native = native || s.Kind == KindNative
		var err error
		switch s.State {
		case StateReady, StateNotServed, StateStarting:
		default:
			err = fmt.Errorf("%s %s is %s: %s", s.Kind, s.Name, s.State, s.Error)
		}
		add("tool source", path, err, fmt.Sprintf("%s %s: %s, %d tools", s.Kind, s.Name, s.State, len(s.Tools)))
		for _, t := range s.Tools {
			if t.Status == "clash" {
				add("tool clash", path, fmt.Errorf("%s: %s", t.Original, t.Clash), "")
			}
		}
	}
	if needsDaemon {
		var err error
		if !rep.Served {
			err = fmt.Errorf("no cortexfsd answers on %s: MCP and native plugin tools of %s are unavailable", ref.Socket(), ref.Name())
		}
		add("tool socket", ref.Socket(), err, "answers")
	}
	if native {
		_, err := plughost.Program()
		add("plugin host", "cortexfs-plugin-host", err, "embedded in this binary")
	}
	return out
}
