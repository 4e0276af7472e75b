package store

// migrations are applied in order; migrations[i] moves the schema from
// version i to i+1. A released migration is never edited, only appended.
var migrations = []string{
	// 1: the whole v1 schema.
	`
CREATE TABLE jobs (
  job_id TEXT PRIMARY KEY,
  target_kind TEXT NOT NULL CHECK (target_kind IN ('cli','desktop')),
  source_thread_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running','ready','failed','cancelled')),
  task_kind TEXT NOT NULL,
  task_summary TEXT NOT NULL,
  metadata_ref TEXT,
  metadata_json TEXT,
  artifact_id TEXT,
  result_summary TEXT,
  failure_reason TEXT,
  dedupe_key TEXT UNIQUE,
  delivery_read_only INTEGER NOT NULL,
  delivery_requires_approval INTEGER NOT NULL,
  delivery_requires_network INTEGER NOT NULL,
  delivery_requires_write_access INTEGER NOT NULL,
  delivery_policy_sources TEXT NOT NULL,
  task_id TEXT,
  created_at TEXT NOT NULL,
  ready_at TEXT,
  updated_at TEXT NOT NULL,
  completed_at TEXT
);
CREATE INDEX jobs_by_thread ON jobs(source_thread_id, status);
CREATE INDEX jobs_by_status ON jobs(status);

CREATE TABLE artifacts (
  artifact_id TEXT PRIMARY KEY,
  source_job_id TEXT NOT NULL REFERENCES jobs(job_id),
  managed_path TEXT NOT NULL,
  manifest_path TEXT NOT NULL,
  content_type TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  created_at TEXT NOT NULL,
  min_retention_until TEXT NOT NULL,
  last_batch_closed_at TEXT,
  operator_pin_until TEXT,
  gc_eligible_at TEXT,
  retention_until TEXT,
  gc_at TEXT
);

CREATE TABLE batches (
  batch_id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL,
  source_thread_id TEXT NOT NULL,
  target_kind TEXT NOT NULL CHECK (target_kind IN ('cli','desktop')),
  state TEXT NOT NULL CHECK (state IN ('queued','materialized','cooldown','closed')),
  summary TEXT,
  job_count INTEGER NOT NULL DEFAULT 0,
  total_bytes INTEGER NOT NULL DEFAULT 0,
  first_ready_at TEXT NOT NULL,
  last_ready_at TEXT NOT NULL,
  materialized_at TEXT,
  last_delivery_attempt_at TEXT,
  next_delivery_not_before TEXT,
  eligible_after TEXT,
  redelivery_window_ends_at TEXT,
  max_delivery_attempts INTEGER NOT NULL,
  delivery_attempt_count INTEGER NOT NULL DEFAULT 0,
  head_attempt_id TEXT,
  generation INTEGER NOT NULL DEFAULT 0,
  snapshot_revision TEXT,
  continuation_boundary_state TEXT NOT NULL DEFAULT 'not_crossed'
    CHECK (continuation_boundary_state IN ('not_crossed','crossed_unacknowledged','acknowledged')),
  continuation_boundary_crossed_at TEXT,
  boundary_attempt_id TEXT,
  boundary_generation INTEGER,
  boundary_snapshot_revision TEXT,
  boundary_recovery_envelope_ref TEXT,
  boundary_recovery_envelope_bytes INTEGER,
  boundary_recovery_retention_until TEXT,
  boundary_recovery_operator_pin_until TEXT,
  replay_policy TEXT NOT NULL DEFAULT 'automatic' CHECK (replay_policy IN ('automatic','manual_resolution_only')),
  closed_at TEXT,
  close_reason TEXT CHECK (close_reason IS NULL OR close_reason IN ('delivered','superseded',
    'operator_confirmed_delivery','operator_closed_unconfirmed','cancelled','redelivery_window_exhausted',
    'manual_resolution_expired','max_attempts_exhausted','handoff_recorded')),
  delivery_mode TEXT CHECK (delivery_mode IS NULL OR delivery_mode IN ('desktop_heartbeat','cli_turn_start','cli_turn_steer')),
  delivery_read_only INTEGER,
  delivery_requires_approval INTEGER,
  delivery_requires_network INTEGER,
  delivery_requires_write_access INTEGER,
  inline_payload_bytes INTEGER,
  artifact_count INTEGER,
  requires_artifact_read INTEGER,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  CHECK ((state = 'closed') = (close_reason IS NOT NULL))
);
CREATE UNIQUE INDEX batches_by_thread_seq ON batches(source_thread_id, seq);
CREATE INDEX batches_by_state ON batches(state);

CREATE TABLE batch_jobs (
  batch_id TEXT NOT NULL REFERENCES batches(batch_id),
  job_id TEXT NOT NULL UNIQUE REFERENCES jobs(job_id),
  position INTEGER NOT NULL,
  PRIMARY KEY (batch_id, position)
);

CREATE TABLE attempts (
  attempt_id TEXT PRIMARY KEY,
  source_thread_id TEXT NOT NULL,
  batch_id TEXT NOT NULL REFERENCES batches(batch_id),
  generation INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('prepared','accept_pending','arm_pending','cooldown','closed','superseded','abandoned')),
  bridge_request_id TEXT,
  bridge_arm_lease_id TEXT,
  bridge_arm_lease_deadline TEXT,
  arm_pending_since TEXT,
  arm_pending_deadline TEXT,
  delivery_rpc_request_id TEXT,
  delivery_rpc_kind TEXT CHECK (delivery_rpc_kind IS NULL OR delivery_rpc_kind IN ('turn_start','turn_steer')),
  delivery_rpc_started_at TEXT,
  delivery_rpc_state TEXT CHECK (delivery_rpc_state IS NULL OR delivery_rpc_state IN
    ('pending_acceptance','accepted','rejected_before_accept','acceptance_unknown')),
  delivery_rpc_correlation_marker TEXT,
  delivery_turn_id TEXT,
  managed_session_id TEXT,
  session_epoch INTEGER,
  delivery_accepted_at TEXT,
  delivery_observation_state TEXT CHECK (delivery_observation_state IS NULL OR delivery_observation_state IN ('tracking','lost','expired')),
  delivery_observation_deadline TEXT,
  last_observed_turn_event TEXT CHECK (last_observed_turn_event IS NULL OR last_observed_turn_event IN
    ('turn_started','turn_completed','turn_failed','turn_interrupted','turn_replaced')),
  last_observed_turn_event_at TEXT,
  binding_id TEXT,
  automation_id TEXT,
  automation_binding_state TEXT NOT NULL DEFAULT 'unknown' CHECK (automation_binding_state IN ('unknown','observed','reconciled')),
  snapshot_path TEXT,
  snapshot_revision TEXT,
  delivery_deadline TEXT,
  cooldown_until TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (batch_id, generation)
);
-- At most one non-terminal attempt per thread, enforced by the store itself.
CREATE UNIQUE INDEX attempts_one_live_per_thread ON attempts(source_thread_id)
  WHERE state IN ('prepared','accept_pending','arm_pending','cooldown');

CREATE TABLE threads (
  source_thread_id TEXT PRIMARY KEY,
  next_batch_seq INTEGER NOT NULL DEFAULT 1,
  last_delivery_at TEXT,
  next_delivery_not_before TEXT,
  updated_at TEXT NOT NULL
);

CREATE TABLE ready_cursors (
  scope TEXT PRIMARY KEY,
  last_source_thread_id TEXT,
  last_ready_at TEXT,
  updated_at TEXT NOT NULL
);

CREATE TABLE desktop_installation_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  read_transport TEXT CHECK (read_transport IS NULL OR read_transport IN ('direct_file_read','helper_cli_read')),
  read_transport_generation INTEGER NOT NULL DEFAULT 0,
  read_transport_capability TEXT NOT NULL DEFAULT 'unknown' CHECK (read_transport_capability IN ('unknown','validated','unavailable')),
  artifact_read_capability TEXT NOT NULL DEFAULT 'unknown' CHECK (artifact_read_capability IN ('unknown','validated','unavailable')),
  writeback_capability TEXT NOT NULL DEFAULT 'unknown' CHECK (writeback_capability IN ('unknown','validated','unavailable')),
  validation_fingerprint TEXT,
  validated_at TEXT,
  updated_by_bootstrap_or_repair TEXT,
  updated_at TEXT
);

CREATE TABLE desktop_bindings (
  binding_id TEXT PRIMARY KEY,
  source_thread_id TEXT NOT NULL UNIQUE,
  binding_state TEXT NOT NULL CHECK (binding_state IN ('unbound','bound','degraded')),
  caller_automation_id TEXT,
  armed_generation INTEGER,
  armed_generation_quiesced_at TEXT,
  pause_not_before TEXT,
  pause_deadline TEXT,
  bridge_thread_id TEXT,
  read_transport TEXT CHECK (read_transport IS NULL OR read_transport IN ('direct_file_read','helper_cli_read')),
  read_transport_generation INTEGER,
  read_transport_capability TEXT NOT NULL DEFAULT 'unknown' CHECK (read_transport_capability IN ('unknown','validated','unavailable')),
  artifact_read_capability TEXT NOT NULL DEFAULT 'unknown' CHECK (artifact_read_capability IN ('unknown','validated','unavailable')),
  writeback_capability TEXT NOT NULL DEFAULT 'unknown' CHECK (writeback_capability IN ('unknown','validated','unavailable')),
  validation_fingerprint TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  last_verified_at TEXT
);

CREATE TABLE managed_sessions (
  managed_session_id TEXT PRIMARY KEY,
  bound_thread_id TEXT,
  session_epoch INTEGER NOT NULL DEFAULT 1,
  session_state TEXT NOT NULL CHECK (session_state IN ('live','detached','parked','stale','retired')),
  session_allows_approval INTEGER,
  session_allows_network INTEGER,
  session_allows_write_access INTEGER,
  startup_session_allows_approval INTEGER,
  startup_session_allows_network INTEGER,
  startup_session_allows_write_access INTEGER,
  startup_permission_snapshot_json TEXT,
  last_permission_snapshot_json TEXT,
  permission_snapshot_revision INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE tasks (
  task_id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL REFERENCES jobs(job_id),
  source_thread_id TEXT NOT NULL,
  argv_json TEXT NOT NULL,
  cwd TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('starting','running','exited','failed','cancelled')),
  pid INTEGER,
  exit_status INTEGER,
  signal TEXT,
  reason TEXT,
  timeout_seconds INTEGER,
  spool_dir TEXT NOT NULL,
  daemon_instance TEXT,
  created_at TEXT NOT NULL,
  started_at TEXT,
  ended_at TEXT,
  updated_at TEXT NOT NULL
);

CREATE TABLE audit (
  audit_id INTEGER PRIMARY KEY AUTOINCREMENT,
  at TEXT NOT NULL,
  actor TEXT NOT NULL,
  actor_uid INTEGER,
  actor_pid INTEGER,
  action TEXT NOT NULL,
  entity_kind TEXT,
  entity_id TEXT,
  source_thread_id TEXT,
  from_state TEXT,
  to_state TEXT,
  reason TEXT,
  outcome TEXT,
  detail TEXT
);
CREATE INDEX audit_by_thread ON audit(source_thread_id, audit_id);
`,
	// 2: CLI adapter: managed-session supervision, capability probe,
	// requested profile and lease columns; one non-retired session per thread.
	`
ALTER TABLE managed_sessions ADD COLUMN requested_allows_approval TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE managed_sessions ADD COLUMN requested_allows_network TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE managed_sessions ADD COLUMN requested_allows_write_access TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE managed_sessions ADD COLUMN auto_delivery_policy TEXT NOT NULL DEFAULT 'strict-safe'
  CHECK (auto_delivery_policy IN ('strict-safe','trusted-all'));
ALTER TABLE managed_sessions ADD COLUMN enable_turn_steer INTEGER NOT NULL DEFAULT 0;
ALTER TABLE managed_sessions ADD COLUMN codex_bin TEXT;
ALTER TABLE managed_sessions ADD COLUMN cwd TEXT;
ALTER TABLE managed_sessions ADD COLUMN app_server_pid INTEGER;
ALTER TABLE managed_sessions ADD COLUMN app_server_url TEXT;
ALTER TABLE managed_sessions ADD COLUMN app_server_started_at TEXT;
ALTER TABLE managed_sessions ADD COLUMN capability_state TEXT NOT NULL DEFAULT 'unknown'
  CHECK (capability_state IN ('unknown','ok','missing'));
ALTER TABLE managed_sessions ADD COLUMN capability_reason TEXT;
ALTER TABLE managed_sessions ADD COLUMN capability_json TEXT;
ALTER TABLE managed_sessions ADD COLUMN capability_probed_at TEXT;
ALTER TABLE managed_sessions ADD COLUMN lease_id TEXT;
ALTER TABLE managed_sessions ADD COLUMN lease_pid INTEGER;
ALTER TABLE managed_sessions ADD COLUMN lease_deadline TEXT;
ALTER TABLE managed_sessions ADD COLUMN delivery_blocked_reason TEXT;
ALTER TABLE managed_sessions ADD COLUMN last_thread_status TEXT;
CREATE UNIQUE INDEX managed_sessions_one_per_thread ON managed_sessions(bound_thread_id)
  WHERE session_state != 'retired' AND bound_thread_id IS NOT NULL;
`,
	// 3: Desktop path: generations monotonic per thread (so the binding's
	// armed_generation fence orders across batches), binding degrade
	// reasons, the fingerprint's observed inputs, published snapshot
	// revisions, boundary recovery envelopes, artifact read leases and
	// transcript-relay markers.
	`
ALTER TABLE threads ADD COLUMN attempt_generation INTEGER NOT NULL DEFAULT 0;
UPDATE threads SET attempt_generation = COALESCE((SELECT MAX(a.generation) FROM attempts a
  WHERE a.source_thread_id = threads.source_thread_id), 0);
ALTER TABLE desktop_installation_state ADD COLUMN fingerprint_inputs_json TEXT;
ALTER TABLE desktop_bindings ADD COLUMN degraded_reason TEXT;
ALTER TABLE desktop_bindings ADD COLUMN degraded_at TEXT;

CREATE TABLE desktop_snapshots (
  snapshot_revision TEXT PRIMARY KEY,
  bridge_thread_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('writing','published','failed','collected')),
  ready_count INTEGER NOT NULL DEFAULT 0,
  arm_pending_count INTEGER NOT NULL DEFAULT 0,
  pause_due_count INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  published_at TEXT,
  superseded_at TEXT,
  collected_at TEXT
);
CREATE INDEX desktop_snapshots_by_state ON desktop_snapshots(state, published_at);

CREATE TABLE boundary_recovery_envelopes (
  batch_id TEXT PRIMARY KEY REFERENCES batches(batch_id),
  source_thread_id TEXT NOT NULL,
  envelope_json TEXT,
  envelope_bytes INTEGER NOT NULL,
  inline_payload_bytes INTEGER NOT NULL,
  payload_artifact_id TEXT,
  created_at TEXT NOT NULL,
  retention_until TEXT NOT NULL,
  gc_at TEXT
);

CREATE TABLE artifact_read_leases (
  lease_id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('artifact_recovery')),
  batch_id TEXT NOT NULL REFERENCES batches(batch_id),
  issued_at TEXT NOT NULL,
  deadline TEXT NOT NULL,
  revoked_at TEXT,
  revoke_reason TEXT
);
CREATE INDEX artifact_read_leases_by_batch ON artifact_read_leases(batch_id);

CREATE TABLE relay_markers (
  marker_id TEXT PRIMARY KEY,
  marker TEXT NOT NULL UNIQUE,
  bridge_thread_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('arm-pending','arm-accepted')),
  source_thread_id TEXT NOT NULL,
  batch_id TEXT NOT NULL,
  attempt_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  bridge_request_id TEXT NOT NULL,
  issued_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  consumed_at TEXT,
  consume_outcome TEXT,
  evidence_json TEXT
);
`,
	// 4: tasks: the supervisor's durable identity (pid + start time + boot
	// id, so recovery never signals a reused pid), the true output tails
	// kept at the end (the spool file holds only the head when capped),
	// spool collection and the canonical event stream format.
	`
ALTER TABLE tasks ADD COLUMN pid_start_time INTEGER;
ALTER TABLE tasks ADD COLUMN boot_id TEXT;
ALTER TABLE tasks ADD COLUMN stdout_tail TEXT;
ALTER TABLE tasks ADD COLUMN stderr_tail TEXT;
ALTER TABLE tasks ADD COLUMN stdout_truncated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN stderr_truncated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN spool_collected_at TEXT;
ALTER TABLE tasks ADD COLUMN output_format TEXT NOT NULL DEFAULT 'text' CHECK (output_format IN ('text','events'));
CREATE INDEX tasks_by_state ON tasks(state);
CREATE INDEX jobs_by_task ON jobs(task_id) WHERE task_id IS NOT NULL;
`,
}
