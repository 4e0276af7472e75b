package t

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// githubSlug is the anchor GitHub gives a heading.
func githubSlug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Issue 15: README says who is trusted for what. The section exists, names
// every privileged component and the credential rule, and each of its
// links to another README section resolves.
func TestSecurityThreatModelDocumented(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,4} (.+)$`).FindAllStringSubmatch(readme, -1) {
		anchors[githubSlug(m[1])] = true
	}
	i := strings.Index(readme, "\n## Threat model\n")
	if i < 0 {
		t.Fatal(`README has no "## Threat model" section`)
	}
	sec := readme[i+1:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	for _, w := range []string{"Root and the owner of a tier", "hostile", "cortexfsd", "one-shot", "ctx-agent",
		"sandbox", "tool", "ctx-mount", "cbth", "Credentials", "never cross", "core/safefs", "SO_PEERCRED"} {
		if !strings.Contains(sec, w) {
			t.Errorf("the threat model does not mention %q", w)
		}
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(sec, -1) {
		if !anchors[m[1]] {
			t.Errorf("the threat model links to #%s, which no README heading is", m[1])
		}
	}
}
