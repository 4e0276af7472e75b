package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestDefaultsWhenMissing(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "config.ini"))
	if err != nil {
		t.Fatal(err)
	}
	if c.IdleTimeout != 10*time.Minute || c.MinArtifactTTL != 24*time.Hour || c.PostCloseTTL != 72*time.Hour {
		t.Errorf("defaults = %+v", c)
	}
}

func TestParseSeconds(t *testing.T) {
	c, err := Parse([]byte(`
[daemon]
idle_timeout = 3
[delivery]
max_wait_window = 0
redelivery_window = 2
max_jobs_per_batch = 2
max_total_bytes = 100
min_delivery_interval = 1
max_turn_observation_window = 5
[artifacts]
min_artifact_ttl = 1
post_close_ttl = 1
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.IdleTimeout != 3*time.Second || c.MaxWaitWindow != 0 || c.RedeliveryWindow != 2*time.Second ||
		c.MaxJobsPerBatch != 2 || c.MaxTotalBytes != 100 || c.MinArtifactTTL != time.Second {
		t.Errorf("parsed = %+v", c)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"[daemon]\nidle_timeout = ten\n",
		"[daemon]\nidle_timout = 10\n",
		"[delivery]\nmax_jobs_per_batch = 0\n",
		"[delivery]\nredelivery_window = -1\n",
		"[daemon]\nidle_timeout = 99999999999999\n",
		"[daemon]\nidle_timeout = 1000\n", // > default observation window
		"unknown_top = 1\n",
	} {
		if _, err := Parse([]byte(in)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("Parse(%q) = %v, want EINVAL", in, err)
		}
	}
}

func TestLoadUnreadable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.ini")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil {
		t.Error("Load of a directory succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("[daemon]\nidle_timeout = 3\n"))
	f.Add([]byte("[delivery]\nmax_total_bytes=1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if abi.CodeOf(err) != abi.EINVAL {
				t.Fatalf("non-EINVAL error %v", err)
			}
			return
		}
		if c.MaxJobsPerBatch < 1 || c.MaxTotalBytes < 1 || c.IdleTimeout <= 0 || c.MaxTurnObservationWindow <= c.IdleTimeout {
			t.Fatalf("accepted an invalid config %+v", c)
		}
	})
}

func TestParseDesktop(t *testing.T) {
	c, err := Parse([]byte("[desktop]\npause_not_before_delay = 2\npause_deadline_window = 3\ncodex_bin = /opt/codex\n" +
		"max_boundary_recovery_inline_bytes = 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Desktop
	if d.PauseNotBeforeDelay != 2*time.Second || d.PauseDeadlineWindow != 3*time.Second || d.CodexBin != "/opt/codex" ||
		d.MaxBoundaryRecoveryInlineBytes != 0 || d.SnapshotReaderGrace != Default().Desktop.SnapshotReaderGrace {
		t.Errorf("desktop = %+v", d)
	}
	// The defaults are the seed's recommended pause window.
	if def := Default().Desktop; def.PauseNotBeforeDelay != 90*time.Second || def.PauseDeadlineWindow != 90*time.Second {
		t.Errorf("default pause window %+v", def)
	}
	for _, in := range []string{"[desktop]\ncodex_bin = relative/codex\n", "[desktop]\npause_deadline_window = 0\n",
		"[desktop]\ncodex_path = /x\n"} {
		if _, err := Parse([]byte(in)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("Parse(%q) = %v, want EINVAL", in, err)
		}
	}
}

// Task settings are bounded: a tail is kept in memory and returned whole,
// so tail_bytes up to 2^40 must not be accepted.
func TestTaskBounds(t *testing.T) {
	for _, in := range []string{"[tasks]\ntail_bytes = 1099511627776\n", "[tasks]\ntail_bytes = 1048577\n",
		"[tasks]\nmax_running = 0\n", "[tasks]\nspool_ttl = -1\n", "[artifacts]\nmax_result_bytes = 0\n"} {
		if _, err := Parse([]byte(in)); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("Parse(%q) = %v, want EINVAL", in, err)
		}
	}
	c, err := Parse([]byte("[tasks]\ntail_bytes = 1048576\nmax_running = 3\nspool_ttl = 60\n[artifacts]\nmax_result_bytes = 10\n"))
	if err != nil || c.TaskTailBytes != 1<<20 || c.TaskMaxRunning != 3 || c.TaskSpoolTTL != time.Minute || c.MaxResultBytes != 10 {
		t.Fatalf("task settings %+v %v", c, err)
	}
}

func TestErrorsNameTheLine(t *testing.T) {
	for in, want := range map[string]string{
		"[daemon]\n\nidle_timout = 10\n":         "config.ini:3: unknown key \"idle_timout\" in [daemon] (did you mean [daemon] idle_timeout?)",
		"# c\n[tasks]\nmax_running = 99999\n":    "config.ini:3: [tasks] max_running: 99999 is out of range [1, 4096]",
		"[delivery]\ncooldown_window = 2m\n":     "config.ini:2: [delivery] cooldown_window: want a whole number (seconds), got \"2m\"",
		"[desktop]\ncodex_bin = codex\n":         "config.ini:2: [desktop] codex_bin: must be an absolute path, got \"codex\"",
		"[daemon]\nidle_timeout = 5\n[x]\ny=1\n": "config.ini:4: unknown key \"y\" in [x]",
	} {
		_, err := Parse([]byte(in))
		if abi.CodeOf(err) != abi.EINVAL || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q…", in, err, want)
		}
	}
}

// The sample the daemon writes on first start changes nothing and names
// every key.
func TestSampleIsTheDefaults(t *testing.T) {
	c, err := Parse(Sample())
	if err != nil || !reflect.DeepEqual(c, Default()) {
		t.Fatalf("Parse(Sample()) = %+v, %v", c, err)
	}
	for _, k := range Keys {
		if !strings.Contains(string(Sample()), "# "+k.Name+" = ") {
			t.Errorf("sample lacks %s", k.Name)
		}
		uncommented := strings.Replace(string(Sample()), "# "+k.Name+" = ", k.Name+" = ", 1)
		if k.Kind == Path {
			uncommented = strings.Replace(string(Sample()), "# "+k.Name+" = ", k.Name+" = /usr/bin/codex", 1)
		}
		if _, err := Parse([]byte(uncommented)); err != nil {
			t.Errorf("uncommenting %s: %v", k.Name, err)
		}
	}
	p := filepath.Join(t.TempDir(), "config.ini")
	if err := WriteSample(p); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte("[daemon]\nidle_timeout = 7\n"), 0o600)
	if err := WriteSample(p); err != nil {
		t.Fatal(err)
	}
	if c, _ := Load(p); c.IdleTimeout != 7*time.Second {
		t.Error("WriteSample replaced the user's file")
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// README's table of config.ini keys stays complete.
func TestREADMEListsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Skipf("README not found: %v", err)
	}
	for _, k := range Keys {
		if !strings.Contains(string(b), "| `["+k.Section+"]` | `"+k.Name+"` |") {
			t.Errorf("README's config.ini table lacks [%s] %s", k.Section, k.Name)
		}
	}
}
