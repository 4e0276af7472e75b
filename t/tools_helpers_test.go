package t

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// everythingBin is the pinned @modelcontextprotocol/server-everything
// (t/npm, installed by make peers).
func everythingBin(t testing.TB) string {
	t.Helper()
	p := filepath.Join(codexBinDir(t), "mcp-server-everything")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the real MCP server is required (make peers): %v", err)
	}
	return p
}

// transcriptServer writes a wrapper that records every byte the server
// receives on stdin into transcript, then runs it: how a test proves what
// the server saw (and did not see).
func transcriptServer(t *testing.T, server string, args ...string) (wrapper, transcript string) {
	t.Helper()
	// Outside t.TempDir (0700): servers of another user's tier must reach it.
	dir, err := os.MkdirTemp("", "mcp-wrapper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	transcript = filepath.Join(dir, "transcript")
	wrapper = filepath.Join(dir, "server.sh")
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	cmd := q(server)
	for _, a := range args {
		cmd += " " + q(a)
	}
	script := "#!/bin/sh\nexec 3>>" + q(transcript) + "\ntee /dev/fd/3 | " + cmd + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, transcript
}

func readTranscript(t *testing.T, p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// countCalls counts the tools/call requests for tool in a transcript.
func countCalls(transcript, tool string) int {
	n := 0
	for _, l := range strings.Split(transcript, "\n") {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "tools/call" && m.Params.Name == tool {
			n++
		}
	}
	return n
}

// toolDaemon starts cortexfsd over root with extra environment (a provider
// key that must never reach a source) and waits for its tool socket.
func toolDaemon(t *testing.T, root string, env ...string) *daemon {
	t.Helper()
	d := &daemon{root: root, sock: filepath.Join(root, ".tools.sock")}
	d.cmd = exec.Command(applet("cortexfsd"), "--root", root)
	d.cmd.Env = append(os.Environ(), env...)
	log := &lockedBuffer{}
	d.cmd.Stderr = log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("cortexfsd log:\n%s", log.String())
		}
	})
	waitLong(t, "cortexfsd to serve "+d.sock, func() bool {
		c, err := net.Dial("unix", d.sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	daemonLogs.Store(d, log)
	return d
}

var daemonLogs sync.Map

func daemonLog(d *daemon) string {
	if v, ok := daemonLogs.Load(d); ok {
		return v.(*lockedBuffer).String()
	}
	return ""
}

// waitLong polls cond with a generous deadline (servers start from npm on
// a shared machine).
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// srcReport is one source in ctx tool sources --json.
type srcReport struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Error    string `json:"error"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"`
	Tools    []struct {
		Name, Original, Status, Clash string
	} `json:"tools"`
}

// sourcesReport is ctx tool sources --json (its items: one per tier).
type sourcesReport struct {
	Tiers []struct {
		Tier     string      `json:"tier"`
		Served   bool        `json:"served"`
		Problems []string    `json:"problems"`
		Sources  []srcReport `json:"sources"`
	} `json:"tiers"`
}

func toolSources(t *testing.T, root string) sourcesReport {
	t.Helper()
	r := mustOK(t, sh(t, "ctx", "tool", "sources", "--root", root, "--json"))
	var rep sourcesReport
	if err := fromEnvelope([]byte(r.stdout), &rep.Tiers); err != nil {
		t.Fatalf("ctx tool sources --json: %v\n%s", err, r.stdout)
	}
	return rep
}

// findSrc finds a source of a tier by name.
func findSrc(rep sourcesReport, tier, name string) *srcReport {
	for i := range rep.Tiers {
		if rep.Tiers[i].Tier != tier {
			continue
		}
		for j := range rep.Tiers[i].Sources {
			if rep.Tiers[i].Sources[j].Name == name {
				return &rep.Tiers[i].Sources[j]
			}
		}
	}
	return nil
}

// waitSource waits until the system tier's source name is in state.
func waitSource(t *testing.T, root, name, state string) *srcReport {
	t.Helper()
	var s *srcReport
	waitLong(t, fmt.Sprintf("source %s to be %s", name, state), func() bool {
		s = findSrc(toolSources(t, root), "system", name)
		return s != nil && s.State == state
	})
	return s
}

// toolResult runs a tool object and returns its frames' tool message text
// and error code.
func toolResult(t *testing.T, r result) (text, code string) {
	t.Helper()
	for _, f := range parseAgentFrames(t, r.stdout) {
		switch {
		case f.Type == "message" && f.Role == "tool":
			text += f.text()
		case f.Type == "error":
			code = f.Code
		}
	}
	return text, code
}

// pidUID is the real uid of a process.
func pidUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Uid:") {
			f := strings.Fields(l)
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}

func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

var fixtureOnce sync.Once
var fixturePath string
var fixtureErr error

// mcpFixture builds t/mcpfixture (an MCP server on the official Go SDK that
// pages its tools and can add one: what the npm server cannot show).
func mcpFixture(t testing.TB) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpfixture-")
		if err != nil {
			fixtureErr = err
			return
		}
		os.Chmod(dir, 0o755)
		fixturePath = filepath.Join(dir, "mcpfixture")
		cmd := exec.Command("go", "build", "-o", fixturePath, "./t/mcpfixture")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			fixtureErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if fixtureErr != nil {
		t.Fatalf("build t/mcpfixture: %v", fixtureErr)
	}
	return fixturePath
}
