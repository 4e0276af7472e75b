package cli

import (
	"encoding/json"
	"testing"
)

func TestParseSnapshot(t *testing.T) {
	cases := []struct {
		approval, sandbox string
		want              Profile
		bad               bool
	}{
		{`"never"`, `{"type":"readOnly","networkAccess":false}`, Profile{}, false},
		{`"on-request"`, `{"type":"readOnly"}`, Profile{Approval: true}, false},
		{`"never"`, `{"type":"workspaceWrite","networkAccess":true,"writableRoots":["/w"]}`, Profile{Network: true, Write: true}, false},
		{`"never"`, `{"type":"dangerFullAccess"}`, Profile{Network: true, Write: true}, false},
		{`"never"`, `{"type":"externalSandbox","networkAccess":"restricted"}`, Profile{Write: true}, false},
		{`{"granular":{"rules":true}}`, `{"type":"readOnly"}`, Profile{Approval: true}, false},
		{`"sometimes"`, `{"type":"readOnly"}`, Profile{}, true},
		{`"never"`, `{"type":"mystery"}`, Profile{}, true},
		{`"never"`, `{"type":"workspaceWrite","writableRoots":["/w/../etc"]}`, Profile{}, true},
		{`"never"`, `{"type":"readOnly","networkAccess":"maybe"}`, Profile{}, true},
	}
	for _, c := range cases {
		s, err := ParseSnapshot(json.RawMessage(c.approval), json.RawMessage(c.sandbox))
		if (err != nil) != c.bad || (!c.bad && s.Allows != c.want) {
			t.Errorf("%s %s: got %+v err %v, want %+v bad=%v", c.approval, c.sandbox, s.Allows, err, c.want, c.bad)
		}
	}
}

func TestEffectiveAndPinnedPolicy(t *testing.T) {
	startup := Profile{Approval: false, Network: true, Write: true}
	current := Profile{Approval: true, Network: false, Write: true}
	eff := startup.And(current)
	if eff != (Profile{Write: true}) {
		t.Fatalf("effective = %+v", eff)
	}
	snap, _ := ParseSnapshot(json.RawMessage(`"on-request"`), json.RawMessage(`{"type":"workspaceWrite","writableRoots":["/w"]}`))
	a, s := PinnedPolicy(eff, snap)
	if string(a) != `"never"` || string(s) != `{"networkAccess":false,"type":"workspaceWrite","writableRoots":["/w"]}` {
		t.Fatalf("pinned %s %s", a, s)
	}
	a, s = PinnedPolicy(Profile{}, snap)
	if string(a) != `"never"` || string(s) != `{"networkAccess":false,"type":"readOnly"}` {
		t.Fatalf("strict pinned %s %s", a, s)
	}
	if got := startup.Changed(current); len(got) != 2 {
		t.Fatalf("changed %v", got)
	}
}

func FuzzParseSnapshot(f *testing.F) {
	f.Add([]byte(`"never"`), []byte(`{"type":"readOnly"}`))
	f.Add([]byte(`{"granular":{}}`), []byte(`{"type":"workspaceWrite","writableRoots":["/a"]}`))
	f.Fuzz(func(t *testing.T, a, s []byte) {
		snap, err := ParseSnapshot(a, s)
		if err == nil && !snap.Allows.Write && string(snap.Sandbox) != "" {
			var sb struct{ Type string }
			if json.Unmarshal(s, &sb) == nil && sb.Type != "readOnly" {
				t.Fatalf("non-readOnly sandbox %q classified write=false", s)
			}
		}
	})
}

// The workspace exclusions survive pinning (dropping them would widen the
// thread's write access), and a built-in active profile is sent by id only
// when it is exactly the effective cap.
func TestPinnedKeepsExclusionsAndProfileID(t *testing.T) {
	snap, err := ParseSnapshot(json.RawMessage(`"never"`),
		json.RawMessage(`{"type":"workspaceWrite","writableRoots":["/w"],"excludeSlashTmp":true,"excludeTmpdirEnvVar":true}`))
	if err != nil {
		t.Fatal(err)
	}
	_, s := PinnedPolicy(Profile{Write: true}, snap)
	if string(s) != `{"excludeSlashTmp":true,"excludeTmpdirEnvVar":true,"networkAccess":false,"type":"workspaceWrite","writableRoots":["/w"]}` {
		t.Fatalf("pinned sandbox %s", s)
	}
	snap.ActiveProfile = ":workspace"
	for _, c := range []struct {
		eff       Profile
		active    string
		supported bool
		want      string
	}{
		{Profile{Write: true}, ":workspace", true, ":workspace"},
		{Profile{}, ":workspace", true, ""},              // startup-tighter: legacy readOnly
		{Profile{Write: true}, ":workspace", false, ""},  // server without profiles
		{Profile{Write: true}, "team-profile", true, ""}, // user-defined: mutable
		{Profile{Write: true}, ":bogus", true, ""},
	} {
		snap.ActiveProfile = c.active
		if got := ProfileID(c.eff, snap, c.supported); got != c.want {
			t.Errorf("ProfileID(%+v, %s, %v) = %q, want %q", c.eff, c.active, c.supported, got, c.want)
		}
	}
}

func TestCheckActiveProfile(t *testing.T) {
	for _, c := range []struct {
		profile, sandbox string
		ok               bool
	}{
		{":workspace", `{"type":"workspaceWrite"}`, true},
		{":read-only", `{"type":"readOnly"}`, true},
		{":read-only", `{"type":"workspaceWrite"}`, false},
		{":danger-full-access", `{"type":"readOnly"}`, false},
		{"team", `{"type":"readOnly"}`, true}, // user-defined: legacy sandbox only, never sent by id
		{"", `{"type":"readOnly"}`, true},
	} {
		err := CheckActiveProfile(Snapshot{ActiveProfile: c.profile, Sandbox: json.RawMessage(c.sandbox)})
		if (err == nil) != c.ok {
			t.Errorf("%s with %s: %v", c.profile, c.sandbox, err)
		}
	}
}
