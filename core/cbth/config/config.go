// Package config reads $CBTH_HOME/config.ini: the idle timeout, batch
// limits, windows, TTLs and the minimum delivery interval. Every window is
// a whole number of seconds so tests can exercise real expiry.
package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/ini.v1"

	"github.com/cortexfs/cortexfs/core/abi"
)

// MaxFile bounds config.ini; anything larger is EINVAL.
const MaxFile = 64 << 10

// MaxTailBytes bounds [tasks] tail_bytes: tails are kept in memory and
// returned whole by task inspect.
const MaxTailBytes = 1 << 20

// Config is the effective configuration.
type Config struct {
	IdleTimeout              time.Duration `json:"idle_timeout_seconds"`
	SweepInterval            time.Duration `json:"sweep_interval_seconds"`
	MaxJobsPerBatch          int           `json:"max_jobs_per_batch"`
	MaxTotalBytes            int64         `json:"max_total_bytes"`
	MaxWaitWindow            time.Duration `json:"max_wait_window_seconds"`
	MaxDeliveryAttempts      int           `json:"max_delivery_attempts"`
	RedeliveryWindow         time.Duration `json:"redelivery_window_seconds"`
	CooldownWindow           time.Duration `json:"cooldown_window_seconds"`
	MinDeliveryInterval      time.Duration `json:"min_delivery_interval_seconds"`
	ArmPendingWindow         time.Duration `json:"arm_pending_window_seconds"`
	MaxTurnObservationWindow time.Duration `json:"max_turn_observation_window_seconds"`
	MaxInlineArtifactBytes   int64         `json:"max_inline_artifact_bytes"`
	MinArtifactTTL           time.Duration `json:"min_artifact_ttl_seconds"`
	PostCloseTTL             time.Duration `json:"post_close_ttl_seconds"`
	MaxResultBytes           int64         `json:"max_result_bytes"`
	TaskSpoolMaxBytes        int64         `json:"task_spool_max_bytes"`
	TaskTailBytes            int64         `json:"task_tail_bytes"`
	TaskMaxRunning           int64         `json:"task_max_running"`
	TaskSpoolTTL             time.Duration `json:"task_spool_ttl_seconds"`
	Desktop                  Desktop       `json:"desktop"`
}

// Desktop is the [desktop] section: the caller-heartbeat pause window
// (the seed recommends pause_not_before >= last_delivery_attempt_at + 90s
// and pause_deadline >= pause_not_before + 90s under FREQ=MINUTELY),
// snapshot and lease lifetimes, and what the installation fingerprint
// observes.
type Desktop struct {
	PauseNotBeforeDelay            time.Duration `json:"pause_not_before_delay_seconds"`
	PauseDeadlineWindow            time.Duration `json:"pause_deadline_window_seconds"`
	SnapshotReaderGrace            time.Duration `json:"snapshot_reader_grace_seconds"`
	ArtifactRecoveryLeaseTTL       time.Duration `json:"artifact_recovery_lease_ttl_seconds"`
	RelayMarkerTTL                 time.Duration `json:"relay_marker_ttl_seconds"`
	MaxBoundaryRecoveryInlineBytes int64         `json:"max_boundary_recovery_inline_bytes"`
	// CodexBin is the Codex Desktop/helper binary whose build identity the
	// validation fingerprint covers; empty means "codex" on the daemon's PATH.
	CodexBin string `json:"codex_bin"`
}

