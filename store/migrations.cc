#include "store/migrations.h"

#include <algorithm>
#include <pqxx/pqxx>
#include <set>

#include "base/log.h"
#include "store/pg_conn.h"

namespace gpupool {
namespace {

// Key of the advisory lock that serializes migrations ("gpupool" in ASCII, truncated).
constexpr int64_t kMigrationLockKey = 0x677075706f6f6cLL;

constexpr std::string_view kV1 = R"sql(
CREATE TABLE catalog (
  model          text PRIMARY KEY,
  vendor         text NOT NULL,
  milli_tflops   bigint NOT NULL CHECK (milli_tflops >= 0),
  vram_mib       bigint NOT NULL CHECK (vram_mib >= 0),
  mig_profiles   text[] NOT NULL DEFAULT '{}'
);

CREATE TABLE pools (
  name                text PRIMARY KEY,
  visibility          text NOT NULL,
  allowed_tenants     text[] NOT NULL,
  placement_strategy  text NOT NULL,
  compute_permille    bigint NOT NULL,
  memory_permille     bigint NOT NULL,
  sharing_mode        text NOT NULL,
  time_slice_replicas integer NOT NULL,
  create_us           bigint NOT NULL
);

CREATE TABLE nodes (
  name              text PRIMARY KEY,
  pool              text NOT NULL REFERENCES pools (name),
  state             text NOT NULL,
  labels            text[] NOT NULL,  -- key, value, key, value …
  cpu_milli         bigint NOT NULL,
  memory_mib        bigint NOT NULL,
  spill_budget_mib  bigint NOT NULL,
  last_heartbeat_us bigint NOT NULL
);

CREATE INDEX nodes_pool_idx ON nodes (pool);

CREATE TABLE devices (
  node          text NOT NULL REFERENCES nodes (name) ON DELETE CASCADE,
  pos           integer NOT NULL,
  id            text NOT NULL,
  model         text NOT NULL,
  idx           integer NOT NULL,
  milli_tflops  bigint NOT NULL,
  vram_mib      bigint NOT NULL,
  mig_profile   text NOT NULL,
  parent_id     text NOT NULL,
  healthy       boolean NOT NULL,
  numa_node     integer NOT NULL,
  PRIMARY KEY (node, pos),
  UNIQUE (node, id)
);

CREATE TABLE links (
  node            text NOT NULL REFERENCES nodes (name) ON DELETE CASCADE,
  pos             integer NOT NULL,
  a               integer NOT NULL,
  b               integer NOT NULL,
  kind            smallint NOT NULL,
  bandwidth_gbps  integer NOT NULL,
  PRIMARY KEY (node, pos)
);

CREATE TABLE jobs (
  id                bigint PRIMARY KEY CHECK (id > 0),
  tenant            text NOT NULL,
  pool              text NOT NULL,
  priority_class    text NOT NULL,
  task_count        integer NOT NULL,
  gang              boolean NOT NULL,
  preemptible       boolean NOT NULL,
  max_runtime_ms    bigint NOT NULL,
  max_retries       integer NOT NULL,
  labels            text[] NOT NULL,  -- key, value, key, value …
  command           text[] NOT NULL,
  env               text[] NOT NULL,  -- key, value, key, value …
  req_shape         smallint NOT NULL,
  req_milli_tflops  bigint NOT NULL,
  req_vram_mib      bigint NOT NULL,
  req_gpu_count     integer NOT NULL,
  req_models        text[] NOT NULL,
  req_mig_profile   text NOT NULL,
  req_sku           text NOT NULL,
  req_cpu_milli     bigint NOT NULL,
  req_memory_mib    bigint NOT NULL,
  state             text NOT NULL,
  reason            text NOT NULL,
  submit_us         bigint NOT NULL,
  finish_us         bigint NOT NULL
);

CREATE TABLE tasks (
  job_id        bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  idx           integer NOT NULL,
  state         text NOT NULL,
  node          text NOT NULL,
  attempt       integer NOT NULL,
  exit_code     integer NOT NULL,
  reason        text NOT NULL,
  scheduled_us  bigint NOT NULL,
  started_us    bigint NOT NULL,
  finished_us   bigint NOT NULL,
  PRIMARY KEY (job_id, idx)
);

CREATE TABLE allocations (
  job_id        bigint NOT NULL,
  idx           integer NOT NULL,
  pos           integer NOT NULL,
  device_id     text NOT NULL,
  milli_tflops  bigint NOT NULL,
  vram_mib      bigint NOT NULL,
  slots         integer NOT NULL,
  exclusive     boolean NOT NULL,
  PRIMARY KEY (job_id, idx, pos),
  FOREIGN KEY (job_id, idx) REFERENCES tasks (job_id, idx) ON DELETE CASCADE
);

CREATE TABLE tenants (
  path       text PRIMARY KEY,  -- "org/project/user"
  create_us  bigint NOT NULL
);

CREATE TABLE quotas (
  tenant               text NOT NULL REFERENCES tenants (path) ON DELETE CASCADE,
  pool                 text NOT NULL,
  guaranteed_milli_tflops bigint NOT NULL,
  guaranteed_vram_mib  bigint NOT NULL,
  guaranteed_devices   integer NOT NULL,
  limit_milli_tflops   bigint NOT NULL,
  limit_vram_mib       bigint NOT NULL,
  limit_devices        integer NOT NULL,
  PRIMARY KEY (tenant, pool)
);

CREATE TABLE events (
  id       bigserial PRIMARY KEY,
  time_us  bigint NOT NULL,
  kind     text NOT NULL,
  subject  text NOT NULL,
  message  text NOT NULL
);
CREATE INDEX events_subject_idx ON events (subject text_pattern_ops, id);

CREATE TABLE leader (
  id        integer PRIMARY KEY CHECK (id = 1),
  epoch     bigint NOT NULL,
  holder    text NOT NULL,
  lease_us  bigint NOT NULL
);
INSERT INTO leader (id, epoch, holder, lease_us) VALUES (1, 0, '', 0);
)sql";

// gp_require() raises a gpupool SQLSTATE (GPN01 not found, GPA01 already exists, GPP01 failed
// precondition, GPI01 invalid argument) so one multi-statement transaction can check what a
// mutation needs; gp_fence() renews the lease of the given epoch or raises GPF01 (fenced).
constexpr std::string_view kV2 = R"sql(
CREATE FUNCTION gp_require(ok boolean, code text, msg text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ok THEN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = msg;
  END IF;
END $$;

CREATE FUNCTION gp_fence(p_epoch bigint, p_lease_us bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE leader SET lease_us = p_lease_us WHERE id = 1 AND epoch = p_epoch;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'GPF01',
      MESSAGE = format('fenced: epoch %s is no longer the leader (current epoch %s)',
                       p_epoch, (SELECT epoch FROM leader WHERE id = 1));
  END IF;
END $$;
)sql";

// Durable facts that used to live only in the display text `reason`: why a task is being
// stopped, and its last preemption (docs/store.md). Rows written by an older gpupoold get the
// facts its reason text implied, once, here.
constexpr std::string_view kV3 = R"sql(
ALTER TABLE tasks
  ADD COLUMN stop_intent      text    NOT NULL DEFAULT '',
  ADD COLUMN preempted_by_job bigint  NOT NULL DEFAULT 0,
  ADD COLUMN preempted_by_idx integer NOT NULL DEFAULT 0,
  ADD COLUMN preempt_rule     text    NOT NULL DEFAULT '',
  ADD COLUMN preempt_reserved boolean NOT NULL DEFAULT false;
UPDATE tasks SET stop_intent = 'PREEMPT'
  WHERE state IN ('SCHEDULED', 'RUNNING') AND reason LIKE 'stopping: preempted by %';
UPDATE tasks SET stop_intent = 'DRAIN'
  WHERE state IN ('SCHEDULED', 'RUNNING') AND reason LIKE 'stopping: node % is draining';
UPDATE tasks t SET stop_intent = 'CANCEL' FROM jobs j
  WHERE t.job_id = j.id AND j.state = 'CANCELLED' AND t.state IN ('SCHEDULED', 'RUNNING');
)sql";

// Leader election among gpupoold replicas (docs/ha.md): the lease row gets the leader's API
// address and an expiry on the database's clock. gp_fence also refuses a replica's writes once
// its lease has expired (address set = a replica; a single daemon's AcquireLeadership clears it).
constexpr std::string_view kV50 = R"sql(
ALTER TABLE leader
  ADD COLUMN address    text        NOT NULL DEFAULT '',
  ADD COLUMN expires_at timestamptz NOT NULL DEFAULT '-infinity';

CREATE OR REPLACE FUNCTION gp_fence(p_epoch bigint, p_lease_us bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE leader SET lease_us = p_lease_us
    WHERE id = 1 AND epoch = p_epoch AND (address = '' OR expires_at > clock_timestamp());
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'GPF01',
      MESSAGE = format('fenced: epoch %s is no longer the leader or its lease expired '
                       '(current epoch %s)', p_epoch, (SELECT epoch FROM leader WHERE id = 1));
  END IF;
END $$;
)sql";

// Issue 12: the leader's REST base URL beside its gRPC address, so a standby can send REST clients
// to the leader (307 with Location) as it sends gRPC clients (NotLeader). Empty until a replica of
// this version takes the lease.
constexpr std::string_view kV51 = R"sql(
ALTER TABLE leader ADD COLUMN http_address text NOT NULL DEFAULT '';
)sql";

