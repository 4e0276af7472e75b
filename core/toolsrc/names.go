package toolsrc

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Projected tool names are single object-abi path components:
//
//	mcp.<server>.<tool>      a tool of an MCP server
//	plugin.<plugin>.<tool>   a tool of a plugin
//
// <server> and <plugin> are names the owner chose and are refused unless
// they are [a-zA-Z0-9][a-zA-Z0-9_+-]{0,31} (no dot, so the name splits
// one way only). <tool> is the source's own tool name mapped to the
// object-abi rules:
//
//   - every character outside [a-zA-Z0-9._+-] becomes "-" ("a/b" → "a-b");
//     underscores and dots are kept ("word_count" stays "word_count");
//   - a result ending in ".sock" or ".d" (reserved suffixes) gets its last
//     "." turned into "-" ("conf.d" → "conf-d");
//   - a name longer than 64 bytes in total is cut and ends in "-" plus the
//     first 6 hex digits of the SHA-256 of the original name.
//
// The original name is kept in .d/origin (tool=…) and is what the source is
// called with. Two tools whose names map to one projected name, or a
// projected name that is already a tool in the tier (or in the system tier,
// for a home tier), clash: the name is projected for none of them and the
// clash is reported by `ctx tool sources` and `ctx doctor`.

// Kinds of tool sources.
const (
	KindMCP     = "mcp"
	KindNative  = "native"  // plugin through the C ABI, in the plugin host
	KindProcess = "process" // plugin as a child process per call
)

// Prefixes of projected names.
const (
	PrefixMCP    = "mcp"
	PrefixPlugin = "plugin"
)

// MaxSourceName bounds server and plugin names.
const MaxSourceName = 32

// MaxOriginalName bounds a source's own tool name.
const MaxOriginalName = 256

// ValidSourceName checks an MCP server or plugin name.
func ValidSourceName(s string) error {
	if s == "" || len(s) > MaxSourceName {
		return abi.Errorf(abi.EINVAL, "invalid source name %q: want 1 to %d characters", trunc(s), MaxSourceName)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '+' || c == '-'):
		default:
			return abi.Errorf(abi.EINVAL, "invalid source name %q: want [a-zA-Z0-9][a-zA-Z0-9_+-]* (no dots)", trunc(s))
		}
	}
	return nil
}

// ProjectedName maps a source's tool to its tool object name.
func ProjectedName(prefix, source, original string) (string, error) {
	if err := ValidSourceName(source); err != nil {
		return "", err
	}
	if original == "" || len(original) > MaxOriginalName {
		return "", abi.Errorf(abi.EINVAL, "tool name %q: want 1 to %d bytes", trunc(original), MaxOriginalName)
	}
	var b strings.Builder
	b.WriteString(prefix + "." + source + ".")
	for _, r := range original {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '+', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	if len(name) > abi.MaxNameLen {
		sum := sha256.Sum256([]byte(original))
		name = name[:abi.MaxNameLen-7] + "-" + hex.EncodeToString(sum[:3])
	}
	for _, suf := range []string{".sock", ".d"} {
		if strings.HasSuffix(name, suf) {
			i := len(name) - len(suf)
			name = name[:i] + "-" + name[i+1:]
		}
	}
	if err := abi.ValidName(name); err != nil {
		return "", err
	}
	return name, nil
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
