package toolsrc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"sort"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tool"
)

// MCPConfigFile is where a tier lists its MCP servers: <tier>/.mcp.json,
// the file name and format users know from other agent CLIs' project
// scope:
//
//	{"mcpServers": {
//	  "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"K": "V"}},
//	  "remote":     {"type": "http", "url": "https://example.net/mcp", "headers": {"Authorization": "Bearer …"}}
//	}}
//
// "type" is "stdio" (the default with "command") or "http" (Streamable
// HTTP, the default with "url"); "cwd" optionally sets a stdio server's
// working directory. The file may hold credentials in env and headers, so
// `ctx mcp add` writes it 0600 and nothing derived from it (.d/ files,
// logs, `ctx mcp ls`) ever shows their values.
const MCPConfigFile = ".mcp.json"

// MaxConfigFile bounds .mcp.json and manifest.toml.
const MaxConfigFile = 256 << 10

// Transports of an MCP server.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// ServerConfig is one entry of mcpServers.
type ServerConfig struct {
	Name      string            `json:"name"`
	Transport string            `json:"type"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"-"` // values are secrets: never printed
	Cwd       string            `json:"cwd,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"-"` // values are secrets: never printed
	Unknown   []string          `json:"unknown_keys,omitempty"`
	Err       error             `json:"-"` // this entry is unusable (the others still run)
}

// EnvKeys and HeaderKeys list the names only, sorted: what may be shown.
func (s ServerConfig) EnvKeys() []string    { return sortedKeys(s.Env) }
func (s ServerConfig) HeaderKeys() []string { return sortedKeys(s.Headers) }

// Secrets are the env and header values, for redaction of server output.
func (s ServerConfig) Secrets() []string {
	var out []string
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			if len(v) >= 4 {
				out = append(out, v)
			}
		}
	}
	return out
}

// Fingerprint changes whenever anything that affects the running server
// changes (a new fingerprint restarts it).
func (s ServerConfig) Fingerprint() string {
	// An empty list or map and none start the same server.
	var args []string
	var env, headers map[string]string
	if len(s.Args) > 0 {
		args = s.Args
	}
	if len(s.Env) > 0 {
		env = s.Env
	}
	if len(s.Headers) > 0 {
		headers = s.Headers
	}
	b, _ := json.Marshal([]any{s.Transport, s.Command, args, env, s.Cwd, s.URL, headers})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// MCPConfig is a parsed .mcp.json: its servers sorted by name.
type MCPConfig struct {
	Servers []ServerConfig
}

// Bounds of one server entry.
const (
	maxArgs   = 256
	maxEnv    = 256
	maxString = 8 << 10
)

// ParseMCPConfig parses .mcp.json. A file that is not strict JSON (a
// duplicate key anywhere, which a JSON decoder would silently resolve) or
// whose mcpServers is not an object is EINVAL as a whole; a bad entry only
// marks that server unusable (ServerConfig.Err).
func ParseMCPConfig(b []byte) (MCPConfig, error) {
	if len(b) > MaxConfigFile {
		return MCPConfig{}, abi.Errorf(abi.EMSGSIZE, "%s: larger than %d bytes", MCPConfigFile, MaxConfigFile)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return MCPConfig{}, nil
	}
	if err := tool.StrictJSON(b); err != nil {
		return MCPConfig{}, abi.Errorf(abi.EINVAL, "%s: %v", MCPConfigFile, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return MCPConfig{}, abi.Errorf(abi.EINVAL, "%s: want a JSON object: %v", MCPConfigFile, err)
	}
	var servers map[string]json.RawMessage
	if raw, ok := top["mcpServers"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &servers); err != nil {
			return MCPConfig{}, abi.Errorf(abi.EINVAL, "%s: mcpServers: want an object of servers: %v", MCPConfigFile, err)
		}
	}
	var cfg MCPConfig
	for name, raw := range servers {
		cfg.Servers = append(cfg.Servers, parseServer(name, raw))
	}
	sort.Slice(cfg.Servers, func(i, j int) bool { return cfg.Servers[i].Name < cfg.Servers[j].Name })
	return cfg, nil
}

var knownServerKeys = map[string]bool{"type": true, "command": true, "args": true, "env": true, "cwd": true, "url": true, "headers": true}

func parseServer(name string, raw json.RawMessage) ServerConfig {
	s := ServerConfig{Name: name}
	if err := ValidSourceName(name); err != nil {
		s.Err = err
		return s
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		s.Err = abi.Errorf(abi.EINVAL, "server %s: want an object: %v", name, err)
		return s
	}
	for k := range keys {
		if !knownServerKeys[k] {
			s.Unknown = append(s.Unknown, trunc(k))
		}
	}
	sort.Strings(s.Unknown)
	// Exact keys only: encoding/json would also take "Command" for
	// "command", which the unknown-key report then calls a typo.
	field := func(k string, dst any) bool {
		raw, ok := keys[k]
		if !ok || string(raw) == "null" {
			return true
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			s.Err = abi.Errorf(abi.EINVAL, "server %s: %s: %v", name, k, err)
			return false
		}
		return true
	}
	if !field("type", &s.Transport) || !field("command", &s.Command) || !field("args", &s.Args) ||
		!field("env", &s.Env) || !field("cwd", &s.Cwd) || !field("url", &s.URL) || !field("headers", &s.Headers) {
		return s
	}
	s.Err = s.check()
	return s
}

// check validates one entry.
func (s *ServerConfig) check() error {
	bad := func(format string, args ...any) error {
		return abi.Errorf(abi.EINVAL, "server "+s.Name+": "+format, args...)
	}
	switch s.Transport {
	case "":
		if s.URL != "" {
			s.Transport = TransportHTTP
		} else {
			s.Transport = TransportStdio
		}
	case TransportStdio, TransportHTTP:
	case "streamable-http", "streamableHttp":
		s.Transport = TransportHTTP
	case "sse":
		return abi.Errorf(abi.ENOTSUP, "server %s: type sse (the legacy HTTP+SSE transport) is not supported; use a Streamable HTTP endpoint (type http)", s.Name)
	default:
		return bad("unknown type %q (want stdio or http)", trunc(s.Transport))
	}
	switch s.Transport {
	case TransportStdio:
		if s.Command == "" {
			return bad("a stdio server needs \"command\"")
		}
		if s.URL != "" || len(s.Headers) > 0 {
			return bad("a stdio server takes no \"url\" or \"headers\"")
		}
	case TransportHTTP:
		if s.URL == "" {
			return bad("an http server needs \"url\"")
		}
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
			return bad("an http server takes no \"command\", \"args\", \"env\" or \"cwd\"")
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return bad("url %q: want http(s)://host/path without user info", trunc(s.URL))
		}
	}
	if len(s.Args) > maxArgs || len(s.Env) > maxEnv || len(s.Headers) > maxEnv {
		return bad("more than %d args, env or headers", maxArgs)
	}
	for _, v := range append([]string{s.Command, s.Cwd, s.URL}, s.Args...) {
		if len(v) > maxString || strings.ContainsRune(v, 0) {
			return bad("a value is longer than %d bytes or holds NUL", maxString)
		}
	}
	if s.Cwd != "" && !strings.HasPrefix(s.Cwd, "/") {
		return bad("cwd %q must be absolute", trunc(s.Cwd))
	}
	for k, v := range s.Env {
		if !validEnvName(k) || len(v) > maxString || strings.ContainsRune(v, 0) {
			return bad("env %q: want NAME=value, no NUL", trunc(k))
		}
	}
	for k, v := range s.Headers {
		if !validHeaderName(k) || len(v) > maxString || strings.ContainsAny(v, "\r\n\x00") {
			return bad("header %q: want a token name and a value without CR, LF or NUL", trunc(k))
		}
	}
	return nil
}

