package ctx

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model"
	"github.com/cortexfs/cortexfs/core/model/provider"
	"github.com/cortexfs/cortexfs/core/tree"
)

func init() {
	groups["model"] = &cli.Cmd{Name: "model", Summary: "model objects from providers", Subs: []*cli.Cmd{
		{Name: "add", Summary: "write a model object for PROVIDER/MODEL", Run: runModelAdd},
		{Name: "refresh", Summary: "fill model/PROVIDER/* from the provider's listing", Run: runModelRefresh},
		{Name: "ls", Summary: "list models, their routes and where their credential comes from", Run: runModelLs},
	}}
}

// routeFile turns --driver into .d/driver: one name stays a legacy single
// driver; "a,b" is the default priority list; "exec=a;agent=b,a" is a
// route table. Every driver must be known to this binary.
func routeFile(spec string) ([]byte, error) {
	spec = strings.TrimSpace(spec)
	var body string
	switch {
	case spec == "":
		return nil, cli.Usagef("--driver is required (one of %s)", strings.Join(model.Drivers(), ", "))
	case strings.Contains(spec, "="):
		body = strings.ReplaceAll(spec, ";", "\n") + "\n"
	case strings.Contains(spec, ","):
		body = "default=" + spec + "\n"
	default:
		body = spec + "\n"
	}
	routes, err := abi.ParseRoutes([]byte(body))
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, d := range model.Drivers() {
		known[d] = true
	}
	for _, list := range routes {
		for _, d := range list {
			if !known[d] {
				return nil, abi.Errorf(abi.EINVAL, "unknown driver %q (have %s)", d, strings.Join(model.Drivers(), ", "))
			}
		}
	}
	return []byte(body), nil
}

// baseURLHost validates --base-url (http(s), no credentials or query in
// it: secrets never land in .d/) and returns its normalized host name.
func baseURLHost(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", abi.Errorf(abi.EINVAL, "--base-url %q: want http(s)://HOST[:PORT][/PATH]", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", abi.Errorf(abi.EINVAL, "--base-url must not carry credentials, a query or a fragment (keys go in the environment or the keychain)")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if err := abi.ValidName(host); err != nil {
		return "", abi.Errorf(abi.EINVAL, "--base-url host %q is not a usable provider name: %v", host, err)
	}
	return host, nil
}

// objectRunner is the #! interpreter of new objects: --runner, else the one
// debug/echo uses, else the default.
func objectRunner(root tree.Root, flag string) string {
	if flag != "" {
		return flag
	}
	if o, err := tree.Resolve(root.ModelPath(tree.EchoModel.ID)); err == nil {
		return o.Meta.Runner
	}
	return tree.DefaultRunner
}

func defaultCaps(session string) []abi.Capability {
	caps := []abi.Capability{"chat", "stream", "tool_call_syntax"}
	if session == model.SessionSocket {
		caps = append(caps, "session")
	}
	return caps
}

func runModelAdd(ctx context.Context, env *applets.Env, args []string) error {
	fs := cli.FlagSet(env, "ctx model add", "ctx model add [PROVIDER/]MODEL --driver ROUTE [--base-url URL] [--auth required|optional|none] [--id NATIVE_ID] [--session none|socket] [--root DIR] [--json]",
		`Add a provider model object. ROUTE is a driver (openai-chat), a priority
list (openai-responses,openai-chat) or a route table
(exec=openai-chat;agent=openai-responses,openai-chat). With --base-url and
no PROVIDER/ the provider is the URL's normalized host name. The base URL is
kept in .d/default; keys never are: set the provider's environment variable
(OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, <HOST>_API_KEY) or the
keychain item service=cortexfs:<provider> account=default. A local server
that needs no key (llama.cpp, vLLM, Ollama) takes --auth none: the model
then never looks one up (.d/default gets auth=none).`)
	c := commonFlags(fs)
	driver := fs.String("driver", "", "driver or route table (required)")
	baseURL := fs.String("base-url", "", "provider endpoint base URL")
	auth := fs.String("auth", "", "credential use: required (the driver's default for hosted APIs), optional, or none (a keyless local server)")
	native := fs.String("id", "", "provider-native model id (default: MODEL)")
	session := fs.String("session", model.SessionNone, "none or socket (cortexfsd serves MODEL.sock)")
	runnerPath := fs.String("runner", "", "#! interpreter (default: the one debug/echo uses)")
	pos, err := cli.ParseN(fs, args, 1)
	out := cli.Output{Env: env, JSON: *c.json}
	if err != nil {
		return out.Fail(err)
	}
	spec, err := addSpec(pos[0], *driver, *baseURL, *auth, *native, *session)
	if err != nil {
		return out.Fail(err)
	}
	root := c.Root()
	if _, err := tree.WriteModel(string(root), objectRunner(root, *runnerPath), spec, false); err != nil {
		return out.Fail(err)
	}
	path := root.ModelPath(spec.ID)
	return out.Result(map[string]any{"ok": true, "id": spec.ID, "path": path}, func(w io.Writer) {
		fmt.Fprintf(w, "added %s (%s)\n", spec.ID, path)
	})
}

