// Package config reads $CBTH_HOME/config.ini: the idle timeout, batch
// limits, windows, TTLs and the minimum delivery interval. Every window is
// a whole number of seconds so tests can exercise real expiry.
package config

import (
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

type durKey struct {
	section, key string
	dst          *time.Duration
	min          int64
}

type intKey struct {
	section, key string
	dst          *int64
	min, max     int64 // max 0: 1<<40
}

// Parse reads config.ini text. Unknown keys are EINVAL so a typo never
// silently keeps a default.
func Parse(data []byte) (Config, error) {
	if len(data) > MaxFile {
		return Config{}, abi.Errorf(abi.EINVAL, "config: %d bytes exceeds %d", len(data), MaxFile)
	}
	f, err := ini.LoadSources(ini.LoadOptions{Insensitive: false, AllowBooleanKeys: false}, data)
	if err != nil {
		return Config{}, abi.Errorf(abi.EINVAL, "config: %v", err)
	}
	c := Default()
	var jobs, attempts int64 = int64(c.MaxJobsPerBatch), int64(c.MaxDeliveryAttempts)
	durs := []durKey{
		{"daemon", "idle_timeout", &c.IdleTimeout, 1},
		{"daemon", "sweep_interval", &c.SweepInterval, 1},
		{"delivery", "max_wait_window", &c.MaxWaitWindow, 0},
		{"delivery", "redelivery_window", &c.RedeliveryWindow, 1},
		{"delivery", "cooldown_window", &c.CooldownWindow, 0},
		{"delivery", "min_delivery_interval", &c.MinDeliveryInterval, 0},
		{"delivery", "arm_pending_window", &c.ArmPendingWindow, 1},
		{"delivery", "max_turn_observation_window", &c.MaxTurnObservationWindow, 1},
		{"artifacts", "min_artifact_ttl", &c.MinArtifactTTL, 0},
		{"artifacts", "post_close_ttl", &c.PostCloseTTL, 0},
		{"desktop", "pause_not_before_delay", &c.Desktop.PauseNotBeforeDelay, 1},
		{"desktop", "pause_deadline_window", &c.Desktop.PauseDeadlineWindow, 1},
		{"desktop", "snapshot_reader_grace", &c.Desktop.SnapshotReaderGrace, 1},
		{"desktop", "artifact_recovery_lease_ttl", &c.Desktop.ArtifactRecoveryLeaseTTL, 1},
		{"desktop", "relay_marker_ttl", &c.Desktop.RelayMarkerTTL, 1},
		{"tasks", "spool_ttl", &c.TaskSpoolTTL, 0},
	}
	ints := []intKey{
		{"delivery", "max_jobs_per_batch", &jobs, 1, 0},
		{"delivery", "max_total_bytes", &c.MaxTotalBytes, 1, 0},
		{"delivery", "max_delivery_attempts", &attempts, 1, 0},
		{"delivery", "max_inline_artifact_bytes", &c.MaxInlineArtifactBytes, 0, 0},
		{"artifacts", "max_result_bytes", &c.MaxResultBytes, 1, 0},
		{"tasks", "spool_max_bytes", &c.TaskSpoolMaxBytes, 1, 0},
		{"tasks", "tail_bytes", &c.TaskTailBytes, 1, MaxTailBytes},
		{"tasks", "max_running", &c.TaskMaxRunning, 1, 4096},
		{"desktop", "max_boundary_recovery_inline_bytes", &c.Desktop.MaxBoundaryRecoveryInlineBytes, 0, 0},
	}
	known := map[string]bool{}
	for _, d := range durs {
		known[d.section+"."+d.key] = true
		n, ok, err := readInt(f, d.section, d.key, d.min, maxSeconds)
		if err != nil {
			return Config{}, err
		}
		if ok {
			*d.dst = time.Duration(n) * time.Second
		}
	}
	for _, k := range ints {
		known[k.section+"."+k.key] = true
		hi := k.max
		if hi == 0 {
			hi = 1 << 40
		}
		n, ok, err := readInt(f, k.section, k.key, k.min, hi)
		if err != nil {
			return Config{}, err
		}
		if ok {
			*k.dst = n
		}
	}
	known["desktop.codex_bin"] = true
	if s, err := f.GetSection("desktop"); err == nil && s.HasKey("codex_bin") {
		c.Desktop.CodexBin = s.Key("codex_bin").String()
		if c.Desktop.CodexBin == "" || c.Desktop.CodexBin[0] != '/' || strings.ContainsRune(c.Desktop.CodexBin, 0) {
			return Config{}, abi.Errorf(abi.EINVAL, "config: [desktop] codex_bin must be an absolute path, got %q", c.Desktop.CodexBin)
		}
	}
	for _, s := range f.Sections() {
		for _, k := range s.Keys() {
			if !known[s.Name()+"."+k.Name()] {
				return Config{}, abi.Errorf(abi.EINVAL, "config: unknown key %q in section [%s]", k.Name(), s.Name())
			}
		}
	}
	c.MaxJobsPerBatch, c.MaxDeliveryAttempts = int(jobs), int(attempts)
	if c.MaxTurnObservationWindow <= c.IdleTimeout {
		return Config{}, abi.Errorf(abi.EINVAL,
			"config: delivery.max_turn_observation_window (%v) must be greater than daemon.idle_timeout (%v)",
			c.MaxTurnObservationWindow, c.IdleTimeout)
	}
	return c, nil
}

const maxSeconds = 100 * 365 * 24 * 3600

func readInt(f *ini.File, section, key string, min, max int64) (int64, bool, error) {
	s, err := f.GetSection(section)
	if err != nil || !s.HasKey(key) {
		return 0, false, nil
	}
	n, err := s.Key(key).Int64()
	if err != nil {
		return 0, false, abi.Errorf(abi.EINVAL, "config: [%s] %s: want a whole number, got %q", section, key, s.Key(key).String())
	}
	if n < min || n > max {
		return 0, false, abi.Errorf(abi.EINVAL, "config: [%s] %s = %d is out of range [%d, %d]", section, key, n, min, max)
	}
	return n, true, nil
}