func validEnvName(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func validHeaderName(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// AddServer returns the config file b with server s added (replace: or
// replaced). Everything else in the file is kept. Adding a name that
// exists without replace is EEXIST; an invalid s is EINVAL.
func AddServer(b []byte, s ServerConfig, replace bool) ([]byte, error) {
	if err := ValidSourceName(s.Name); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	top, servers, err := splitConfig(b)
	if err != nil {
		return nil, err
	}
	if _, ok := servers[s.Name]; ok && !replace {
		return nil, abi.Errorf(abi.EEXIST, "MCP server %s exists (ctx mcp rm %s first)", s.Name, s.Name)
	}
	entry := map[string]any{}
	switch s.Transport {
	case TransportHTTP:
		entry["type"], entry["url"] = TransportHTTP, s.URL
		if len(s.Headers) > 0 {
			entry["headers"] = s.Headers
		}
	default:
		entry["command"] = s.Command
		entry["args"] = append([]string{}, s.Args...)
		if len(s.Env) > 0 {
			entry["env"] = s.Env
		}
		if s.Cwd != "" {
			entry["cwd"] = s.Cwd
		}
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		return nil, abi.Errorf(abi.EINVAL, "encode server: %v", err)
	}
	servers[s.Name] = raw
	return joinConfig(top, servers)
}

// RemoveServer returns b without server name; a missing name is ENOENT.
func RemoveServer(b []byte, name string) ([]byte, error) {
	top, servers, err := splitConfig(b)
	if err != nil {
		return nil, err
	}
	if _, ok := servers[name]; !ok {
		return nil, abi.Errorf(abi.ENOENT, "no MCP server %q in %s", trunc(name), MCPConfigFile)
	}
	delete(servers, name)
	return joinConfig(top, servers)
}

func splitConfig(b []byte) (map[string]json.RawMessage, map[string]json.RawMessage, error) {
	top := map[string]json.RawMessage{}
	servers := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(b)) == 0 {
		return top, servers, nil
	}
	if _, err := ParseMCPConfig(b); err != nil {
		return nil, nil, err
	}
	_ = json.Unmarshal(b, &top)
	if raw, ok := top["mcpServers"]; ok && string(raw) != "null" {
		_ = json.Unmarshal(raw, &servers)
	}
	return top, servers, nil
}

func joinConfig(top, servers map[string]json.RawMessage) ([]byte, error) {
	raw, err := json.Marshal(servers)
	if err != nil {
		return nil, err
	}
	top["mcpServers"] = raw
	out, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