// Default is the configuration when config.ini is absent or silent.
func Default() Config {
	return Config{
		IdleTimeout:              10 * time.Minute,
		SweepInterval:            time.Second,
		MaxJobsPerBatch:          8,
		MaxTotalBytes:            1 << 20,
		MaxWaitWindow:            2 * time.Second,
		MaxDeliveryAttempts:      3,
		RedeliveryWindow:         24 * time.Hour,
		CooldownWindow:           2 * time.Minute,
		MinDeliveryInterval:      30 * time.Second,
		ArmPendingWindow:         2 * time.Minute,
		MaxTurnObservationWindow: 15 * time.Minute,
		MaxInlineArtifactBytes:   64 << 10,
		MinArtifactTTL:           24 * time.Hour,
		PostCloseTTL:             72 * time.Hour,
		MaxResultBytes:           64 << 20,
		TaskSpoolMaxBytes:        8 << 20,
		TaskTailBytes:            4 << 10,
		TaskMaxRunning:           64,
		TaskSpoolTTL:             72 * time.Hour,
		Desktop: Desktop{
			PauseNotBeforeDelay:            90 * time.Second,
			PauseDeadlineWindow:            90 * time.Second,
			SnapshotReaderGrace:            5 * time.Minute,
			ArtifactRecoveryLeaseTTL:       10 * time.Minute,
			RelayMarkerTTL:                 10 * time.Minute,
			MaxBoundaryRecoveryInlineBytes: 64 << 10,
		},
	}
}

// Load reads path; a missing file yields Default.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Default(), nil
	}
	if err != nil {
		return Config{}, abi.Errorf(abi.CodeOf(err), "config: %v", err)
	}
	return Parse(data)
}

// Kind is how a key's value reads.
type Kind int

// The kinds of config.ini values.
const (
	Seconds Kind = iota // a whole number of seconds
	Integer             // a whole number (bytes, counts)
	Path                // an absolute path
)

// Key is one config.ini key: where it lives, what it means and its bounds.
// The one table below drives parsing, `cbth daemon config`, the sample
// written on first start and README.
type Key struct {
	Section, Name string
	Kind          Kind
	Min, Max      int64 // Max 0: no bound beyond the kind's
	Doc           string
	dst           func(c *Config) any // *time.Duration, *int64, *int or *string
}

