package tree

import (
	"bytes"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// MetaClassKey names the object class inside an object file.
const MetaClassKey = "cortexfs.object"

// Meta is the inspectable content of an object file: the runner shebang and
// key=value metadata lines. It never holds code or secrets.
type Meta struct {
	Runner string // interpreter path of the #! line
	Class  abi.Class
	KV     []abi.KV // every key=value line after the shebang, in order
}

// Get returns the value of key.
func (m Meta) Get(key string) string {
	for _, kv := range m.KV {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

// Format renders an object file: "#!runner" then cortexfs.object=class and
// the remaining metadata lines.
func (m Meta) Format() ([]byte, error) {
	if m.Runner == "" || strings.ContainsAny(m.Runner, " \t\n\x00") || !strings.HasPrefix(m.Runner, "/") {
		return nil, abi.Errorf(abi.EINVAL, "runner %q must be an absolute path without spaces", m.Runner)
	}
	kvs := append([]abi.KV{{Key: MetaClassKey, Value: string(m.Class)}}, m.KV...)
	body, err := abi.FormatKV(kvs)
	if err != nil {
		return nil, err
	}
	return append([]byte("#!"+m.Runner+"\n"), body...), nil
}

// ParseMeta reads an object file. It must start with "#!" and declare its
// class; anything that is not key=value metadata (shell code, say) is EINVAL.
func ParseMeta(data []byte) (Meta, error) {
	line, rest, _ := bytes.Cut(data, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("#!")) {
		return Meta{}, abi.Errorf(abi.EINVAL, "object file does not start with #!")
	}
	fields := strings.Fields(string(line[2:]))
	if len(fields) == 0 {
		return Meta{}, abi.Errorf(abi.EINVAL, "object file has an empty #! line")
	}
	kvs, err := abi.ParseKV(rest)
	if err != nil {
		return Meta{}, abi.Errorf(abi.EINVAL, "object metadata: %v", err)
	}
	m := Meta{Runner: fields[0]}
	for _, kv := range kvs {
		if kv.Key == MetaClassKey {
			m.Class = abi.Class(kv.Value)
			continue
		}
		m.KV = append(m.KV, kv)
	}
	switch m.Class {
	case abi.ClassModel, abi.ClassTool, abi.ClassAgent:
	default:
		return Meta{}, abi.Errorf(abi.EINVAL, "object metadata: unknown %s=%q", MetaClassKey, m.Class)
	}
	return m, nil
}