// API keys (scheduler/api_keys.h): only the SHA-256 of a key's secret is kept.
constexpr std::string_view kV10 = R"sql(
CREATE TABLE api_keys (
  id             text PRIMARY KEY,
  name           text NOT NULL,
  tenant         text NOT NULL,
  role           text NOT NULL CHECK (role IN ('viewer', 'member', 'tenant-admin', 'admin')),
  secret_sha256  text NOT NULL,
  created_by     text NOT NULL,
  create_ms      bigint NOT NULL,
  expire_ms      bigint NOT NULL DEFAULT 0,
  revoke_ms      bigint NOT NULL DEFAULT 0
);
CREATE INDEX api_keys_tenant ON api_keys (tenant);
)sql";

// The audit log (scheduler/audit_record.h): append-only. The triggers refuse UPDATE, DELETE and
// TRUNCATE for every role, the table owner included (REVOKE alone would not bind the owner, which
// is the role gpupoold connects as). Indexes serve the API's filters, newest first.
constexpr std::string_view kV60 = R"sql(
CREATE TABLE audit_log (
  id          bigserial PRIMARY KEY,
  time_us     bigint  NOT NULL,
  key_id      text    NOT NULL,
  principal   text    NOT NULL,
  role        text    NOT NULL,
  tenant      text    NOT NULL,
  verb        text    NOT NULL,
  resource    text    NOT NULL,
  code        integer NOT NULL,
  message     text    NOT NULL,
  request_id  text    NOT NULL,
  source      text    NOT NULL
);
CREATE INDEX audit_log_time_idx ON audit_log (time_us);
CREATE INDEX audit_log_principal_idx ON audit_log (principal, id);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant text_pattern_ops, id);
CREATE INDEX audit_log_resource_idx ON audit_log (resource text_pattern_ops, id);

