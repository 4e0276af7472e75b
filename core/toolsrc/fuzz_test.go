package toolsrc

import (
	"encoding/json"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Every parser of tool-source input is fuzzed: it never panics, fails
// only with stable codes, and what it accepts is consistent. Seeds are
// also in testdata/fuzz.

func FuzzParseMCPConfig(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","args":["-y"],"env":{"K":"v"}},"b":{"type":"http","url":"http://h/mcp"}}}`))
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x"},"a":{"command":"y"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseMCPConfig(b)
		if err != nil {
			if c := abi.CodeOf(err); c != abi.EINVAL && c != abi.EMSGSIZE {
				t.Fatalf("code %s: %v", c, err)
			}
			return
		}
		for _, s := range cfg.Servers {
			if s.Err != nil {
				if c := abi.CodeOf(s.Err); c != abi.EINVAL && c != abi.ENOTSUP {
					t.Fatalf("server code %s: %v", c, s.Err)
				}
				continue
			}
			if ValidSourceName(s.Name) != nil || (s.Transport != TransportStdio && s.Transport != TransportHTTP) {
				t.Fatalf("accepted %+v", s)
			}
			// What was accepted can be written back and reads the same.
			out, err := AddServer(nil, s, false)
			if err != nil {
				t.Fatalf("re-adding accepted server %s: %v", s.Name, err)
			}
			again, err := ParseMCPConfig(out)
			if err != nil || len(again.Servers) != 1 || again.Servers[0].Fingerprint() != s.Fingerprint() {
				t.Fatalf("round trip of %s: %v\n%s", s.Name, err, out)
			}
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(nativeManifest))
	f.Add([]byte(processManifest))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			if c := abi.CodeOf(err); c != abi.EINVAL && c != abi.ENOTSUP && c != abi.EMSGSIZE {
				t.Fatalf("code %s: %v", c, err)
			}
			return
		}
		if ValidSourceName(m.Name) != nil || (m.Native == nil) == (m.Process == nil) {
			t.Fatalf("accepted %+v", m)
		}
		for _, tl := range m.Tools {
			if _, err := ProjectedName(PrefixPlugin, m.Name, tl.Name); err != nil {
				t.Fatalf("accepted tool %q: %v", tl.Name, err)
			}
			if _, err := tl.Schema(); err != nil {
				t.Fatalf("accepted schema of %q: %v", tl.Name, err)
			}
		}
	})
}

func FuzzDecodeDescriptor(f *testing.F) {
	f.Add([]byte(`{"name":"word_count","description":"d","input_schema":{"type":"object","properties":{"text":{"type":"string"}}},"timeout_secs":null,"capabilities":{"emits_progress":false,"emits_observer_text":false,"background_safe":true,"effects":[{"kind":"write_file","reversibility":"reversible","confirmation":"never","dry_run":"supported"}]}}`))
	f.Add([]byte(`{"name":"x/y","input_schema":{"$ref":"#/$defs/a","$defs":{"a":{"type":"object"}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, err := DecodeDescriptor("p", b)
		if err != nil {
			if abi.CodeOf(err) != abi.EPROTO {
				t.Fatalf("code %s: %v", abi.CodeOf(err), err)
			}
			return
		}
		if _, err := ProjectedName(PrefixPlugin, "p", spec.Original); err != nil {
			t.Fatalf("accepted name %q: %v", spec.Original, err)
		}
		if !json.Valid(spec.Input) {
			t.Fatalf("accepted schema is not JSON: %s", spec.Input)
		}
	})
}

func FuzzDecodeToolResult(f *testing.F) {
	f.Add([]byte(`{"output":"3 words","media":[],"is_error":false}`))
	f.Add([]byte(`{"output":"x","media":[{"media_type":"image","mime_type":"image/png","url":"/tmp/a.png","caption":null,"size":3}],"is_error":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeToolResult(b)
		if err != nil {
			if abi.CodeOf(err) != abi.EPROTO {
				t.Fatalf("code %s: %v", abi.CodeOf(err), err)
			}
			return
		}
		again, err := DecodeToolResult(r.Encode())
		if err != nil || again.Output != r.Output || again.IsError != r.IsError {
			t.Fatalf("re-encoding %+v: %+v %v", r, again, err)
		}
	})
}