// Keys lists every key config.ini may hold, in file order.
var Keys = []Key{
	{"daemon", "idle_timeout", Seconds, 1, 0, "the daemon exits after this long with no client and no active work",
		func(c *Config) any { return &c.IdleTimeout }},
	{"daemon", "sweep_interval", Seconds, 1, 0, "how often the overdue sweep runs (deadlines, auto-close, GC)",
		func(c *Config) any { return &c.SweepInterval }},
	{"delivery", "max_wait_window", Seconds, 0, 0, "a batch waits this long for more ready jobs of its thread before it is offered",
		func(c *Config) any { return &c.MaxWaitWindow }},
	{"delivery", "max_jobs_per_batch", Integer, 1, 0, "a batch is offered at once when it holds this many jobs",
		func(c *Config) any { return &c.MaxJobsPerBatch }},
	{"delivery", "max_total_bytes", Integer, 1, 0, "… or this many bytes of results",
		func(c *Config) any { return &c.MaxTotalBytes }},
	{"delivery", "max_delivery_attempts", Integer, 1, 0, "attempts per batch before it needs the operator",
		func(c *Config) any { return &c.MaxDeliveryAttempts }},
	{"delivery", "redelivery_window", Seconds, 1, 0, "a batch may be redelivered for this long after it was created",
		func(c *Config) any { return &c.RedeliveryWindow }},
	{"delivery", "cooldown_window", Seconds, 0, 0, "an accepted attempt cools down this long before the next one",
		func(c *Config) any { return &c.CooldownWindow }},
	{"delivery", "min_delivery_interval", Seconds, 0, 0, "at least this long between two deliveries to one thread",
		func(c *Config) any { return &c.MinDeliveryInterval }},
	{"delivery", "arm_pending_window", Seconds, 1, 0, "a bridge's arm lease (note-arm-pending) lasts this long",
		func(c *Config) any { return &c.ArmPendingWindow }},
	{"delivery", "max_turn_observation_window", Seconds, 1, 0, "a delivered turn must be seen to complete within this (> idle_timeout), else manual",
		func(c *Config) any { return &c.MaxTurnObservationWindow }},
	{"delivery", "max_inline_artifact_bytes", Integer, 0, 0, "results up to this size are inlined into the delivered message",
		func(c *Config) any { return &c.MaxInlineArtifactBytes }},
	{"artifacts", "min_artifact_ttl", Seconds, 0, 0, "an artifact is kept at least this long after it was created",
		func(c *Config) any { return &c.MinArtifactTTL }},
	{"artifacts", "post_close_ttl", Seconds, 0, 0, "… and this long after the last batch using it closed",
		func(c *Config) any { return &c.PostCloseTTL }},
	{"artifacts", "max_result_bytes", Integer, 1, 0, "largest --result-file accepted (EMSGSIZE beyond)",
		func(c *Config) any { return &c.MaxResultBytes }},
	{"tasks", "spool_max_bytes", Integer, 1, 0, "bytes of stdout (and of stderr) a task spools",
		func(c *Config) any { return &c.TaskSpoolMaxBytes }},
	{"tasks", "tail_bytes", Integer, 1, MaxTailBytes, "bytes of output tail kept for task inspect and the job result",
		func(c *Config) any { return &c.TaskTailBytes }},
	{"tasks", "max_running", Integer, 1, 4096, "concurrent tasks (EBUSY beyond)",
		func(c *Config) any { return &c.TaskMaxRunning }},
	{"tasks", "spool_ttl", Seconds, 0, 0, "spools of ended tasks are collected after this long",
		func(c *Config) any { return &c.TaskSpoolTTL }},
	{"desktop", "pause_not_before_delay", Seconds, 1, 0, "caller heartbeat pause not before last attempt + this (seed: >= 90)",
		func(c *Config) any { return &c.Desktop.PauseNotBeforeDelay }},
	{"desktop", "pause_deadline_window", Seconds, 1, 0, "pause deadline = pause_not_before + this (seed: >= 90)",
		func(c *Config) any { return &c.Desktop.PauseDeadlineWindow }},
	{"desktop", "snapshot_reader_grace", Seconds, 1, 0, "an old snapshot revision is removed this long after a newer one",
		func(c *Config) any { return &c.Desktop.SnapshotReaderGrace }},
	{"desktop", "artifact_recovery_lease_ttl", Seconds, 1, 0, "an artifact recovery lease lasts this long",
		func(c *Config) any { return &c.Desktop.ArtifactRecoveryLeaseTTL }},
	{"desktop", "relay_marker_ttl", Seconds, 1, 0, "a transcript relay marker is valid this long",
		func(c *Config) any { return &c.Desktop.RelayMarkerTTL }},
	{"desktop", "max_boundary_recovery_inline_bytes", Integer, 0, 0, "handoff payloads up to this size are kept inline, larger ones as an artifact",
		func(c *Config) any { return &c.Desktop.MaxBoundaryRecoveryInlineBytes }},
	{"desktop", "codex_bin", Path, 0, 0, "the codex binary the Desktop fingerprint covers (default: codex on the daemon's PATH)",
		func(c *Config) any { return &c.Desktop.CodexBin }},
}

// Value is a key's value in c as config.ini spells it ("" for an unset path).
func (k Key) Value(c Config) string {
	switch v := k.dst(&c).(type) {
	case *time.Duration:
		return fmt.Sprint(int64(*v / time.Second))
	case *int64:
		return fmt.Sprint(*v)
	case *int:
		return fmt.Sprint(*v)
	case *string:
		return *v
	}
	return ""
}

// Unit names the kind for humans.
func (k Key) Unit() string {
	switch k.Kind {
	case Seconds:
		return "seconds"
	case Path:
		return "absolute path"
	}
	return "integer"
}