CREATE FUNCTION gp_audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'GPP01',
    MESSAGE = 'audit_log is append-only: ' || TG_OP || ' is refused';
END $$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION gp_audit_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION gp_audit_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM PUBLIC;
)sql";

// SubmitJob's idempotency key, unique per tenant (the index is the last word when two daemons or
// two batches race), and job env values marked secret, kept apart from env so that no reader of
// the jobs table's env column sees them by accident.
constexpr std::string_view kV61 = R"sql(
ALTER TABLE jobs
  ADD COLUMN idempotency_key text   NOT NULL DEFAULT '',
  ADD COLUMN request_digest  text   NOT NULL DEFAULT '',
  ADD COLUMN secret_env      text[] NOT NULL DEFAULT '{}';
CREATE UNIQUE INDEX jobs_idempotency_idx ON jobs (tenant, idempotency_key)
  WHERE idempotency_key <> '';
)sql";

// Issue 10: faults (fatal XID / uncorrectable ECC) that keep a device out of service until an
// admin clears them. No foreign key to nodes: a fault outlives a node's re-registration.
constexpr std::string_view kV20 = R"sql(
CREATE TABLE device_faults (
  node        text NOT NULL,
  device      text NOT NULL,
  reason      text NOT NULL,
  fault_id    bigint NOT NULL,
  since_us    bigint NOT NULL,
  cleared     boolean NOT NULL,
  cleared_by  text NOT NULL,
  cleared_us  bigint NOT NULL,
  PRIMARY KEY (node, device)
);
)sql";

// Issue 10: what a task's last ended attempt used (from its cgroup), shown by GetJob.
constexpr std::string_view kV21 = R"sql(
ALTER TABLE tasks
  ADD COLUMN usage_cpu_us bigint NOT NULL DEFAULT 0,
  ADD COLUMN usage_peak_memory_bytes bigint NOT NULL DEFAULT 0,
  ADD COLUMN usage_oom_kills bigint NOT NULL DEFAULT 0;
)sql";

// Issue 10: a pool's MPS fault isolation between tenants, and what a node's agent said at its
// last registration it can and cannot enforce (name, enforced "t"/"f", detail, … flattened).
constexpr std::string_view kV22 = R"sql(
ALTER TABLE pools
  ADD COLUMN mps_tenant_isolation boolean NOT NULL DEFAULT false;
ALTER TABLE nodes
  ADD COLUMN capabilities text[] NOT NULL DEFAULT '{}';
)sql";

// Every change to an API key is announced on channel gpupool_api_keys (payload: the key id, ""
// after TRUNCATE), so daemons that cache verified keys forget a revoked one at once
// (store/pg_key_feed.h).
constexpr std::string_view kV11 = R"sql(
CREATE FUNCTION gp_api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    PERFORM pg_notify('gpupool_api_keys', '');
  ELSE
    PERFORM pg_notify('gpupool_api_keys', OLD.id);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION gp_api_key_changed();
CREATE TRIGGER api_keys_truncated AFTER TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION gp_api_key_changed();
)sql";

