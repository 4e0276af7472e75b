package toolsrc

import (
	"bytes"
	"encoding/json"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tool"
)

// A plugin lives in <tier>/plugins/<name>/ with its manifest.toml (seed
// native-plugin-sdk "manifest.toml"). The seed's fields, plus the command
// of a process plugin and its tools:
//
//	name = "native-hello"              # must equal the directory name
//	version = "0.1.0"
//	description = "…"
//	cortex_version = "1.6.4"           # informational
//	trust = "trusted_native"           # required for [native]; "process" otherwise
//
//	[capabilities]
//	provides = ["tools"]
//	secrets = false                    # true is refused: plugins get no secrets here
//
//	[sandbox]
//	level = "process"                  # or "trusted_in_process"; see below
//
//	[native]                           # a trusted native plugin (C ABI v1)
//	library = "lib/libhello.so"        # inside the plugin directory
//	isolation = "trusted_in_process"
//	abi_version = 1
//
//	[process]                          # or: a process-isolated JSON plugin
//	command = "bin/hello"              # inside the plugin directory, or absolute
//	args = []
//	env = { GREETING = "hi" }
//	timeout_secs = 30                  # default for its tools
//
//	[[tools]]                          # process plugins declare their tools here
//	name = "word_count"
//	description = "…"
//	input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
//	timeout_secs = 10
//	[[tools.effects]]
//	kind = "write_file"
//	confirmation = "always"
//
// Isolation honoured: every plugin runs outside the daemon. A native
// plugin ("trusted_in_process" or "process") is loaded by the plugin host,
// a separate dynamically linked process, never into cortexfsd itself (a
// static binary cannot safely dlopen a library that starts threads, and a
// crash must not take the daemon down): "trusted_in_process" is served
// with stronger isolation than it asks for. A process plugin's command
// runs as a child of the caller, one process per call.
const ManifestFile = "manifest.toml"

// PluginsDir is the plugins directory of a tier.
const PluginsDir = "plugins"

// NativeABIVersion is the seed's NATIVE_ABI_VERSION this host speaks.
const NativeABIVersion = 1

// Isolation levels accepted in [sandbox] level and [native] isolation.
const (
	IsolationProcess          = "process"
	IsolationTrustedInProcess = "trusted_in_process"
)

// Manifest is a parsed, checked manifest.toml.
type Manifest struct {
	Name          string         `toml:"name" json:"name"`
	Version       string         `toml:"version" json:"version"`
	Description   string         `toml:"description" json:"description,omitempty"`
	CortexVersion string         `toml:"cortex_version" json:"cortex_version,omitempty"`
	Trust         string         `toml:"trust" json:"trust,omitempty"`
	Capabilities  Capabilities   `toml:"capabilities" json:"capabilities"`
	Sandbox       Sandbox        `toml:"sandbox" json:"sandbox"`
	Native        *Native        `toml:"native" json:"native,omitempty"`
	Process       *Process       `toml:"process" json:"process,omitempty"`
	Tools         []ManifestTool `toml:"tools" json:"tools,omitempty"`

	// Unknown lists keys this build does not know (reported, not fatal:
	// manifests written for newer runtimes still load).
	Unknown []string `toml:"-" json:"unknown_keys,omitempty"`
}

// Capabilities is [capabilities].
type Capabilities struct {
	Provides []string `toml:"provides" json:"provides,omitempty"`
	Secrets  bool     `toml:"secrets" json:"secrets"`
}

// Sandbox is [sandbox].
type Sandbox struct {
	Level string `toml:"level" json:"level,omitempty"`
}

// Native is [native].
type Native struct {
	Library    string `toml:"library" json:"library"`
	Isolation  string `toml:"isolation" json:"isolation,omitempty"`
	ABIVersion int    `toml:"abi_version" json:"abi_version"`
}

// Process is [process].
type Process struct {
	Command     string            `toml:"command" json:"command"`
	Args        []string          `toml:"args" json:"args,omitempty"`
	Env         map[string]string `toml:"env" json:"-"`
	TimeoutSecs int               `toml:"timeout_secs" json:"timeout_secs,omitempty"`
}

// ManifestTool is one [[tools]] entry of a process plugin.
type ManifestTool struct {
	Name         string         `toml:"name" json:"name"`
	Description  string         `toml:"description" json:"description"`
	InputSchema  any            `toml:"input_schema" json:"-"`
	OutputSchema any            `toml:"output_schema" json:"-"`
	TimeoutSecs  int            `toml:"timeout_secs" json:"timeout_secs,omitempty"`
	Effects      []tool.Effect  `toml:"effects" json:"effects,omitempty"`
	Capabilities map[string]any `toml:"capabilities" json:"-"`
}