// Parse reads config.ini text. Unknown keys and bad values are EINVAL
// with their line, so a typo never silently keeps a default.
func Parse(data []byte) (Config, error) {
	if len(data) > MaxFile {
		return Config{}, abi.Errorf(abi.EINVAL, "config: %d bytes exceeds %d", len(data), MaxFile)
	}
	f, err := ini.LoadSources(ini.LoadOptions{Insensitive: false, AllowBooleanKeys: false}, data)
	if err != nil {
		return Config{}, abi.Errorf(abi.EINVAL, "config: %v", err)
	}
	c := Default()
	known := map[string]bool{}
	var names []string
	for _, k := range Keys {
		known[k.Section+"."+k.Name] = true
		names = append(names, k.Name)
		if err := k.read(f, data, &c); err != nil {
			return Config{}, err
		}
	}
	for _, s := range f.Sections() {
		for _, k := range s.Keys() {
			if known[s.Name()+"."+k.Name()] {
				continue
			}
			msg := fmt.Sprintf("config.ini:%d: unknown key %q in [%s]", lineOf(data, s.Name(), k.Name()), k.Name(), s.Name())
			if m := suggest(s.Name(), k.Name()); m != "" {
				msg += " (did you mean " + m + "?)"
			}
			return Config{}, abi.Errorf(abi.EINVAL, "%s; the keys are listed by cbth daemon config", msg)
		}
	}
	if c.MaxTurnObservationWindow <= c.IdleTimeout {
		return Config{}, abi.Errorf(abi.EINVAL,
			"config: delivery.max_turn_observation_window (%v) must be greater than daemon.idle_timeout (%v)",
			c.MaxTurnObservationWindow, c.IdleTimeout)
	}
	return c, nil
}

// read sets k in c from f, if present.
func (k Key) read(f *ini.File, data []byte, c *Config) error {
	s, err := f.GetSection(k.Section)
	if err != nil || !s.HasKey(k.Name) {
		return nil
	}
	raw := s.Key(k.Name).String()
	bad := func(format string, args ...any) error {
		return abi.Errorf(abi.EINVAL, "config.ini:%d: [%s] %s: %s", lineOf(data, k.Section, k.Name), k.Section, k.Name,
			fmt.Sprintf(format, args...))
	}
	if k.Kind == Path {
		if raw == "" || raw[0] != '/' || strings.ContainsRune(raw, 0) {
			return bad("must be an absolute path, got %q", raw)
		}
		*k.dst(c).(*string) = raw
		return nil
	}
	hi := k.Max
	switch {
	case hi == 0 && k.Kind == Seconds:
		hi = maxSeconds
	case hi == 0:
		hi = 1 << 40
	}
	n, err := s.Key(k.Name).Int64()
	if err != nil {
		return bad("want a whole number (%s), got %q", k.Unit(), raw)
	}
	if n < k.Min || n > hi {
		return bad("%d is out of range [%d, %d]", n, k.Min, hi)
	}
	switch p := k.dst(c).(type) {
	case *time.Duration:
		*p = time.Duration(n) * time.Second
	case *int64:
		*p = n
	case *int:
		*p = int(n)
	}
	return nil
}

// lineOf finds the line of key in section (1-based; 0 when not found).
func lineOf(data []byte, section, key string) int {
	cur := ini.DefaultSection
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") {
			cur = strings.TrimSpace(l[1 : len(l)-1])
			continue
		}
		name, _, ok := strings.Cut(l, "=")
		if !ok {
			name, _, ok = strings.Cut(l, ":")
		}
		if ok && cur == section && strings.TrimSpace(name) == key {
			return i + 1
		}
	}
	return 0
}

// suggest names the known key a mistyped one most likely means.
func suggest(section, name string) string {
	best, bestD := "", 3
	for _, k := range Keys {
		if d := distance(name, k.Name); d < bestD || d == bestD && k.Section == section {
			if d < 3 {
				best, bestD = "["+k.Section+"] "+k.Name, d
			}
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

const maxSeconds = 100 * 365 * 24 * 3600
