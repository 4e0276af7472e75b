package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Capabilities is the result of the capability probe: what the codex
// binary's own app-server protocol declares, against what delivery needs.
type Capabilities struct {
	CodexBin      string   `json:"codex_bin"`
	Methods       []string `json:"methods"`
	Notifications []string `json:"notifications"`
	TurnStatuses  []string `json:"turn_statuses"`
	ClientMarker  bool     `json:"turn_start_client_user_message_id"`
	Missing       []string `json:"missing"`
}

// OK reports nothing missing.
func (c *Capabilities) OK() bool { return len(c.Missing) == 0 }

// Reason is the fail-closed reason shown by inspect and doctor.
func (c *Capabilities) Reason() string {
	if c.OK() {
		return ""
	}
	return "capability probe: missing " + strings.Join(c.Missing, ", ") + "; automatic delivery disabled"
}

// Required is the minimum capability set of CLI delivery.
var (
	requiredMethods       = []string{"initialize", "thread/resume", "thread/read", "turn/start"}
	requiredNotifications = []string{"thread/started", "thread/status/changed", "turn/started", "turn/completed"}
	requiredTurnStatuses  = []string{"completed", "failed", "interrupted"}
)

// Probe asks the binary for its protocol (`codex app-server
// generate-json-schema`) and checks the methods, notifications, terminal
// turn statuses and the turn/start client id that carries the marker.
func Probe(ctx context.Context, codexBin string, env []string) (*Capabilities, error) {
	dir, err := os.MkdirTemp("", "cbth-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, codexBin, "app-server", "generate-json-schema", "--out", dir)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s app-server generate-json-schema: %v: %s", codexBin, err, lastLine(out))
	}
	c := &Capabilities{CodexBin: codexBin}
	c.Methods = methodsOf(filepath.Join(dir, "ClientRequest.json"))
	c.Notifications = methodsOf(filepath.Join(dir, "ServerNotification.json"))
	defs := definitions(filepath.Join(dir, "codex_app_server_protocol.v2.schemas.json"))
	var ts struct {
		Enum []string `json:"enum"`
	}
	_ = json.Unmarshal(defs["TurnStatus"], &ts)
	c.TurnStatuses = ts.Enum
	var tsp struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(defs["TurnStartParams"], &tsp)
	_, c.ClientMarker = tsp.Properties["clientUserMessageId"]
	for _, m := range requiredMethods {
		if !slices.Contains(c.Methods, m) {
			c.Missing = append(c.Missing, "method "+m)
		}
	}
	for _, n := range requiredNotifications {
		if !slices.Contains(c.Notifications, n) {
			c.Missing = append(c.Missing, "notification "+n)
		}
	}
	for _, s := range requiredTurnStatuses {
		if !slices.Contains(c.TurnStatuses, s) {
			c.Missing = append(c.Missing, "turn status "+s)
		}
	}
	if !c.ClientMarker {
		c.Missing = append(c.Missing, "turn/start clientUserMessageId")
	}
	return c, nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// methodsOf reads the method names of a oneOf-of-messages schema file.
func methodsOf(path string) []string {
	var doc struct {
		OneOf []struct {
			Properties struct {
				Method struct {
					Enum []string `json:"enum"`
				} `json:"method"`
			} `json:"properties"`
		} `json:"oneOf"`
	}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &doc) != nil {
		return nil
	}
	var out []string
	for _, v := range doc.OneOf {
		out = append(out, v.Properties.Method.Enum...)
	}
	return out
}

func definitions(path string) map[string]json.RawMessage {
	var doc struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		_ = json.Unmarshal(b, &doc)
	}
	return doc.Definitions
}

// ResolveCodexBin picks the codex binary: the flag, then CBTH_CODEX_BIN,
// then PATH (looked up in the caller's environment).
func ResolveCodexBin(flagValue string, env []string) (string, error) {
	name := flagValue
	if name == "" {
		name = lookupEnv(env, "CBTH_CODEX_BIN")
	}
	if name == "" {
		name = "codex"
	}
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("codex binary %s is not an executable file", abs)
		}
		return abs, nil
	}
	for _, dir := range filepath.SplitList(lookupEnv(env, "PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("codex binary %q not found (use --codex-bin, CBTH_CODEX_BIN or PATH)", name)
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
