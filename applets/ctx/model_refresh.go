package ctx

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/model/creds"
	"github.com/cortexfs/cortexfs/core/model/provider"
	"github.com/cortexfs/cortexfs/core/tree"
)

func runModelRefresh(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx model refresh", "ctx model refresh PROVIDER [--driver ROUTE] [--base-url URL] [--auth required|optional|none] [--root DIR] [--json]",
		`Fill or update model/PROVIDER/* from the provider's model listing (id, name,
description, type, created_at, owned_by, context_length). The route, base
URL and auth mode default to those of an existing model of PROVIDER; with
auth=none (a keyless llama.cpp, vLLM or Ollama server) no key is looked up
and the models created get auth=none too. Existing .d/ files are kept.`)
	c := commonFlags(fs)
	driver := fs.String("driver", "", "driver or route table (default: an existing model's)")
	baseURL := fs.String("base-url", "", "provider endpoint base URL (default: an existing model's)")
	auth := fs.String("auth", "", "credential use: required, optional or none (default: an existing model's, else the driver's)")
	runnerPath := fs.String("runner", "", "#! interpreter (default: the one debug/echo uses)")
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *c.json}
	if err == nil {
		err = abi.ValidName(pos[0])
	}
	if err != nil {
		return out.Fail(err)
	}
	root, prov := c.Root(), pos[0]
	routes, base, authMode := providerTemplate(root, prov)
	if *driver != "" {
		if routes, err = routeFile(*driver); err != nil {
			return out.Fail(err)
		}
	} else if routes == nil && nativeDefaults[prov] != "" {
		routes = []byte(nativeDefaults[prov] + "\n")
	}
	if routes == nil {
		return out.Fail(cli.Usagef("no model of %s exists yet: give --driver (and --base-url)", prov))
	}
	if *baseURL != "" {
		if _, err := baseURLHost(*baseURL); err != nil {
			return out.Fail(err)
		}
		base = *baseURL
	}
	if *auth != "" {
		if err := provider.ValidAuth(*auth); err != nil {
			return out.Fail(cli.Usagef("--auth: %v", err))
		}
		authMode = *auth
	}
	parsed, err := abi.ParseRoutes(routes)
	if err != nil {
		return out.Fail(err)
	}
	var defaults []abi.KV
	cfgDefaults := map[string]string{}
	if base != "" {
		defaults = []abi.KV{{Key: provider.KeyBaseURL, Value: base}}
		cfgDefaults[provider.KeyBaseURL] = base
	}
	if authMode != "" {
		defaults = append(defaults, abi.KV{Key: provider.KeyAuth, Value: authMode})
		cfgDefaults[provider.KeyAuth] = authMode
	}
	cfg := model.Config{Object: tree.Object{Class: abi.ClassModel, Name: prov + "/listing"}, Defaults: cfgDefaults}
	listing, err := provider.List(ctx, parsed[abi.RouteDefault][0], cfg)
	if err != nil {
		return out.Fail(err)
	}
	runner := objectRunner(root, *runnerPath)
	type row struct {
		ID     string `json:"id"`
		Native string `json:"native_id"`
		Action string `json:"action"` // created | updated | skipped
		Reason string `json:"reason,omitempty"`
	}
	rows := []row{}
	for _, l := range listing {
		id := prov + "/" + modelName(l.ID)
		r := row{ID: id, Native: l.ID, Action: "updated"}
		spec := tree.ModelSpec{ID: id, Driver: routes, NativeID: l.ID, Caps: defaultCaps(model.SessionNone), Defaults: defaults,
			Listing: []abi.KV{{Key: "id", Value: l.ID}, {Key: "name", Value: l.Name}, {Key: "description", Value: l.Description},
				{Key: "type", Value: l.Type}, {Key: "created_at", Value: l.CreatedAt}, {Key: "owned_by", Value: l.OwnedBy},
				{Key: "context_length", Value: l.ContextLength}}}
		if l.Type == "embedding" {
			spec.Caps = []abi.Capability{"embedding"}
		}
		created, err := tree.WriteModel(string(root), runner, spec, true)
		switch {
		case err != nil:
			r.Action, r.Reason = "skipped", err.Error()
		case created:
			r.Action = "created"
		}
		rows = append(rows, r)
	}
	return out.Result(map[string]any{"ok": true, "provider": prov, "models": rows}, func(w io.Writer) {
		for _, r := range rows {
			fmt.Fprintf(w, "%-8s %s", r.Action, r.ID)
			if r.Reason != "" {
				fmt.Fprintf(w, "  (%s)", r.Reason)
			}
			fmt.Fprintln(w)
		}
	})
}