// Issue 13: the usage ledger (scheduler/usage_ledger.h; docs/billing.md, "Ledger") and its
// daily roll-ups. Quantities are integer units × whole seconds. The primary key is the
// idempotent key: a retried interval is skipped (ON CONFLICT DO NOTHING). The ledger is never
// updated (the trigger refuses it for every role); retention moves old rows into usage_daily.
constexpr std::string_view kV70 = R"sql(
CREATE TABLE usage_ledger (
  job_id           bigint  NOT NULL,
  task_index       integer NOT NULL,
  attempt          integer NOT NULL,
  start_us         bigint  NOT NULL,
  end_us           bigint  NOT NULL CHECK (end_us >= start_us),
  tenant           text    NOT NULL,
  pool             text    NOT NULL,
  node             text    NOT NULL,
  model            text    NOT NULL,
  sharing_mode     text    NOT NULL,
  priority_class   text    NOT NULL,
  mig_profile      text    NOT NULL,
  milli_tflops_s   bigint  NOT NULL,
  physical_milli_tflops_s bigint NOT NULL,
  vram_mib_s       bigint  NOT NULL,
  spill_mib_s      bigint  NOT NULL,
  device_s         bigint  NOT NULL,
  mig_instance_s   bigint  NOT NULL,
  cpu_usage_us     bigint  NOT NULL,
  peak_memory_bytes bigint NOT NULL,
  end_state        text    NOT NULL,
  recorded_us      bigint  NOT NULL,
  PRIMARY KEY (job_id, task_index, attempt, start_us)
);
CREATE INDEX usage_ledger_start_idx ON usage_ledger (start_us);
CREATE INDEX usage_ledger_tenant_idx ON usage_ledger (tenant text_pattern_ops, start_us);

CREATE TABLE usage_daily (
  day_us           bigint  NOT NULL,
  tenant           text    NOT NULL,
  pool             text    NOT NULL,
  node             text    NOT NULL,
  model            text    NOT NULL,
  sharing_mode     text    NOT NULL,
  priority_class   text    NOT NULL,
  mig_profile      text    NOT NULL,
  milli_tflops_s   bigint  NOT NULL,
  physical_milli_tflops_s bigint NOT NULL,
  vram_mib_s       bigint  NOT NULL,
  spill_mib_s      bigint  NOT NULL,
  device_s         bigint  NOT NULL,
  mig_instance_s   bigint  NOT NULL,
  cpu_usage_us     bigint  NOT NULL,
  peak_memory_bytes bigint NOT NULL,
  intervals        bigint  NOT NULL,
  PRIMARY KEY (day_us, tenant, pool, node, model, sharing_mode, priority_class, mig_profile)
);

CREATE FUNCTION gp_usage_no_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'GPP01',
    MESSAGE = 'usage_ledger is append-only: ' || TG_OP || ' is refused';
END $$;
CREATE TRIGGER usage_ledger_no_update BEFORE UPDATE ON usage_ledger
  FOR EACH ROW EXECUTE FUNCTION gp_usage_no_update();
)sql";

// Issue 13 (billing): preemption credits from the ledger. A daily roll-up keeps whether its
// intervals' attempts ended by preemption (a key column, so credited usage is never summed with
// the rest; rows rolled up before this migration count as not preempted), and a partial index
// finds an attempt's PREEMPTED last interval without scanning its other rows.
constexpr std::string_view kV71 = R"sql(
ALTER TABLE usage_daily ADD COLUMN preempted boolean NOT NULL DEFAULT false;
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily ADD PRIMARY KEY
  (day_us, tenant, pool, node, model, sharing_mode, priority_class, mig_profile, preempted);
CREATE INDEX usage_ledger_preempted_idx ON usage_ledger (job_id, task_index, attempt)
  WHERE end_state = 'PREEMPTED';
)sql";

// Issue 13 (billing): versioned price plans (billing/price_plan.h). Append-only: a change is a
// new version row, so the version that rated a past invoice is still there. Money and
// multipliers are exact integers in nanos (1e-9); a rate's unit is its name ("tflops-hour").
constexpr std::string_view kV80 = R"sql(
CREATE TABLE price_plans (
  name                  text    NOT NULL,
  version               bigint  NOT NULL,
  effective_from_ms     bigint  NOT NULL,
  currency              text    NOT NULL,
  description           text    NOT NULL,
  preemption_credit_bps integer NOT NULL,
  created_by            text    NOT NULL,
  create_ms             bigint  NOT NULL,
  PRIMARY KEY (name, version)
);
CREATE TABLE price_plan_tenants (
  name    text   NOT NULL,
  version bigint NOT NULL,
  tenant  text   NOT NULL,
  PRIMARY KEY (name, version, tenant),
  FOREIGN KEY (name, version) REFERENCES price_plans (name, version)
);
CREATE TABLE price_plan_rates (
  name        text    NOT NULL,
  version     bigint  NOT NULL,
  ordinal     integer NOT NULL,
  pool        text    NOT NULL,
  model       text    NOT NULL,
  mig_profile text    NOT NULL,
  unit        text    NOT NULL,
  price_nanos bigint  NOT NULL CHECK (price_nanos >= 0),
  PRIMARY KEY (name, version, ordinal),
  FOREIGN KEY (name, version) REFERENCES price_plans (name, version)
);
CREATE TABLE price_plan_multipliers (
  name             text   NOT NULL,
  version          bigint NOT NULL,
  priority_class   text   NOT NULL,
  multiplier_nanos bigint NOT NULL CHECK (multiplier_nanos > 0),
  PRIMARY KEY (name, version, priority_class),
  FOREIGN KEY (name, version) REFERENCES price_plans (name, version)
);
)sql";