func addSpec(arg, driver, baseURL, auth, native, session string) (tree.ModelSpec, error) {
	routes, err := routeFile(driver)
	if err != nil {
		return tree.ModelSpec{}, err
	}
	if session != model.SessionNone && session != model.SessionSocket {
		return tree.ModelSpec{}, cli.Usagef("--session must be none or socket")
	}
	id := arg
	var defaults []abi.KV
	if baseURL != "" {
		host, err := baseURLHost(baseURL)
		if err != nil {
			return tree.ModelSpec{}, err
		}
		if !strings.Contains(arg, "/") {
			id = host + "/" + arg
		}
		defaults = append(defaults, abi.KV{Key: provider.KeyBaseURL, Value: baseURL})
	}
	if auth != "" {
		if err := provider.ValidAuth(auth); err != nil {
			return tree.ModelSpec{}, cli.Usagef("--auth: %v", err)
		}
		defaults = append(defaults, abi.KV{Key: provider.KeyAuth, Value: auth})
	}
	_, name, err := abi.SplitModelID(id)
	if err != nil {
		return tree.ModelSpec{}, err
	}
	if native == "" {
		native = name
	}
	if strings.ContainsAny(native, "\n\r\x00") {
		return tree.ModelSpec{}, cli.Usagef("--id must be one line")
	}
	listing := []abi.KV{{Key: "id", Value: native}, {Key: "name", Value: name}, {Key: "description", Value: ""},
		{Key: "type", Value: "chat"}, {Key: "created_at", Value: ""}, {Key: "owned_by", Value: ""}, {Key: "context_length", Value: ""}}
	return tree.ModelSpec{ID: id, Listing: listing, Driver: routes, NativeID: native, Caps: defaultCaps(session),
		Defaults: defaults, Session: session}, nil
}

// modelName turns a provider-native id into a path component: characters a
// name cannot hold (':' in llama3:latest, '/') become '-'.
func modelName(native string) string {
	b := []byte(native)
	for i, ch := range b {
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || i > 0 && strings.IndexByte("._+-", ch) >= 0
		if !ok {
			b[i] = '-'
		}
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), ".sock"), ".d")
	if len(s) > abi.MaxNameLen {
		s = s[:abi.MaxNameLen]
	}
	return s
}

// nativeDefaults are the listing drivers of native providers refreshed
// before any of their models exists.
var nativeDefaults = map[string]string{"openai": "openai-chat", "anthropic": "anthropic-messages", "google": "gemini", "gemini": "gemini", "ollama": "ollama"}

// providerTemplate finds how an existing model of the provider is
// configured: its .d/driver, base URL and auth mode.
func providerTemplate(root tree.Root, prov string) (routes []byte, base, auth string) {
	entries, _ := os.ReadDir(filepath.Join(string(root), tree.ModelDir, prov))
	for _, e := range entries {
		o, err := tree.Resolve(filepath.Join(string(root), tree.ModelDir, prov, e.Name()))
		if err != nil || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		m, err := model.Open(o)
		if err != nil {
			continue
		}
		b, _ := o.ReadCtl("driver")
		return b, m.Defaults[provider.KeyBaseURL], m.Defaults[provider.KeyAuth]
	}
	return nil, "", ""
}
