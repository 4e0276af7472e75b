package abi

import (
	"strings"
)

// Capability is a stable semantic capability word of model-abi.md
// ("Capabilities"). tool_call_syntax only means the stream may contain
// tool-call events; it grants no tool permission.
type Capability string

const (
	CapChat           Capability = "chat"
	CapStream         Capability = "stream"
	CapSession        Capability = "session"
	CapVision         Capability = "vision"
	CapAudioInput     Capability = "audio_input"
	CapAudioOutput    Capability = "audio_output"
	CapJSONSchema     Capability = "json_schema"
	CapToolCallSyntax Capability = "tool_call_syntax"
	CapReasoning      Capability = "reasoning"
	CapEmbedding      Capability = "embedding"
	CapRerank         Capability = "rerank"
)

// Capabilities is the whole stable vocabulary, in the seed's order.
var Capabilities = []Capability{CapChat, CapStream, CapSession, CapVision, CapAudioInput,
	CapAudioOutput, CapJSONSchema, CapToolCallSyntax, CapReasoning, CapEmbedding, CapRerank}

// ForbiddenCapabilities are provider- or API-format-private words that the
// seed bans from the stable ABI.
var ForbiddenCapabilities = []string{"openai_responses", "anthropic_messages",
	"gemini_generate_content", "native_thread", "native_stateful", "native_stateless"}

// ParseCaps parses a .d/cap file: one capability per line, blank lines and
// '#' comments ignored, surrounding spaces trimmed. A forbidden private word,
// an unknown word or a repeat is EINVAL naming the line.
func ParseCaps(data []byte) ([]Capability, error) {
	var out []Capability
	seen := map[Capability]int{}
	err := eachLine(data, func(n int, line string) error {
		w := strings.TrimSpace(line)
		if w == "" || strings.HasPrefix(w, "#") {
			return nil
		}
		for _, f := range ForbiddenCapabilities {
			if w == f {
				return Errorf(EINVAL, "line %d: %q is a provider-private capability word, forbidden in the stable ABI", n, w)
			}
		}
		c := Capability(w)
		if !c.Known() {
			return Errorf(EINVAL, "line %d: unknown capability %q", n, truncate(w))
		}
		if prev, dup := seen[c]; dup {
			return Errorf(EINVAL, "line %d: capability %q repeats line %d", n, w, prev)
		}
		seen[c] = n
		out = append(out, c)
		return nil
	})
	return out, err
}

// FormatCaps writes one capability per line; every word must be stable.
func FormatCaps(caps []Capability) ([]byte, error) {
	var b strings.Builder
	seen := map[Capability]bool{}
	for _, c := range caps {
		if !c.Known() {
			return nil, Errorf(EINVAL, "unknown capability %q", truncate(string(c)))
		}
		if seen[c] {
			return nil, Errorf(EINVAL, "capability %q repeats", c)
		}
		seen[c] = true
		b.WriteString(string(c))
		b.WriteByte('\n')
	}
	return []byte(b.String()), nil
}

// Known reports whether c is in the stable vocabulary.
func (c Capability) Known() bool {
	for _, k := range Capabilities {
		if k == c {
			return true
		}
	}
	return false
}

// HasCap reports whether caps contains c.
func HasCap(caps []Capability, c Capability) bool {
	for _, x := range caps {
		if x == c {
			return true
		}
	}
	return false
}