// Issue 16: who submitted each job (the credential's id: "key:<id>", "token:<name>",
// "admin-token", "oidc:<sub>"), so that a member may cancel only its own jobs. Jobs stored before
// this version have '' and are cancelled by a tenant-admin or an admin.
constexpr std::string_view kV12 = R"sql(
ALTER TABLE jobs ADD COLUMN submitted_by text NOT NULL DEFAULT '';
)sql";

// Issue 16: the CA and admin credential secure replicas share (store/pg_cluster_credentials.h).
// One row; as sensitive as <data-dir>/tls/ca.key, so PUBLIC gets nothing.
constexpr std::string_view kV13 = R"sql(
CREATE TABLE cluster_credentials (
  id          integer PRIMARY KEY CHECK (id = 1),
  ca_cert     text    NOT NULL,
  ca_key      text    NOT NULL,
  admin_token text    NOT NULL,
  created_us  bigint  NOT NULL
);
REVOKE ALL ON cluster_credentials FROM PUBLIC;
)sql";

// Secrets at rest (store/pg_secrets.h): the keys whose sealed values may still be in the
// database. Only key ids (fingerprints) are kept, never a key. PUBLIC gets nothing, as for 13.
constexpr std::string_view kV15 = R"sql(
CREATE TABLE secret_keys (
  id            text   PRIMARY KEY CHECK (id ~ '^[0-9a-f]{16}$'),
  first_used_ms bigint NOT NULL,
  retired_ms    bigint
);
REVOKE ALL ON secret_keys FROM PUBLIC;
)sql";

// Node join tokens an admin creates (scheduler/join_tokens.h): only the SHA-256 of a secret.
// PUBLIC gets nothing, as for 13 and 14.
constexpr std::string_view kV16 = R"sql(
CREATE TABLE join_tokens (
  id            text   PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
  secret_sha256 text   NOT NULL CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
  note          text   NOT NULL DEFAULT '',
  created_by    text   NOT NULL DEFAULT '',
  create_ms     bigint NOT NULL,
  expire_ms     bigint NOT NULL DEFAULT 0 CHECK (expire_ms >= 0),
  max_uses      bigint NOT NULL DEFAULT 0 CHECK (max_uses >= 0),
  uses          bigint NOT NULL DEFAULT 0 CHECK (uses >= 0),
  revoke_ms     bigint NOT NULL DEFAULT 0,
  last_node     text   NOT NULL DEFAULT '',
  last_use_ms   bigint NOT NULL DEFAULT 0
);
REVOKE ALL ON join_tokens FROM PUBLIC;
)sql";

// Node enrolments (scheduler/node_enrolments.h; docs/security.md, "Agents"): which certificate
// serial speaks for which node, and revocations, shared by every replica on the database (they
// lived in each replica's <tls-dir>/nodes file before). As sensitive as the rest of the trust
// state: PUBLIC has no rights, as for cluster_credentials (13).
constexpr std::string_view kV14 = R"sql(
CREATE TABLE node_enrolments (
  node        text        PRIMARY KEY,
  serial_hex  text        NOT NULL CHECK (serial_hex <> ''),
  not_after_s bigint      NOT NULL,
  revoked     boolean     NOT NULL DEFAULT false,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON node_enrolments FROM PUBLIC;
)sql";

// Issue 24: what a node must enforce to take a pool's shared work (PoolRecord::
// required_capabilities; pool/capabilities.h names).
constexpr std::string_view kV23 = R"sql(
ALTER TABLE pools
  ADD COLUMN required_capabilities text[] NOT NULL DEFAULT '{}';
)sql";

// Issue 24: spill is billed from what the node measured, kept with the task like its CPU time.
constexpr std::string_view kV24 = R"sql(
ALTER TABLE tasks
  ADD COLUMN usage_spill_mib_seconds bigint NOT NULL DEFAULT 0;
)sql";

// A task's OCI image (TaskTemplate.image); '' = a plain command.
constexpr std::string_view kV25 = R"sql(
ALTER TABLE jobs
  ADD COLUMN image text NOT NULL DEFAULT '';
)sql";

// Issue 25: the secret_env entry that is a job's registry credential (its name; the value is in
// secret_env, sealed).
constexpr std::string_view kV27 = R"sql(
ALTER TABLE jobs
  ADD COLUMN registry_credential text NOT NULL DEFAULT '';
)sql";

// Issue 25: what a job's image task overrides of its image and the volumes it mounts
// (TaskTemplate.entrypoint, working_dir, volumes as mount path, dataset pairs; '' = scratch).
constexpr std::string_view kV28 = R"sql(
ALTER TABLE jobs
  ADD COLUMN entrypoint text[] NOT NULL DEFAULT '{}',
  ADD COLUMN working_dir text NOT NULL DEFAULT '',
  ADD COLUMN volumes text[] NOT NULL DEFAULT '{}';
)sql";

