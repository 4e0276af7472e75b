package agent

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/tree"
)

// A provider-encoded name of a tool that was not offered decodes to the
// one tool it stands for; an exact tool name, an ambiguous encoding or an
// unknown name stays as it is.
func TestDecodeToolName(t *testing.T) {
	a, r := newAgent(t, "fs.read")
	offered := map[string]bool{"fs.read": true}
	for in, want := range map[string]string{
		"fs.read":    "fs.read",
		"shell_exec": "shell.exec", // on CTX_PATH, not allowed
		"agent_stop": "agent.stop",
		"net_fetch":  "net_fetch", // no such tool
		"":           "",
	} {
		if got := a.DecodeToolName(in, offered); got != want {
			t.Errorf("DecodeToolName(%q) = %q, want %q", in, got, want)
		}
	}
	// A policy-only name (not on CTX_PATH) is known too.
	os.WriteFile(a.Ctl("policy"), []byte("allow coder_t tool:net.fetch execute\nallow coder_t model:debug/echo use\n"), 0o644)
	a2, err := Open(a.Object.Path)
	if err != nil {
		t.Fatal(err)
	}
	if got := a2.DecodeToolName("net_fetch", nil); got != "net.fetch" {
		t.Errorf("policy-known name: %q", got)
	}
	// Two tools with the same encoding: ambiguous, kept.
	home := filepath.Join(r.Home(os.Getuid()), tree.ToolDir)
	os.WriteFile(filepath.Join(home, "shell+exec"), []byte("#!/bin/sh\n"), 0o755)
	if got := a.DecodeToolName("shell_exec", offered); got != "shell_exec" {
		t.Errorf("ambiguous encoding decoded to %q", got)
	}
	// A tool really called by the encoded name wins over decoding.
	os.Remove(filepath.Join(home, "shell+exec"))
	os.WriteFile(filepath.Join(home, "shell_exec"), []byte("#!/bin/sh\n"), 0o755)
	if got := a.DecodeToolName("shell_exec", offered); got != "shell_exec" {
		t.Errorf("exact tool name decoded to %q", got)
	}
}

// A call for a tool that was not offered is EACCES, whatever the reason.
func TestRefuseUnoffered(t *testing.T) {
	a, _ := newAgent(t, "fs.read")
	for _, n := range []string{"shell.exec", "net.fetch", "../x", "fs.read"} {
		if err := a.refuseUnoffered(n); abi.CodeOf(err) != abi.EACCES {
			t.Errorf("refuseUnoffered(%q) = %v, want EACCES", n, err)
		}
	}
}

// The shared space's mode bits apply to the agent's uid/gid/groups.
func TestSharedAccessModeBits(t *testing.T) {
	a, r := newAgent(t)
	space := r.Path(tree.SharedDir, "proj")
	if err := os.MkdirAll(space, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(a.Ctl("policy"), []byte("allow coder_t shared:proj write\nallow coder_t model:debug/echo use\n"), 0o644)
	a, _ = Open(a.Object.Path)
	dir := a.SessionDir(os.Getuid(), "proj", "s")
	fi, err := os.Stat(space)
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := int(fi.Sys().(*syscall.Stat_t).Uid), int(fi.Sys().(*syscall.Stat_t).Gid)
	a.UID, a.GID = uid+4242, gid+4242 // a stranger to the space
	if err := a.sharedAccess(space, dir); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("stranger, 0755: %v, want EACCES", err)
	}
	a.Groups = []int{gid} // group member, group has r-x only
	if err := a.sharedAccess(space, dir); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("group member, 0755: %v, want EACCES", err)
	}
	os.Chmod(space, 0o775)
	if err := a.sharedAccess(space, dir); err != nil {
		t.Errorf("group member, 0775: %v", err)
	}
	a.Groups = nil
	a.UID = uid // the space's owner
	if err := a.sharedAccess(space, dir); err != nil {
		t.Errorf("owner: %v", err)
	}
}