// modelRow is one line of `ctx model ls`.
type modelRow struct {
	ID         string `json:"id"`
	Path       string `json:"path"`
	Tier       string `json:"tier"`
	NativeID   string `json:"native_id,omitempty"`
	Driver     string `json:"driver,omitempty"` // the default route
	Session    string `json:"session,omitempty"`
	Status     string `json:"status,omitempty"`
	BaseURL    string `json:"base_url,omitempty"`
	Credential string `json:"credential,omitempty"` // env | keychain | none | not_needed (never the key)
	AliasOf    string `json:"alias_of,omitempty"`
	Error      string `json:"error,omitempty"`
}

func runModelLs(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx model ls", "ctx model ls [--root DIR] [--json]",
		`List model objects with their native id, default route, session, base URL
and where their credential would come from (env, keychain, none,
not_needed). Keys are never shown.`)
	c := commonFlags(fs)
	_, err := cli.ParseN(fs, args, 0)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	entries, err := tree.List(c.Root(), os.Getuid())
	if err != nil {
		return out.Fail(err)
	}
	rows := []modelRow{}
	for _, e := range entries {
		if e.Class != abi.ClassModel {
			continue
		}
		rows = append(rows, describeModel(ctx, e))
	}
	return out.Result(rows, func(w io.Writer) {
		for _, r := range rows {
			switch {
			case r.AliasOf != "":
				fmt.Fprintf(w, "%-36s -> %s\n", r.ID, r.AliasOf)
			case r.Error != "":
				fmt.Fprintf(w, "%-36s broken: %s\n", r.ID, r.Error)
			default:
				fmt.Fprintf(w, "%-36s %-20s session=%-6s credential=%s\n", r.ID, r.Driver, r.Session, r.Credential)
			}
		}
	})
}

func describeModel(ctx context.Context, e tree.Entry) modelRow {
	r := modelRow{ID: e.Name, Path: e.Path, Tier: e.Tier, Status: e.Status, Session: e.Session, Error: e.Error}
	if e.AliasOf != "" {
		r.ID, r.AliasOf = filepath.Base(e.Path), e.AliasOf
		return r
	}
	if e.Error != "" {
		return r
	}
	o, err := tree.Resolve(e.Path)
	if err == nil {
		var m *model.Model
		if m, err = model.Open(o); err == nil {
			r.NativeID, r.BaseURL = m.NativeID, m.Defaults[provider.KeyBaseURL]
			r.Driver = joinRoute(m.Routes[abi.RouteDefault])
			r.Credential = credentialSource(ctx, m)
		}
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

func joinRoute(l []string) string {
	s := ""
	for i, d := range l {
		if i > 0 {
			s += ","
		}
		s += d
	}
	return s
}

// credentialSource says where a model's key would come from, never what
// it is: the built-in debug driver and auth=none need none.
func credentialSource(ctx context.Context, m *model.Model) string {
	needs := false
	for _, list := range m.Routes {
		for _, d := range list {
			if d != "debug" {
				needs = true
			}
		}
	}
	if !needs || m.Defaults[provider.KeyAuth] == "none" {
		return "not_needed"
	}
	prov, _, _ := abi.SplitModelID(m.ID)
	_, src, _ := creds.Lookup(ctx, prov)
	return string(src)
}