// What a pool's tasks' networks may reach (PoolRecord::network): '' = each node's default,
// 'none', 'isolated', 'host'.
constexpr std::string_view kV26 = R"sql(
ALTER TABLE pools
  ADD COLUMN network text NOT NULL DEFAULT ''
    CHECK (network IN ('', 'none', 'isolated', 'host'));
)sql";

// Issue 25: images every node of a pool pulls and keeps (PoolRecord::pinned_images).
constexpr std::string_view kV29 = R"sql(
ALTER TABLE pools
  ADD COLUMN pinned_images text[] NOT NULL DEFAULT '{}';
)sql";

// Issue 24: how slices' compute shares hold on a pool's GPUs (PoolRecord::compute_fair):
// false, strict caps; true, fair (burst into idle time, give it back).
constexpr std::string_view kV30 = R"sql(
ALTER TABLE pools
  ADD COLUMN compute_fair boolean NOT NULL DEFAULT false;
)sql";

// Issue 25: the ports a job's tasks listen on (TaskTemplate.ports, "8080/tcp:http") and where
// a running task's are published ("8080/tcp:http=30001@node-3", pool/ports.h).
constexpr std::string_view kV32 = R"sql(
ALTER TABLE jobs
  ADD COLUMN ports text[] NOT NULL DEFAULT '{}';
ALTER TABLE tasks
  ADD COLUMN endpoints text[] NOT NULL DEFAULT '{}';
)sql";

// Registry credentials kept once per tenant (scheduler/registry_credentials.h); the secret is
// sealed at rest (store/pg_secrets.h).
constexpr std::string_view kV31 = R"sql(
CREATE TABLE registry_credentials (
  tenant      text NOT NULL,
  name        text NOT NULL,
  registry    text NOT NULL,
  username    text NOT NULL,
  password    text NOT NULL,
  created_by  text NOT NULL,
  create_ms   bigint NOT NULL,
  update_ms   bigint NOT NULL,
  PRIMARY KEY (tenant, name)
);
REVOKE ALL ON registry_credentials FROM PUBLIC;
)sql";

// Tenant webhooks (scheduler/webhooks.h, docs/webhooks.md). Events name the tenant of the job
// they are about, so a tenant's webhooks follow the event log by id; a webhook keeps its cursor
// (the last event id it is done with), its consecutive failures and why it was disabled. The
// signing secret is sealed at rest (store/pg_secrets.h). Deliveries keep each webhook's latest
// attempts only (store/pg_webhooks.cc trims them).
constexpr std::string_view kV36 = R"sql(
ALTER TABLE events ADD COLUMN tenant text NOT NULL DEFAULT '';
CREATE TABLE webhooks (
  id               bigserial PRIMARY KEY,
  tenant           text NOT NULL,
  url              text NOT NULL,
  secret           text NOT NULL,
  event_kinds      text[] NOT NULL,
  enabled          boolean NOT NULL,
  disabled_reason  text NOT NULL,
  cursor           bigint NOT NULL,
  failures         integer NOT NULL,
  first_failure_ms bigint NOT NULL,
  last_attempt_ms  bigint NOT NULL,
  last_status      text NOT NULL,
  created_by       text NOT NULL,
  create_ms        bigint NOT NULL
);
CREATE INDEX webhooks_tenant_idx ON webhooks (tenant);
REVOKE ALL ON webhooks FROM PUBLIC;
CREATE TABLE webhook_deliveries (
  seq          bigserial PRIMARY KEY,
  webhook_id   bigint NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  event_id     bigint NOT NULL,
  attempt      integer NOT NULL,
  time_ms      bigint NOT NULL,
  duration_ms  bigint NOT NULL,
  http_status  integer NOT NULL,
  error        text NOT NULL
);
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, seq);
)sql";

// Issue 26: services (scheduler/service.h). A replica is a one-task job marked with its
// service's id and the generation of the template it runs (JobSpec::service_id, 0 for a job a
// tenant submitted); the controller finds a service's replicas by that id. A service keeps its
// template as numbered revisions (the newest few), typed as the jobs table types a job's template
// (store/pg_columns.h GP_TEMPLATE_COLS); scaling fields change in place on `services`.
constexpr std::string_view kV33 = R"sql(
ALTER TABLE jobs
  ADD COLUMN service_id bigint NOT NULL DEFAULT 0,
  ADD COLUMN service_generation bigint NOT NULL DEFAULT 0;
CREATE INDEX jobs_service_idx ON jobs (service_id) WHERE service_id <> 0;

