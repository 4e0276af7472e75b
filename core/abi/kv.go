package abi

import (
	"bytes"
	"strings"
)

// KV is one KEY=VALUE line of a control file such as .d/default.
type KV struct {
	Key   string
	Value string
}

// MaxControlFile bounds every small control file we parse.
const MaxControlFile = 64 << 10

// ParseKV parses KEY=VALUE lines (.d/default and similar). Blank lines and
// lines starting with '#' are ignored. Keys are [A-Za-z_][A-Za-z0-9_.-]*;
// the value is everything after the first '=' (it may itself contain '='),
// with a trailing CR dropped. A line without '=', an invalid key, a duplicate
// key or a NUL byte is EINVAL naming the line.
func ParseKV(data []byte) ([]KV, error) {
	var out []KV
	seen := map[string]int{}
	err := eachLine(data, func(n int, line string) error {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimLeft(line, " \t"), "#") {
			return nil
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Errorf(EINVAL, "line %d: want KEY=VALUE", n)
		}
		if strings.ContainsRune(v, '\r') {
			return Errorf(EINVAL, "line %d: value contains a carriage return", n)
		}
		k = strings.TrimSpace(k)
		if err := validKey(k); err != nil {
			return Errorf(EINVAL, "line %d: %v", n, err)
		}
		if prev, dup := seen[k]; dup {
			return Errorf(EINVAL, "line %d: key %q repeats line %d", n, k, prev)
		}
		seen[k] = n
		out = append(out, KV{Key: k, Value: v})
		return nil
	})
	return out, err
}

// KVMap is ParseKV into a map.
func KVMap(data []byte) (map[string]string, error) {
	kvs, err := ParseKV(data)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m, nil
}

// FormatKV writes KEY=VALUE lines in the given order. Keys must be valid and
// values must not contain a newline, CR or NUL, so the output always parses
// back to the same list.
func FormatKV(kvs []KV) ([]byte, error) {
	var b bytes.Buffer
	seen := map[string]bool{}
	for _, kv := range kvs {
		if err := validKey(kv.Key); err != nil {
			return nil, err
		}
		if seen[kv.Key] {
			return nil, Errorf(EINVAL, "key %q repeats", kv.Key)
		}
		seen[kv.Key] = true
		if strings.ContainsAny(kv.Value, "\n\r\x00") {
			return nil, Errorf(EINVAL, "value of %q contains a line break or NUL", kv.Key)
		}
		b.WriteString(kv.Key)
		b.WriteByte('=')
		b.WriteString(kv.Value)
		b.WriteByte('\n')
	}
	if b.Len() > MaxControlFile {
		return nil, Errorf(EINVAL, "control file would be larger than %d bytes", MaxControlFile)
	}
	return b.Bytes(), nil
}

func validKey(k string) error {
	if k == "" {
		return Errorf(EINVAL, "empty key")
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
			i > 0 && (c >= '0' && c <= '9' || c == '.' || c == '-')
		if !ok {
			return Errorf(EINVAL, "invalid key %q", truncate(k))
		}
	}
	return nil
}

// eachLine calls fn with 1-based line numbers. Lines end in LF; one CR
// before the LF is dropped (CRLF files). A file over MaxControlFile or with
// a NUL byte anywhere is rejected before any line is looked at.
func eachLine(data []byte, fn func(n int, line string) error) error {
	if len(data) > MaxControlFile {
		return Errorf(EINVAL, "control file larger than %d bytes", MaxControlFile)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return Errorf(EINVAL, "control file contains NUL")
	}
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		if err := fn(n, string(bytes.TrimSuffix(line, []byte("\r")))); err != nil {
			return err
		}
	}
	return nil
}
