package t

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The shipped binary is fully static: no ELF interpreter, no DT_NEEDED.
func TestBinaryIsStatic(t *testing.T) {
	f, err := elf.Open(binPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("binary has an ELF interpreter (PT_INTERP)")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("binary needs shared libraries (DT_NEEDED): %v", libs)
	}
	if _, err := exec.LookPath("file"); err != nil {
		t.Logf("file(1) not installed: skipping its cross-check (debug/elf checks above passed)")
		return
	}
	out, err := exec.Command("file", "-L", binPath).CombinedOutput()
	if err != nil {
		t.Fatalf("file: %v %s", err, out)
	}
	if !strings.Contains(string(out), "statically linked") {
		t.Errorf("file(1) does not say statically linked: %s", out)
	}
}

func listApplets(t *testing.T) []string {
	r := mustOK(t, sh(t, "cortexfs", "--list", "--json"))
	var names []string
	if err := fromEnvelope([]byte(r.stdout), &names); err != nil {
		t.Fatalf("--list --json is not {\"ok\":true,\"items\":[…]}: %v\n%s", err, r.stdout)
	}
	return names
}

func TestListAndVersion(t *testing.T) {
	names := listApplets(t)
	if !slices.Contains(names, "cortexfs") || !slices.IsSorted(names) {
		t.Errorf("--list --json = %v, want sorted and containing cortexfs", names)
	}
	plain := mustOK(t, sh(t, "cortexfs", "--list"))
	if got := strings.Fields(plain.stdout); !slices.Equal(got, names) {
		t.Errorf("--list lines %v differ from --json %v", got, names)
	}
	v := mustOK(t, sh(t, "cortexfs", "--version"))
	if !strings.HasPrefix(v.stdout, "cortexfs ") || len(strings.TrimSpace(v.stdout)) <= len("cortexfs ") {
		t.Errorf("--version printed %q", v.stdout)
	}
	var vj map[string]any
	if err := json.Unmarshal([]byte(mustOK(t, sh(t, "cortexfs", "--version", "--json")).stdout), &vj); err != nil || vj["version"] == "" {
		t.Errorf("--version --json: %v %v", vj, err)
	}
	if r := sh(t, "cortexfs", "--help"); r.code != 0 || !strings.Contains(r.stdout, "usage:") {
		t.Errorf("--help:\n%s", r)
	}
}

func TestDispatchUnknownApplet(t *testing.T) {
	// Bare, the multiplexer says what it is and holds (issue 16: every
	// command group lists its commands and exits 0).
	if r := sh(t, "cortexfs"); r.code != 0 || !strings.HasPrefix(r.stdout, "usage:") || r.stderr != "" {
		t.Errorf("cortexfs: want usage on stdout and exit 0, got:\n%s", r)
	}
	if r := sh(t, "cortexfs", "no-such-applet"); r.code != 2 || !strings.Contains(r.stderr, "see cortexfs --help") || r.stdout != "" {
		t.Errorf("cortexfs no-such-applet: want exit 2 and a hint on stderr only, got:\n%s", r)
	}
	if r := sh(t, "cortexfs", "--bogus"); r.code != 2 || !strings.Contains(r.stderr, "--help") || r.stdout != "" {
		t.Errorf("cortexfs --bogus: want exit 2 and a hint on stderr only, got:\n%s", r)
	}
	// A copy under a name that is no applet falls back to argv[1].
	odd := filepath.Join(t.TempDir(), "cortexfs-renamed")
	if err := os.Link(binPath, odd); err != nil {
		copyFile(t, binPath, odd)
	}
	mustOK(t, run(t, runOpts{}, odd, "--version"))
	if r := run(t, runOpts{}, odd, "nope"); r.code != 2 {
		t.Errorf("renamed binary with unknown applet: %s", r)
	}
	// A JSON error names a stable code.
	r := sh(t, "cortexfs", "--list", "--version", "--json")
	var body struct {
		OK    bool
		Error struct{ Code, Message string }
	}
	if r.code != 2 || json.Unmarshal([]byte(r.stdout), &body) != nil || body.OK || body.Error.Code != "EINVAL" {
		t.Errorf("conflicting flags with --json: want EINVAL object and exit 2, got:\n%s", r)
	}
}

func inodeOf(t *testing.T, p string) (uint64, uint64) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() {
		t.Fatalf("%s is not a regular file", p)
	}
	return st.Ino, uint64(st.Nlink)
}

// checkLinked asserts dir holds the binary once and every applet name (plus
// the object runner) as a hardlink of it.
func checkLinked(t *testing.T, dir string, names []string) {
	t.Helper()
	want := append(slices.Clone(names), "cortexfs-object-runner")
	ino, nlink := inodeOf(t, filepath.Join(dir, "cortexfs"))
	for _, n := range want {
		if got, _ := inodeOf(t, filepath.Join(dir, n)); got != ino {
			t.Errorf("%s is not a hardlink of cortexfs", n)
		}
	}
	if int(nlink) != len(slices.Compact(slices.Sorted(slices.Values(want)))) {
		t.Errorf("cortexfs has %d links, want %d", nlink, len(want))
	}
}

func TestInstallHardlinksIdempotentAndSafe(t *testing.T) {
	names := listApplets(t)
	dir := filepath.Join(t.TempDir(), "bin")
	first := mustOK(t, run(t, runOpts{}, applet("cortexfs"), "install", "--json", dir))
	checkLinked(t, dir, names)
	if !strings.Contains(first.stdout, `"created"`) {
		t.Errorf("first install reported no creations: %s", first.stdout)
	}
	second := mustOK(t, run(t, runOpts{}, applet("cortexfs"), "install", "--json", dir))
	if strings.Contains(second.stdout, `"created"`) || strings.Contains(second.stdout, `"replaced"`) {
		t.Errorf("second install changed something: %s", second.stdout)
	}
	checkLinked(t, dir, names)

	// A foreign file in the way: refused without --force, and nothing moves.
	victim := filepath.Join(dir, "cortexfs-object-runner")
	os.Remove(victim)
	if err := os.WriteFile(victim, []byte("#!/bin/sh\necho mine\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, runOpts{}, applet("cortexfs"), "install", "--json", dir)
	if r.code == 0 || !strings.Contains(r.stdout, `"EEXIST"`) {
		t.Fatalf("install over a foreign file: want EEXIST, got:\n%s", r)
	}
	if b, _ := os.ReadFile(victim); string(b) != "#!/bin/sh\necho mine\n" {
		t.Fatalf("refused install still changed the foreign file")
	}
	mustOK(t, run(t, runOpts{}, applet("cortexfs"), "install", "--force", dir))
	checkLinked(t, dir, names)
	// Each hardlink dispatches as its own applet name.
	mustOK(t, run(t, runOpts{}, filepath.Join(dir, "cortexfs"), "--version"))
}

// `make install PREFIX=…` leaves one binary and hardlinks of it.
func TestMakeInstall(t *testing.T) {
	if os.Getenv("CORTEXFS_BIN") != "" && filepath.Dir(binPath) != filepath.Join(repoRoot, "build") {
		t.Skip("CORTEXFS_BIN points outside the checkout's build dir; make install would build another binary")
	}
	pfx := t.TempDir()
	r := run(t, runOpts{dir: repoRoot}, "make", "-s", "install", "PREFIX="+pfx)
	mustOK(t, r)
	entries, err := os.ReadDir(filepath.Join(pfx, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("make install created nothing")
	}
	checkLinked(t, filepath.Join(pfx, "bin"), listApplets(t))
}

func copyFile(t *testing.T, src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