CREATE TABLE services (
  id                bigserial PRIMARY KEY,
  tenant            text NOT NULL,
  name              text NOT NULL,
  pool              text NOT NULL,
  priority_class    text NOT NULL,
  preemptible       boolean NOT NULL,
  min_replicas      integer NOT NULL,
  max_replicas      integer NOT NULL,
  target_in_flight  integer NOT NULL,
  idle_ms           bigint NOT NULL,
  max_surge         integer NOT NULL,
  max_unavailable   integer NOT NULL,
  generation        bigint NOT NULL CHECK (generation >= 1),
  created_by        text NOT NULL,
  create_ms         bigint NOT NULL,
  update_ms         bigint NOT NULL,
  UNIQUE (tenant, name)
);
REVOKE ALL ON services FROM PUBLIC;
REVOKE ALL ON SEQUENCE services_id_seq FROM PUBLIC;

CREATE TABLE service_revisions (
  service_id           bigint NOT NULL REFERENCES services (id) ON DELETE CASCADE,
  generation           bigint NOT NULL CHECK (generation >= 1),
  port                 integer NOT NULL,
  readiness_path       text NOT NULL,
  command              text[] NOT NULL,
  env                  text[] NOT NULL,  -- key, value, key, value …
  req_shape            smallint NOT NULL,
  req_milli_tflops     bigint NOT NULL,
  req_vram_mib         bigint NOT NULL,
  req_gpu_count        integer NOT NULL,
  req_models           text[] NOT NULL,
  req_mig_profile      text NOT NULL,
  req_sku              text NOT NULL,
  req_cpu_milli        bigint NOT NULL,
  req_memory_mib       bigint NOT NULL,
  image                text NOT NULL,
  registry_credential  text NOT NULL,
  entrypoint           text[] NOT NULL,
  working_dir          text NOT NULL,
  volumes              text[] NOT NULL,  -- mount path, dataset, …
  ports                text[] NOT NULL,  -- "8080/tcp:http", pool/ports.h
  PRIMARY KEY (service_id, generation)
);
REVOKE ALL ON service_revisions FROM PUBLIC;
)sql";

// Issue 27: time-slicing set per device by an admin. Like device_faults, no foreign key to nodes:
// the row outlives the node's re-registration (its agent re-reports the devices).
constexpr std::string_view kV35 = R"sql(
CREATE TABLE device_slots (
  node    text NOT NULL,
  device  text NOT NULL,
  slots   integer NOT NULL CHECK (slots BETWEEN 1 AND 64),
  set_by  text NOT NULL,
  set_us  bigint NOT NULL,
  PRIMARY KEY (node, device)
);
)sql";

// Issue 27: the time-slice slots a node's agent config gives a device (its default; an admin's
// device_slots row overrides it).
constexpr std::string_view kV38 = R"sql(
ALTER TABLE devices ADD COLUMN time_slice_slots integer NOT NULL DEFAULT 0;
)sql";

// Issue 27, dynamic MIG: the layout asked of each GPU (MigLayoutRecord), the instances' placement
// starts and which GPUs can be re-partitioned, and each pool's re-layout policy. Like
// device_slots, mig_layouts has no foreign key to nodes: it outlives re-registration.
constexpr std::string_view kV39 = R"sql(
CREATE TABLE mig_layouts (
  node        text NOT NULL,
  gpu         text NOT NULL,
  layout      text NOT NULL,
  generation  bigint NOT NULL CHECK (generation > 0),
  state       text NOT NULL CHECK (state IN ('draining', 'applying', 'applied', 'failed')),
  reason      text NOT NULL,
  set_by      text NOT NULL,
  updated_us  bigint NOT NULL,
  PRIMARY KEY (node, gpu)
);
ALTER TABLE devices ADD COLUMN mig_start integer NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN mig_enabled boolean NOT NULL DEFAULT false;
ALTER TABLE pools ADD COLUMN mig_relayout text NOT NULL DEFAULT 'off';
)sql";

// A replica's service name (JobSpec::service_name), kept on the job so that its usage is billed
// under it even after the service is gone.
constexpr std::string_view kV34 = R"sql(
ALTER TABLE jobs ADD COLUMN service_name text NOT NULL DEFAULT '';
)sql";

// The service whose replica held each interval ('' for a job a tenant submitted): reports group
// by it and invoices give each service its own lines. Roll-ups keep it in their key.
constexpr std::string_view kV72 = R"sql(
ALTER TABLE usage_ledger ADD COLUMN service text NOT NULL DEFAULT '';
ALTER TABLE usage_daily ADD COLUMN service text NOT NULL DEFAULT '';
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily ADD PRIMARY KEY
  (day_us, tenant, pool, node, model, sharing_mode, priority_class, mig_profile, service,
   preempted);
)sql";

// Issue 27: time-slice slots held × seconds, beside MIG instance-seconds (a slot of a sliced GPU
// or MIG instance is billed as a slot, not as the whole instance).
constexpr std::string_view kV73 = R"sql(
ALTER TABLE usage_ledger ADD COLUMN slot_s bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN slot_s bigint NOT NULL DEFAULT 0;
)sql";

