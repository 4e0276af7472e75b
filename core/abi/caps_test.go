package abi

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var stableWords = []string{"chat", "stream", "session", "vision", "audio_input", "audio_output",
	"json_schema", "tool_call_syntax", "reasoning", "embedding", "rerank"}

var forbiddenWords = []string{"openai_responses", "anthropic_messages", "gemini_generate_content",
	"native_thread", "native_stateful", "native_stateless"}

func TestCapabilityVocabulary(t *testing.T) {
	if len(Capabilities) != len(stableWords) {
		t.Fatalf("len(Capabilities) = %d, want %d", len(Capabilities), len(stableWords))
	}
	for i, w := range stableWords {
		if string(Capabilities[i]) != w {
			t.Errorf("Capabilities[%d] = %q, want %q", i, Capabilities[i], w)
		}
		if !Capability(w).Known() {
			t.Errorf("%q.Known() = false", w)
		}
	}
	consts := []Capability{CapChat, CapStream, CapSession, CapVision, CapAudioInput, CapAudioOutput,
		CapJSONSchema, CapToolCallSyntax, CapReasoning, CapEmbedding, CapRerank}
	if !reflect.DeepEqual(consts, Capabilities) {
		t.Errorf("constants %q != Capabilities %q", consts, Capabilities)
	}
	if !reflect.DeepEqual(ForbiddenCapabilities, forbiddenWords) {
		t.Errorf("ForbiddenCapabilities = %q, want %q", ForbiddenCapabilities, forbiddenWords)
	}
	for _, w := range forbiddenWords {
		if Capability(w).Known() {
			t.Errorf("forbidden %q.Known() = true", w)
		}
	}
	for _, w := range []string{"", "Chat", "CHAT", " chat", "tools", "tool_call", "function_calling"} {
		if Capability(w).Known() {
			t.Errorf("%q.Known() = true", w)
		}
	}
}

func TestParseCaps(t *testing.T) {
	all := strings.Join(stableWords, "\n") + "\n"
	tests := []struct {
		name string
		in   string
		want []Capability
		msg  string
	}{
		{"empty", "", nil, ""},
		{"only comments", "# none\n\n", nil, ""},
		{"one", "chat\n", []Capability{CapChat}, ""},
		{"no final newline", "chat\nstream", []Capability{CapChat, CapStream}, ""},
		{"all stable words", all, Capabilities, ""},
		{"order kept", "rerank\nchat\n", []Capability{CapRerank, CapChat}, ""},
		{"comments and blanks", "# caps\n\nchat\n  # x\n\t\nvision\n", []Capability{CapChat, CapVision}, ""},
		{"surrounding spaces", "  chat  \n\tstream\t\n", []Capability{CapChat, CapStream}, ""},
		{"CRLF", "chat\r\nstream\r\n", []Capability{CapChat, CapStream}, ""},

		{"unknown word", "chat\ntools\n", nil, `line 2: unknown capability "tools"`},
		{"wrong case", "Chat\n", nil, `unknown capability "Chat"`},
		{"upper-case forbidden word is just unknown", "OPENAI_RESPONSES\n", nil, "unknown capability"},
		{"two words on a line", "chat stream\n", nil, `unknown capability "chat stream"`},
		{"inline comment", "chat # main\n", nil, "unknown capability"},
		{"comma list", "chat,stream\n", nil, "unknown capability"},
		{"repeat", "chat\nstream\nchat\n", nil, `line 3: capability "chat" repeats line 1`},
		{"repeat with padding", "chat\n\n  chat \n", nil, `line 3: capability "chat" repeats line 1`},
		{"NUL", "chat\x00\n", nil, "NUL"},
	}
	for _, w := range forbiddenWords {
		tests = append(tests, struct {
			name string
			in   string
			want []Capability
			msg  string
		}{"forbidden " + w, "chat\n  " + w + " \n", nil, fmt.Sprintf("line 2: %q is a provider-private capability word, forbidden", w)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCaps([]byte(tt.in))
			if tt.msg != "" {
				wantErr(t, err, EINVAL, tt.msg)
				if strings.HasPrefix(tt.name, "forbidden ") {
					for _, f := range []string{"forbidden", "private"} {
						if !strings.Contains(err.Error(), f) {
							t.Errorf("forbidden-word error %q does not say %q", err, f)
						}
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCaps(%q) = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseCaps(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// MaxControlFile "bounds every small control file we parse"; ParseKV
// enforces it, ParseCaps should too.
func TestParseCapsSize(t *testing.T) {
	in := strings.Repeat("#\n", MaxControlFile) + "chat\n"
	if _, err := ParseCaps([]byte(in)); err == nil {
		t.Fatalf("ParseCaps accepted a %d-byte file (> MaxControlFile=%d)", len(in), MaxControlFile)
	} else {
		wantErr(t, err, EINVAL)
	}
}

func TestFormatCaps(t *testing.T) {
	tests := []struct {
		name string
		in   []Capability
		want string
		msg  string
	}{
		{"nil", nil, "", ""},
		{"one", []Capability{CapChat}, "chat\n", ""},
		{"order kept", []Capability{CapRerank, CapChat}, "rerank\nchat\n", ""},
		{"all", Capabilities, strings.Join(stableWords, "\n") + "\n", ""},
		{"unknown", []Capability{"tools"}, "", `unknown capability "tools"`},
		{"empty word", []Capability{""}, "", "unknown capability"},
		{"padded word", []Capability{" chat"}, "", "unknown capability"},
		{"word with newline", []Capability{"chat\nstream"}, "", "unknown capability"},
		{"repeat", []Capability{CapChat, CapStream, CapChat}, "", `capability "chat" repeats`},
	}
	for _, w := range forbiddenWords {
		tests = append(tests, struct {
			name string
			in   []Capability
			want string
			msg  string
		}{"forbidden " + w, []Capability{Capability(w)}, "", "unknown capability"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FormatCaps(tt.in)
			if tt.msg != "" {
				wantErr(t, err, EINVAL, tt.msg)
				if got != nil {
					t.Errorf("FormatCaps returned %q with the error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("FormatCaps: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("FormatCaps = %q, want %q", got, tt.want)
			}
			back, err := ParseCaps(got)
			if err != nil {
				t.Fatalf("ParseCaps(FormatCaps) = %v", err)
			}
			if len(back) != len(tt.in) || (len(back) > 0 && !reflect.DeepEqual(back, tt.in)) {
				t.Errorf("round trip = %q, want %q", back, tt.in)
			}
		})
	}
}

func TestHasCap(t *testing.T) {
	caps := []Capability{CapChat, CapStream}
	tests := []struct {
		caps []Capability
		c    Capability
		want bool
	}{
		{caps, CapChat, true},
		{caps, CapStream, true},
		{caps, CapVision, false},
		{nil, CapChat, false},
		{caps, "", false},
	}
	for _, tt := range tests {
		if got := HasCap(tt.caps, tt.c); got != tt.want {
			t.Errorf("HasCap(%q, %q) = %v, want %v", tt.caps, tt.c, got, tt.want)
		}
	}
}
