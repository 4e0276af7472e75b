package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/codex"
)

// MinCodexVersion is the oldest supported codex: the first whose turn/start
// takes clientUserMessageId, the correlation marker's carrier.
const MinCodexVersion = "0.136.0"

// Capabilities is the result of the capability probe: what the codex
// binary's own app-server protocol declares (read with the experimental
// setting the connection declares), against what delivery relies on.
type Capabilities struct {
	CodexBin      string   `json:"codex_bin"`
	Version       string   `json:"version,omitempty"`
	MinVersion    string   `json:"min_version"`
	Experimental  bool     `json:"experimental_api"`
	Methods       []string `json:"methods"`
	Notifications []string `json:"notifications"`
	TurnStatuses  []string `json:"turn_statuses"`
	// Features are the optional capabilities cbth uses when present.
	Features Features `json:"features"`
	Missing  []string `json:"missing"`
	// ClientMarker is kept for older readers of capability_json.
	ClientMarker bool `json:"turn_start_client_user_message_id"`
}

// Features are what delivery uses when the server has it.
type Features struct {
	// TurnsList: thread/turns/list reads turns without full-history
	// hydration (thread/read includeTurns is deprecated on 0.169).
	TurnsList bool `json:"thread_turns_list"`
	// PermissionProfile: turn/start permissions and thread/resume
	// activePermissionProfile (a profile id instead of a legacy sandbox).
	PermissionProfile bool `json:"permission_profile"`
	// TurnSteer: turn/steer with expectedTurnId and clientUserMessageId.
	TurnSteer bool `json:"turn_steer"`
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

// Every method and notification delivery relies on; a missing one fails
// closed. turn/steer is required only by a session with --enable-turn-steer.
var (
	requiredMethods = []string{codex.MethodInitialize, codex.MethodThreadResume, codex.MethodThreadRead,
		codex.MethodTurnStart, codex.MethodThreadSettingsUpdate}
	requiredNotifications = []string{codex.NoteThreadStarted, codex.NoteThreadStatusChanged, codex.NoteTurnStarted,
		codex.NoteTurnCompleted}
	requiredTurnStatuses = []string{codex.TurnCompleted, codex.TurnFailed, codex.TurnInterrupted}
	// requiredFields are the request and response fields delivery sends or
	// reads: definition name -> properties.
	requiredFields = []struct{ def, prop, why string }{
		{"TurnStartParams", "clientUserMessageId", "the correlation marker"},
		{"TurnStartParams", "approvalPolicy", "the pinned approval policy"},
		{"TurnStartParams", "sandboxPolicy", "the pinned sandbox"},
		{"ThreadResumeParams", "excludeTurns", "resume without history"},
		{"ThreadResumeResponse", "approvalPolicy", "the permission snapshot"},
		{"ThreadResumeResponse", "sandbox", "the permission snapshot"},
		{"ThreadSettingsUpdateParams", "approvalPolicy", "restoring the user's settings"},
		{"ThreadSettingsUpdateParams", "sandboxPolicy", "restoring the user's settings"},
	}
)

// Probe asks the binary for its protocol (`codex app-server
// generate-json-schema`, with --experimental exactly when the connection
// declares experimentalApi) and its version, and checks every method,
// notification, field and terminal turn status delivery relies on.
func Probe(ctx context.Context, codexBin string, env []string) (*Capabilities, error) {
	dir, err := os.MkdirTemp("", "cbth-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := []string{"app-server", "generate-json-schema", "--out", dir}
	if codex.Experimental {
		args = append(args, "--experimental")
	}
	cmd := exec.CommandContext(ctx, codexBin, args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s app-server generate-json-schema: %v: %s", codexBin, err, lastLine(out))
	}
	c := &Capabilities{CodexBin: codexBin, MinVersion: MinCodexVersion, Experimental: codex.Experimental,
		Version: codexVersion(ctx, codexBin, env)}
	c.Methods = methodsOf(filepath.Join(dir, "ClientRequest.json"))
	c.Notifications = methodsOf(filepath.Join(dir, "ServerNotification.json"))
	defs := definitions(filepath.Join(dir, "codex_app_server_protocol.v2.schemas.json"))
	var ts struct {
		Enum []string `json:"enum"`
	}
	_ = json.Unmarshal(defs["TurnStatus"], &ts)
	c.TurnStatuses = ts.Enum
	c.ClientMarker = hasField(defs, "TurnStartParams", "clientUserMessageId")
	if c.Version != "" && versionLess(c.Version, MinCodexVersion) {
		c.Missing = append(c.Missing, fmt.Sprintf("codex >= %s (found %s)", MinCodexVersion, c.Version))
	}
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
	for _, f := range requiredFields {
		if !hasField(defs, f.def, f.prop) {
			c.Missing = append(c.Missing, fmt.Sprintf("%s %s (%s)", fieldOwner(f.def), f.prop, f.why))
		}
	}
	c.Features = Features{
		TurnsList: slices.Contains(c.Methods, codex.MethodThreadTurnsList) &&
			hasField(defs, "ThreadTurnsListParams", "itemsView"),
		PermissionProfile: hasField(defs, "TurnStartParams", "permissions") &&
			hasField(defs, "ThreadResumeResponse", "activePermissionProfile") &&
			hasField(defs, "ThreadSettingsUpdateParams", "permissions"),
		TurnSteer: slices.Contains(c.Methods, codex.MethodTurnSteer) &&
			hasField(defs, "TurnSteerParams", "expectedTurnId") && hasField(defs, "TurnSteerParams", "clientUserMessageId"),
	}
	return c, nil
}

// RequireSteer adds what --enable-turn-steer relies on to c's verdict.
func (c *Capabilities) RequireSteer() {
	if !c.Features.TurnSteer && !slices.Contains(c.Missing, "method turn/steer (--enable-turn-steer)") {
		c.Missing = append(c.Missing, "method turn/steer (--enable-turn-steer)")
	}
}

// fieldOwner names a definition the way the protocol's methods are named.
func fieldOwner(def string) string {
	switch def {
	case "TurnStartParams":
		return "turn/start"
	case "ThreadResumeParams", "ThreadResumeResponse":
		return "thread/resume"
	case "ThreadSettingsUpdateParams":
		return "thread/settings/update"
	}
	return def
}

func hasField(defs map[string]json.RawMessage, def, prop string) bool {
	var d struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(defs[def], &d)
	_, ok := d.Properties[prop]
	return ok
}

// versionRE is compiled on first use, not before main.
var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`) })

// codexVersion is `codex --version`'s x.y.z, or "" when it says none.
func codexVersion(ctx context.Context, bin string, env []string) string {
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = env
	out, _ := cmd.Output()
	return versionRE().FindString(string(out))
}

// versionLess compares x.y.z versions numerically.
func versionLess(a, b string) bool {
	pa, pb := versionRE().FindStringSubmatch(a), versionRE().FindStringSubmatch(b)
	if pa == nil || pb == nil {
		return false
	}
	for i := 1; i <= 3; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return false
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
			return "", abi.Errorf(abi.EHOSTDOWN, "codex binary %s is not an executable file: %s", abs, codexFix)
		}
		return abs, nil
	}
	for _, dir := range filepath.SplitList(lookupEnv(env, "PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	return "", abi.Errorf(abi.EHOSTDOWN, "codex binary %q not found on PATH: %s", name, codexFix)
}

// codexFix is how to give cbth a codex binary.
const codexFix = "install Codex (npm install -g @openai/codex) or name it with --codex-bin PATH or CBTH_CODEX_BIN"

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