// Issue 29: tenants' monthly budgets (billing/budget.h). The alerts they sent are events in the
// event log ("budget/<tenant>@<month>/<percent>"), so nothing here records them.
constexpr std::string_view kV81 = R"sql(
CREATE TABLE budgets (
  tenant          text PRIMARY KEY,
  amount_nanos    bigint NOT NULL CHECK (amount_nanos > 0),
  currency        text NOT NULL,
  alert_percents  integer[] NOT NULL,
  updated_by      text NOT NULL,
  update_ms       bigint NOT NULL
);
REVOKE ALL ON budgets FROM PUBLIC;
)sql";

// What-if replays (Store::QueryPoolHistory) read one pool's jobs by submission time.
constexpr std::string_view kV100 = R"sql(
CREATE INDEX jobs_pool_submit_idx ON jobs (pool, submit_us);
)sql";

constexpr Migration kMigrations[] = {
    {1, "initial schema", kV1},
    {2, "check and fence functions", kV2},
    {3, "typed stop intent and preemption facts on tasks", kV3},
    {10, "API keys", kV10},
    {11, "API key change notifications", kV11},
    {12, "the submitting principal of each job", kV12},
    {13, "credentials shared by secure replicas", kV13},
    {14, "node enrolments shared by replicas", kV14},
    {15, "keys of the secrets sealed at rest", kV15},
    {16, "node join tokens", kV16},
    {20, "device faults", kV20},
    {21, "task usage", kV21},
    {22, "pool MPS isolation and node capabilities", kV22},
    {23, "capabilities a pool requires of nodes for shared work", kV23},
    {24, "measured spill of each task", kV24},
    {25, "OCI image of a job's tasks", kV25},
    {26, "network of a pool's tasks", kV26},
    {27, "registry credential of a job's image", kV27},
    {28, "entrypoint, working directory and volumes of a job's image", kV28},
    {29, "images pinned to a pool's nodes", kV29},
    {30, "fair compute sharing of a pool's slices", kV30},
    {31, "registry credentials kept per tenant", kV31},
    {32, "a task's declared ports and where they are published", kV32},
    {33, "services, their template revisions, and the replicas' service on jobs", kV33},
    {34, "the service's name on its replicas", kV34},
    {35, "time-slice slots set per device", kV35},
    {36, "tenant webhooks and the tenant of each event", kV36},
    {38, "time-slice slots an agent's config gives each device", kV38},
    {39, "dynamic MIG layouts, instance starts and pools' re-layout policy", kV39},
    {50, "leader election: lease address and expiry", kV50},
    {51, "leader election: the leader's REST address", kV51},
    {60, "append-only audit log", kV60},
    {61, "idempotency keys and secret env on jobs", kV61},
    {70, "usage ledger and daily roll-ups", kV70},
    {71, "preempted attempts in the usage roll-ups", kV71},
    {72, "the service of each usage interval", kV72},
    {73, "time-slice slot-seconds in the usage ledger", kV73},
    {80, "versioned price plans", kV80},
    {81, "tenant budgets", kV81},
    {100, "jobs by pool and submission time (what-if history)", kV100},
};

}  // namespace

std::span<const Migration> Migrations() { return kMigrations; }

Status Migrate(pqxx::connection& conn, const std::string& display) {
  PgTarget target{"", display};
  const std::string key = std::to_string(kMigrationLockKey);
  try {
    // A session-level lock: held across the per-migration transactions below, released by
    // pg_advisory_unlock or when the connection ends.
    {
      pqxx::nontransaction n(conn);
      n.exec("SELECT pg_advisory_lock(" + key + ")");
    }
    Status result;
    try {
      std::set<int> applied;
      {
        pqxx::nontransaction n(conn);
        n.exec(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())");
        for (const auto& row : n.exec("SELECT version FROM schema_migrations")) {
          applied.insert(row[0].as<int>());
        }
      }
      int newest = 0;  // versions are applied by set membership: the list need not be sorted
      for (const Migration& m : Migrations()) newest = std::max(newest, m.version);
      if (!applied.empty() && *applied.rbegin() > newest) {
        result = Status::FailedPrecondition(
            "database " + display + " has schema version " + std::to_string(*applied.rbegin()) +
            ", newer than this gpupoold knows (" + std::to_string(newest) + ")");
      }
      for (const Migration& m : Migrations()) {
        if (!result.ok() || applied.count(m.version) != 0) continue;
        pqxx::work txn(conn);
        txn.exec(std::string(m.sql));
        std::string insert = "INSERT INTO schema_migrations (version, name) VALUES (" +
                             std::to_string(m.version) + ", ";
        AppendQuoted(&insert, m.name);
        txn.exec(insert + ")");
        txn.commit();
        LogInfo("store", "applied migration",
                {{"version", std::to_string(m.version)}, {"name", std::string(m.name)}});
      }
    } catch (const std::exception& e) {
      result = PgErrorToStatus(e, target).WithContext("migrate");
    }
    if (conn.is_open()) {
      pqxx::nontransaction n(conn);
      n.exec("SELECT pg_advisory_unlock(" + key + ")");
    }
    return result;
  } catch (const std::exception& e) {
    return PgErrorToStatus(e, target).WithContext("migrate");
  }
}

}  // namespace gpupool