// Kind is KindNative or KindProcess.
func (m Manifest) Kind() string {
	if m.Native != nil {
		return KindNative
	}
	return KindProcess
}

// MaxTimeoutSecs bounds timeout_secs (a day).
const MaxTimeoutSecs = 86400

// MaxPluginTools bounds the tools of one plugin.
const MaxPluginTools = 1024

// ParseManifest parses and checks manifest.toml. Every refusal is EINVAL
// (ENOTSUP for what this build deliberately does not do) with the field.
func ParseManifest(b []byte) (Manifest, error) {
	if len(b) > MaxConfigFile {
		return Manifest{}, abi.Errorf(abi.EMSGSIZE, "%s: larger than %d bytes", ManifestFile, MaxConfigFile)
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return Manifest{}, abi.Errorf(abi.EINVAL, "%s: not UTF-8 text", ManifestFile)
	}
	var m Manifest
	md, err := toml.Decode(string(b), &m)
	if err != nil {
		return Manifest{}, abi.Errorf(abi.EINVAL, "%s: %s", ManifestFile, trunc200(err.Error()))
	}
	for _, k := range md.Undecoded() {
		if len(k) > 2 && k[0] == "tools" && k[1] == "capabilities" {
			continue // free-form descriptor hints
		}
		m.Unknown = append(m.Unknown, trunc(k.String()))
	}
	sort.Strings(m.Unknown)
	return m, m.check()
}

func (m *Manifest) check() error {
	bad := func(format string, args ...any) error {
		return abi.Errorf(abi.EINVAL, ManifestFile+": "+format, args...)
	}
	if err := ValidSourceName(m.Name); err != nil {
		return bad("name: %v", err)
	}
	if m.Version == "" || len(m.Version) > 64 || strings.ContainsAny(m.Version, " \t\n\x00") {
		return bad("version: want a version string such as 0.1.0")
	}
	if len(m.Description) > 4096 || len(m.CortexVersion) > 64 {
		return bad("description or cortex_version too long")
	}
	if m.Capabilities.Secrets {
		return abi.Errorf(abi.ENOTSUP, "%s: capabilities.secrets = true: plugins never receive secrets from cortexfs", ManifestFile)
	}
	if len(m.Capabilities.Provides) > 0 && !contains(m.Capabilities.Provides, "tools") {
		return abi.Errorf(abi.ENOTSUP, "%s: capabilities.provides %v: this runtime loads plugins that provide tools", ManifestFile, m.Capabilities.Provides)
	}
	if err := checkIsolation("sandbox.level", m.Sandbox.Level); err != nil {
		return err
	}
	switch {
	case m.Native != nil && m.Process != nil:
		return bad("both [native] and [process]: a plugin is one or the other")
	case m.Native == nil && m.Process == nil:
		return bad("neither [native] (a C-ABI library) nor [process] (a command) is given")
	case m.Native != nil:
		return m.checkNative()
	}
	return m.checkProcess()
}

func (m *Manifest) checkNative() error {
	n := m.Native
	if m.Trust != "trusted_native" {
		return abi.Errorf(abi.EINVAL, "%s: a native plugin runs code in a host process: it must declare trust = \"trusted_native\" (got %q)", ManifestFile, trunc(m.Trust))
	}
	if n.ABIVersion != NativeABIVersion {
		return abi.Errorf(abi.ENOTSUP, "%s: native.abi_version = %d: this host speaks native ABI version %d only", ManifestFile, n.ABIVersion, NativeABIVersion)
	}
	if err := checkIsolation("native.isolation", n.Isolation); err != nil {
		return err
	}
	if err := checkRelPath("native.library", n.Library); err != nil {
		return err
	}
	if len(m.Tools) > 0 {
		return abi.Errorf(abi.EINVAL, "%s: [[tools]] belongs to process plugins; a native plugin describes its tools through tool_descriptor", ManifestFile)
	}
	return nil
}

