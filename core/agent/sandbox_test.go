package agent

import (
	"os"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/policy"
)

// PlanSandbox refuses, with stable codes and the .d/mount line, what a
// launcher could not build, and names the tree below /ctx inside.
func TestPlanSandboxRefusals(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(a *Agent)
		euid  int
		code  abi.Code
		words []string
	}{
		{"iso=uid without root", func(a *Agent) { a.Iso = IsoUID }, 1000, abi.EPERM, []string{"iso=uid", "root"}},
		{"unknown profile", func(a *Agent) { a.Iso = "vm" }, 0, abi.EINVAL, []string{"iso"}},
		{"no root", func(a *Agent) { a.RootDir = "" }, 0, abi.EINVAL, []string{".d/root"}},
		{"root missing", func(a *Agent) { a.RootDir = "/nonexistent/root" }, 0, abi.ENOENT, []string{".d/root", "/nonexistent/root"}},
		{"source missing", func(a *Agent) {
			a.Mounts = append(a.Mounts, policy.Mount{Source: "/nonexistent/src", Target: "/x", Mode: "ro", Line: 7})
		}, 0, abi.ENOENT, []string{"line 7", "/nonexistent/src"}},
		{"over /proc", func(a *Agent) {
			a.Mounts = append(a.Mounts, policy.Mount{Source: "/", Target: "/proc/sys", Mode: "ro", Line: 4})
		}, 0, abi.EINVAL, []string{"line 4", "/proc"}},
		{"relative cwd", func(a *Agent) { a.Cwd = "work" }, 0, abi.EINVAL, []string{"cwd"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, _ := newAgent(t, "fs.read")
			c.edit(a)
			_, err := a.PlanSandbox(c.euid, c.euid)
			if abi.CodeOf(err) != c.code {
				t.Fatalf("PlanSandbox = %v, want %s", err, c.code)
			}
			for _, w := range c.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// The plan of a default agent: the sandbox's own /proc, /dev and /tmp,
// then .d/mount in order; no network without the policy line; CTX_PATH
// below /ctx; iso=uid switches to the agent's identity; root refuses
// control files another user could change.
func TestPlanSandboxShape(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): plans for a root launcher need root to own the files")
	}
	a, r := newAgent(t, "fs.read")
	sb, err := a.PlanSandbox(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range sb.Mounts {
		kinds = append(kinds, m.Kind+":"+m.Target)
	}
	want := "proc:/proc dev:/dev tmpfs:/tmp bind:/ctx bind:/home/agent"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("mounts %q, want %q", got, want)
	}
	if sb.Network || sb.UserNS || sb.Profile != IsoShared {
		t.Errorf("network %v userns %v profile %s", sb.Network, sb.UserNS, sb.Profile)
	}
	if got := strings.Join(sb.CtxPath, ":"); got != "/ctx/tool:/ctx/home/0/tool" {
		t.Errorf("CTX_PATH %q", got)
	}
	// An agent made before the sandbox had its root's host path as cwd:
	// that is the sandbox's root.
	a.Cwd = a.RootDir
	if sb, err := a.PlanSandbox(0, 0); err != nil || sb.Cwd != "/" || a.runtimeConfig(sb).Cwd != "/" {
		t.Errorf("cwd = .d/root: plan %+v %v", sb, err)
	}
	a.Cwd = "/"
	if env := strings.Join(a.insideAgent(sb).Environ(), "\n"); !strings.Contains(env, "CTX_ROOT=/ctx\n") ||
		!strings.Contains(env, "HOME=/ctx/home/0/agent/coder") || strings.Contains(env, string(r)) {
		t.Errorf("inside environment names the host tree or misses the seed's values:\n%s", env)
	}
	p, err := policy.New(append(a.Policy.Rules, policy.Rule{Subject: a.Type, Class: policy.ClassNetwork, Object: "default", Perm: "connect"})...)
	if err != nil {
		t.Fatal(err)
	}
	a.Policy = p
	a.Iso, a.UID, a.GID, a.Groups = IsoUID, 4242, 4243, []int{27}
	if sb, err = a.PlanSandbox(0, 0); err != nil || !sb.Network || sb.UID != 4242 || sb.HostUID != 4242 || sb.spec.Switch == nil || sb.spec.Resolve == nil {
		t.Errorf("iso=uid plan: %+v %v", sb, err)
	}
	if err := os.Chown(a.Ctl("mount"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PlanSandbox(0, 0); abi.CodeOf(err) != abi.EACCES || !strings.Contains(err.Error(), "mount") {
		t.Errorf("a mount file another user owns, for root: %v, want EACCES", err)
	}

}
