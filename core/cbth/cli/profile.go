package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Profile is the three permission dimensions of a session.
type Profile struct {
	Approval bool `json:"allows_approval"`
	Network  bool `json:"allows_network"`
	Write    bool `json:"allows_write_access"`
}

// And is the per-dimension tighter of p and q.
func (p Profile) And(q Profile) Profile {
	return Profile{Approval: p.Approval && q.Approval, Network: p.Network && q.Network, Write: p.Write && q.Write}
}

// StrictSafe reports all three dimensions false.
func (p Profile) StrictSafe() bool { return !p.Approval && !p.Network && !p.Write }

// Changed lists the dimensions where p and q differ.
func (p Profile) Changed(q Profile) []string {
	var out []string
	if p.Approval != q.Approval {
		out = append(out, "approval")
	}
	if p.Network != q.Network {
		out = append(out, "network")
	}
	if p.Write != q.Write {
		out = append(out, "write_access")
	}
	return out
}

// Snapshot is one trusted reading of thread/resume's approvalPolicy and
// sandbox: the raw values and what they allow.
type Snapshot struct {
	ApprovalPolicy json.RawMessage `json:"approvalPolicy"`
	Sandbox        json.RawMessage `json:"sandbox"`
	Allows         Profile         `json:"allows"`
	WritableRoots  []string        `json:"writableRoots,omitempty"`
	// The workspace exclusions of a workspaceWrite sandbox: a pinned legacy
	// sandbox carries them, or it would widen the thread's write access.
	ExcludeSlashTmp     bool `json:"excludeSlashTmp,omitempty"`
	ExcludeTmpdirEnvVar bool `json:"excludeTmpdirEnvVar,omitempty"`
	// ActiveProfile is thread/resume's activePermissionProfile id, when the
	// server reports one.
	ActiveProfile string `json:"activePermissionProfile,omitempty"`
}

// ParseSnapshot reads approvalPolicy (AskForApproval) and sandbox
// (SandboxPolicy). Anything it cannot classify exactly is an error: the
// caller fails closed.
func ParseSnapshot(approval, sandbox json.RawMessage) (Snapshot, error) {
	s := Snapshot{ApprovalPolicy: approval, Sandbox: sandbox}
	var mode string
	if err := json.Unmarshal(approval, &mode); err == nil {
		switch mode {
		case "never":
		case "on-request", "untrusted":
			s.Allows.Approval = true
		default:
			return s, fmt.Errorf("unknown approvalPolicy %q", mode)
		}
	} else {
		var g struct {
			Granular map[string]any `json:"granular"`
		}
		if err := json.Unmarshal(approval, &g); err != nil || g.Granular == nil {
			return s, fmt.Errorf("unparsable approvalPolicy %s", approval)
		}
		s.Allows.Approval = true
	}
	var sb struct {
		Type                string          `json:"type"`
		NetworkAccess       json.RawMessage `json:"networkAccess"`
		WritableRoots       []string        `json:"writableRoots"`
		ExcludeSlashTmp     bool            `json:"excludeSlashTmp"`
		ExcludeTmpdirEnvVar bool            `json:"excludeTmpdirEnvVar"`
	}
	if err := json.Unmarshal(sandbox, &sb); err != nil {
		return s, fmt.Errorf("unparsable sandbox %s", sandbox)
	}
	net, err := networkAccess(sb.Type, sb.NetworkAccess)
	if err != nil {
		return s, err
	}
	s.Allows.Network = net
	switch sb.Type {
	case "readOnly":
	case "workspaceWrite":
		s.Allows.Write = true
		for _, r := range sb.WritableRoots {
			if !filepath.IsAbs(r) || strings.Contains("/"+r+"/", "/../") {
				return s, fmt.Errorf("writable root %q is not a clean absolute path", r)
			}
		}
		s.WritableRoots = sb.WritableRoots
		s.ExcludeSlashTmp, s.ExcludeTmpdirEnvVar = sb.ExcludeSlashTmp, sb.ExcludeTmpdirEnvVar
	case "dangerFullAccess", "externalSandbox":
		s.Allows.Write = true
	default:
		return s, fmt.Errorf("unknown sandbox type %q", sb.Type)
	}
	return s, nil
}