func (m *Manifest) checkProcess() error {
	p := m.Process
	if m.Trust != "" && m.Trust != "process" {
		return abi.Errorf(abi.EINVAL, "%s: trust %q: a process plugin is trust = \"process\" (or unset)", ManifestFile, trunc(m.Trust))
	}
	if p.Command == "" {
		return abi.Errorf(abi.EINVAL, "%s: process.command is empty", ManifestFile)
	}
	if !strings.HasPrefix(p.Command, "/") {
		if err := checkRelPath("process.command", p.Command); err != nil {
			return err
		}
	}
	if len(p.Args) > maxArgs || len(p.Env) > maxEnv {
		return abi.Errorf(abi.EINVAL, "%s: process: more than %d args or env", ManifestFile, maxArgs)
	}
	for _, a := range append([]string{p.Command}, p.Args...) {
		if len(a) > maxString || strings.ContainsRune(a, 0) {
			return abi.Errorf(abi.EINVAL, "%s: process: a value is too long or holds NUL", ManifestFile)
		}
	}
	for k, v := range p.Env {
		if !validEnvName(k) || strings.ContainsRune(v, 0) || len(v) > maxString {
			return abi.Errorf(abi.EINVAL, "%s: process.env %q: want NAME = \"value\"", ManifestFile, trunc(k))
		}
	}
	if p.TimeoutSecs < 0 || p.TimeoutSecs > MaxTimeoutSecs {
		return abi.Errorf(abi.EINVAL, "%s: process.timeout_secs: want 0 to %d", ManifestFile, MaxTimeoutSecs)
	}
	if len(m.Tools) > MaxPluginTools {
		return abi.Errorf(abi.EINVAL, "%s: more than %d tools", ManifestFile, MaxPluginTools)
	}
	seen := map[string]bool{}
	for i := range m.Tools {
		t := &m.Tools[i]
		if seen[t.Name] {
			return abi.Errorf(abi.EINVAL, "%s: tools: %q is declared twice", ManifestFile, trunc(t.Name))
		}
		seen[t.Name] = true
		if err := t.check(m.Name); err != nil {
			return abi.Errorf(abi.CodeOf(err), "%s: tools[%d]: %v", ManifestFile, i, err)
		}
	}
	return nil
}

func (t *ManifestTool) check(plugin string) error {
	if _, err := ProjectedName(PrefixPlugin, plugin, t.Name); err != nil {
		return err
	}
	if len(t.Description) > 8192 {
		return abi.Errorf(abi.EINVAL, "description longer than 8192 bytes")
	}
	if t.TimeoutSecs < 0 || t.TimeoutSecs > MaxTimeoutSecs {
		return abi.Errorf(abi.EINVAL, "timeout_secs: want 0 to %d", MaxTimeoutSecs)
	}
	effects, err := tool.CheckEffects(t.Effects)
	if err != nil {
		return err
	}
	t.Effects = effects
	if _, err := t.Schema(); err != nil {
		return err
	}
	return nil
}

// Schema is the tool's input schema as JSON: a TOML table, or a string
// holding JSON; absent means any object.
func (t ManifestTool) Schema() (json.RawMessage, error) {
	s, err := schemaJSON("input_schema", t.InputSchema, `{"type":"object"}`)
	if err == nil {
		if _, err = tool.CompileInput(s); err != nil {
			return nil, abi.Errorf(abi.EINVAL, "input_schema: %v", err)
		}
	}
	return s, err
}

// OutSchema is the tool's output schema, or nil.
func (t ManifestTool) OutSchema() (json.RawMessage, error) {
	return schemaJSON("output_schema", t.OutputSchema, "")
}

func schemaJSON(field string, v any, def string) (json.RawMessage, error) {
	var raw []byte
	switch s := v.(type) {
	case nil:
		if def == "" {
			return nil, nil
		}
		return json.RawMessage(def), nil
	case string:
		raw = []byte(s)
	case map[string]any:
		var err error
		if raw, err = json.Marshal(s); err != nil {
			return nil, abi.Errorf(abi.EINVAL, "%s: %v", field, err)
		}
	default:
		return nil, abi.Errorf(abi.EINVAL, "%s: want a table or a JSON string", field)
	}
	if _, err := tool.CompileExternal(raw); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "%s: %v", field, err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return nil, abi.Errorf(abi.EINVAL, "%s: %v", field, err)
	}
	return c.Bytes(), nil
}

func checkIsolation(field, v string) error {
	switch v {
	case "", IsolationProcess, IsolationTrustedInProcess:
		return nil
	}
	return abi.Errorf(abi.ENOTSUP, "%s: %s = %q: this build honours %q and %q", ManifestFile, field, trunc(v), IsolationProcess, IsolationTrustedInProcess)
}

// checkRelPath accepts a clean relative path that stays inside the plugin
// directory.
func checkRelPath(field, p string) error {
	switch {
	case p == "":
		return abi.Errorf(abi.EINVAL, "%s: %s is empty", ManifestFile, field)
	case strings.HasPrefix(p, "/"), path.Clean(p) != p, p == "..", strings.HasPrefix(p, "../"), strings.ContainsRune(p, 0), len(p) > 1024:
		return abi.Errorf(abi.EINVAL, "%s: %s %q must be a clean path inside the plugin directory", ManifestFile, field, trunc(p))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func trunc200(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
