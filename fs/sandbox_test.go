package fs

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/cortexfs/ns"
)

// The test binary is also the sandbox's init and its payload, as in ns.
const payloadName = "fstest-payload"

func TestMain(m *testing.M) {
	switch {
	case ns.IsInit(os.Args):
		ns.Init()
	case len(os.Args) > 1 && filepath.Base(os.Args[0]) == payloadName:
		os.Exit(payload(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// payload runs inside a sandbox: "ls DIR" prints the names, "connect
// PATH" pings a socket, "write PATH" tries a write.
func payload(args []string) int {
	switch args[0] {
	case "ls":
		es, err := os.ReadDir(args[1])
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		fmt.Println(strings.Join(names, " "))
	case "connect":
		c, err := net.Dial("unix", args[1])
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		c.Close()
		fmt.Println("connected")
	case "write":
		fmt.Println(os.WriteFile(args[1], []byte("x"), 0o644))
	}
	return 0
}

// The launcher's way: the agent's view is mounted on the host and bound at
// /ctx in the sandbox's mount namespace; inside, running as the agent, `ls
// /ctx/tool` is the list of tools the agent may run, a socket entry leads
// to its socket through the directory bound at SockDir, and a write is
// EROFS.
func TestViewInSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): a sandbox with the agent's uid needs root; CI is root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("SKIP (loud): no /dev/fuse")
	}
	f := newViewFixture(t)
	// A socket the view shows: the model's, served by a listener here.
	sock := filepath.Join(f.root, "model", "debug", "echo.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o666)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	os.Chmod(f.root, 0o755) // the bind of the tree for sockets resolves as the agent
	for d := filepath.Dir(f.root); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	const sockDir = "/run/ctx-sock"
	v, err := MountView(Options{Source: f.root, Agent: filepath.Join(f.root, "agent", "coder"), SockDir: sockDir})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	rootfs, err := os.MkdirTemp("", "cortexfs-fs-rootfs-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(rootfs)
	os.Chmod(rootfs, 0o755)
	for _, d := range []string{"/proc", SandboxTarget, sockDir + "/model"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	agentID := &ns.Identity{UID: agentUID, GID: agentUID}
	run := func(args ...string) string {
		t.Helper()
		spec := &ns.Spec{
			Root: ns.Mount{Kind: ns.KindBind, Source: rootfs, NoSuid: true, NoDev: true},
			Mounts: []ns.Mount{
				{Kind: ns.KindProc, Target: "/proc"}, // the payload is executed through /proc/self/fd
				{Kind: ns.KindBind, Source: v.Dir, Target: SandboxTarget, ReadOnly: true, NoSuid: true, NoDev: true},
				{Kind: ns.KindBind, Source: filepath.Join(f.root, "model"), Target: sockDir + "/model", ReadOnly: true, NoSuid: true, NoDev: true, NoExec: true},
			},
			Switch: agentID, Resolve: agentID,
			Argv: append([]string{payloadName}, args...),
		}
		var out bytes.Buffer
		p, err := ns.Start(spec, ns.Options{Stdout: &out, Stderr: os.Stderr})
		if err != nil {
			t.Fatalf("sandbox: %v", err)
		}
		if code := p.Wait(); code != 0 {
			t.Fatalf("%v inside the sandbox: exit %d\n%s", args, code, out.String())
		}
		return strings.TrimSpace(out.String())
	}
	if got, want := run("ls", "/ctx/tool"), "dup dup.d first first.d mine mine.d"; got != want {
		t.Errorf("ls /ctx/tool inside the sandbox = %q, want %q", got, want)
	}
	if got := run("connect", "/ctx/model/debug/echo.sock"); got != "connected" {
		t.Errorf("connect through the view's socket entry: %s", got)
	}
	if got := run("write", "/ctx/tool/mine.d/status"); !strings.Contains(got, "read-only file system") {
		t.Errorf("write inside the sandbox: %s, want EROFS", got)
	}
}
