package toolsrc

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tool"
)

// The JSON that crosses the plugin boundary (seed native-plugin-sdk):
// PluginInfo, the ToolDescriptor of each tool, the InvocationContext the
// host passes in and the ToolResult it gets back. A process plugin's child
// answers with the same ToolResult. Everything from a plugin is untrusted
// input: strictly decoded, bounded, checked.

// PluginInfo is plugin_info().
type PluginInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

// Descriptor is one tool_descriptor(i): the seed's ToolDescriptor
// (name, description, input_schema, timeout_secs, capabilities with its
// effects), and a top-level "effects" as well, which some hosts expect.
type Descriptor struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	TimeoutSecs  *int64          `json:"timeout_secs"`
	Capabilities *struct {
		EmitsProgress     bool          `json:"emits_progress"`
		EmitsObserverText bool          `json:"emits_observer_text"`
		BackgroundSafe    bool          `json:"background_safe"`
		Effects           []tool.Effect `json:"effects"`
	} `json:"capabilities"`
	Effects []tool.Effect `json:"effects"`
}

// ToolResult is the seed's ToolResult.
type ToolResult struct {
	Output  string          `json:"output"`
	Media   json.RawMessage `json:"media"`
	IsError bool            `json:"is_error"`
}

// Invocation is the seed's InvocationContext, plus "dry_run": the ABI v1
// has no dry-run channel, so the host sets it in the invocation JSON
// (plugins built with cortex-sdk ignore unknown fields; a plugin that
// supports dry runs reads it there).
type Invocation struct {
	ToolName       string  `json:"tool_name"`
	SessionID      *string `json:"session_id"`
	Actor          *string `json:"actor"`
	Source         *string `json:"source"`
	ExecutionScope string  `json:"execution_scope"`
	DryRun         bool    `json:"dry_run,omitempty"`
}

// decodeStrictJSON decodes b into v after the strict checks (duplicate
// keys, UTF-8, nesting).
func decodeStrictJSON(what string, b []byte, v any) error {
	if len(b) == 0 {
		return abi.Errorf(abi.EPROTO, "%s: empty", what)
	}
	if err := tool.StrictJSON(b); err != nil {
		return abi.Errorf(abi.EPROTO, "%s: %v", what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return abi.Errorf(abi.EPROTO, "%s: %v", what, err)
	}
	return nil
}

// DecodePluginInfo decodes and checks plugin_info().
func DecodePluginInfo(b []byte) (PluginInfo, error) {
	var p PluginInfo
	if err := decodeStrictJSON("plugin_info", b, &p); err != nil {
		return PluginInfo{}, err
	}
	if p.Name == "" || len(p.Name) > 128 || len(p.Version) > 64 || len(p.Description) > 4096 {
		return PluginInfo{}, abi.Errorf(abi.EPROTO, "plugin_info: name missing or a field too long")
	}
	return p, nil
}

// DecodeDescriptor decodes one tool_descriptor() into a ToolSpec for
// plugin: its name must map to a valid projected name, its schema must
// compile, its effects must be known.
func DecodeDescriptor(plugin string, b []byte) (ToolSpec, error) {
	var d Descriptor
	if err := decodeStrictJSON("tool_descriptor", b, &d); err != nil {
		return ToolSpec{}, err
	}
	if _, err := ProjectedName(PrefixPlugin, plugin, d.Name); err != nil {
		return ToolSpec{}, abi.Errorf(abi.EPROTO, "tool_descriptor: %v", err)
	}
	if len(d.Description) > 8192 {
		return ToolSpec{}, abi.Errorf(abi.EPROTO, "tool_descriptor %q: description longer than 8192 bytes", trunc(d.Name))
	}
	in := d.InputSchema
	if len(bytes.TrimSpace(in)) == 0 || string(bytes.TrimSpace(in)) == "null" {
		in = json.RawMessage(`{"type":"object"}`)
	}
	if _, err := tool.CompileInput(in); err != nil {
		return ToolSpec{}, abi.Errorf(abi.EPROTO, "tool_descriptor %q: input_schema: %v", trunc(d.Name), err)
	}
	effects := d.Effects
	if d.Capabilities != nil {
		effects = append(effects, d.Capabilities.Effects...)
	}
	effects, err := tool.CheckEffects(effects)
	if err != nil {
		return ToolSpec{}, abi.Errorf(abi.EPROTO, "tool_descriptor %q: %v", trunc(d.Name), err)
	}
	spec := ToolSpec{Original: d.Name, Description: d.Description, Input: compactJSON(in), Effects: effects}
	if d.TimeoutSecs != nil {
		if *d.TimeoutSecs < 0 || *d.TimeoutSecs > MaxTimeoutSecs {
			return ToolSpec{}, abi.Errorf(abi.EPROTO, "tool_descriptor %q: timeout_secs out of range", trunc(d.Name))
		}
		spec.TimeoutSecs = int(*d.TimeoutSecs)
	}
	if c := d.Capabilities; c != nil {
		for _, x := range []struct {
			on   bool
			word string
		}{{c.EmitsProgress, "emits_progress"}, {c.EmitsObserverText, "emits_observer_text"}, {c.BackgroundSafe, "background_safe"}} {
			if x.on {
				spec.Caps = append(spec.Caps, x.word)
			}
		}
	}
	return spec, nil
}

// DecodeToolResult decodes a ToolResult from a plugin (or a process
// plugin's stdout). The output must be UTF-8 text; media must be an array.
func DecodeToolResult(b []byte) (ToolResult, error) {
	var r ToolResult
	if err := decodeStrictJSON("tool result", b, &r); err != nil {
		return ToolResult{}, err
	}
	if !utf8.ValidString(r.Output) {
		return ToolResult{}, abi.Errorf(abi.EPROTO, "tool result: output is not UTF-8")
	}
	m := bytes.TrimSpace(r.Media)
	switch {
	case len(m) == 0 || string(m) == "null":
		r.Media = json.RawMessage("[]")
	case m[0] != '[':
		return ToolResult{}, abi.Errorf(abi.EPROTO, "tool result: media must be an array")
	}
	return r, nil
}

// Encode renders a plugin result as the tool's output object:
// {"output":…,"media":[…],"is_error":…}, HTML not escaped.
func (r ToolResult) Encode() json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Output  string          `json:"output"`
		Media   json.RawMessage `json:"media"`
		IsError bool            `json:"is_error"`
	}{r.Output, r.Media, r.IsError})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func compactJSON(b []byte) json.RawMessage {
	var c bytes.Buffer
	if json.Compact(&c, b) != nil {
		return b
	}
	return c.Bytes()
}

// oneLine is the first line of s, bounded, for object metadata.
func oneLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		for max > 0 && !utf8.RuneStart(s[max]) {
			max--
		}
		s = s[:max] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
