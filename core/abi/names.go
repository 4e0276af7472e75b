package abi

import (
	"strings"
)

// MaxNameLen is the longest agent, tool, provider or model path component:
// one leading character plus up to 63 more.
const MaxNameLen = 64

// ValidName checks one agent, tool, provider or model path component against
// object-abi.md "Names and Aliases": [a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}, and
// none of the forbidden forms (slash, NUL, empty, ".", "..", control
// characters, newline, suffix ".sock", suffix ".d"). The error is EINVAL and
// says which rule failed.
func ValidName(s string) error {
	switch {
	case s == "":
		return Errorf(EINVAL, "invalid name: empty")
	case s == "." || s == "..":
		return Errorf(EINVAL, "invalid name %q: dot names are reserved", s)
	case len(s) > MaxNameLen:
		return Errorf(EINVAL, "invalid name %q: longer than %d bytes", truncate(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '/':
			return Errorf(EINVAL, "invalid name %q: contains '/'", s)
		case c == 0:
			return Errorf(EINVAL, "invalid name %q: contains NUL", s)
		case c == '\n':
			return Errorf(EINVAL, "invalid name %q: contains newline", s)
		case c < 0x20 || c == 0x7f:
			return Errorf(EINVAL, "invalid name %q: contains a control character", s)
		case isAlnum(c):
		case i > 0 && (c == '.' || c == '_' || c == '+' || c == '-'):
		case i == 0:
			return Errorf(EINVAL, "invalid name %q: must start with a letter or digit", s)
		default:
			return Errorf(EINVAL, "invalid name %q: character %q not allowed", s, c)
		}
	}
	switch {
	case strings.HasSuffix(s, ".sock"):
		return Errorf(EINVAL, "invalid name %q: suffix .sock is reserved for sockets", s)
	case strings.HasSuffix(s, ".d"):
		return Errorf(EINVAL, "invalid name %q: suffix .d is reserved for control directories", s)
	}
	return nil
}

// ValidModelID checks a stable model identity "provider/model": exactly two
// components, each a valid name.
func ValidModelID(id string) error {
	_, _, err := SplitModelID(id)
	return err
}

// SplitModelID splits "provider/model" into its two validated components.
func SplitModelID(id string) (provider, model string, err error) {
	parts := strings.Split(id, "/")
	if len(parts) != 2 {
		return "", "", Errorf(EINVAL, "invalid model id %q: want provider/model (two components)", truncate(id))
	}
	for _, p := range parts {
		if err := ValidName(p); err != nil {
			return "", "", Errorf(EINVAL, "invalid model id %q: %v", truncate(id), err)
		}
	}
	return parts[0], parts[1], nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// truncate keeps error messages bounded when the input is hostile.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