func networkAccess(typ string, raw json.RawMessage) (bool, error) {
	if typ == "dangerFullAccess" {
		return true, nil
	}
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return b, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && (s == "enabled" || s == "restricted") {
		return s == "enabled", nil
	}
	return false, fmt.Errorf("unparsable networkAccess %s", raw)
}

// Requested is one --session-allows-* value: auto, true or false.
type Requested string

// ParseRequested validates a flag value.
func ParseRequested(s string) (Requested, error) {
	switch s {
	case "", "auto":
		return "auto", nil
	case "true", "false":
		return Requested(s), nil
	}
	return "", fmt.Errorf("want auto, true or false, got %q", s)
}

// bootstrap applies explicit true/false over an auto snapshot's value.
func (r Requested) bootstrap(auto bool) bool {
	switch r {
	case "true":
		return true
	case "false":
		return false
	}
	return auto
}

// PinnedPolicy is what turn/start carries for the effective profile: the
// approvalPolicy and the legacy sandboxPolicy, never wider than the
// current thread's (its writable roots and workspace exclusions kept).
func PinnedPolicy(eff Profile, current Snapshot) (approval, sandbox json.RawMessage) {
	approval = json.RawMessage(`"never"`)
	if eff.Approval {
		approval = current.ApprovalPolicy
	}
	if !eff.Write {
		sandbox, _ = json.Marshal(map[string]any{"type": "readOnly", "networkAccess": eff.Network})
		return approval, sandbox
	}
	roots := current.WritableRoots
	if roots == nil {
		roots = []string{}
	}
	sb := map[string]any{"type": "workspaceWrite", "networkAccess": eff.Network, "writableRoots": roots}
	if current.ExcludeSlashTmp {
		sb["excludeSlashTmp"] = true
	}
	if current.ExcludeTmpdirEnvVar {
		sb["excludeTmpdirEnvVar"] = true
	}
	sandbox, _ = json.Marshal(sb)
	return approval, sandbox
}

// builtinSandbox is the legacy sandbox type each stable built-in profile
// materializes as.
var builtinSandbox = map[string]string{":read-only": "readOnly", ":workspace": "workspaceWrite",
	":danger-full-access": "dangerFullAccess"}

// CheckActiveProfile prefers the active permission profile over the legacy
// sandbox: when a built-in profile is active, the legacy sandbox must be
// what that profile materializes as, or the snapshot is not trusted.
func CheckActiveProfile(s Snapshot) error {
	want, builtin := builtinSandbox[s.ActiveProfile]
	if !builtin {
		return nil
	}
	var sb struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(s.Sandbox, &sb) != nil || sb.Type != want {
		return fmt.Errorf("activePermissionProfile %s disagrees with the legacy sandbox %s", s.ActiveProfile, s.Sandbox)
	}
	return nil
}

// ProfileID is the permission profile turn/start sends instead of a
// legacy sandboxPolicy, per the seed: only a stable built-in profile
// (":read-only", ":workspace", ":danger-full-access"; a user-defined id is
// mutable) that is the thread's current active profile and represents the
// effective cap exactly, i.e. the effective profile is the current one
// (nothing tighter from the startup pin). Otherwise "" and the pinned
// legacy sandbox is sent.
func ProfileID(eff Profile, current Snapshot, supported bool) string {
	if !supported || !strings.HasPrefix(current.ActiveProfile, ":") || eff != current.Allows {
		return ""
	}
	switch current.ActiveProfile {
	case ":read-only", ":workspace", ":danger-full-access":
		return current.ActiveProfile
	}
	return ""
}
