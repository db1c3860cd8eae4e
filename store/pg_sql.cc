#include "store/pg_sql.h"

#include <charconv>
#include <pqxx/pqxx>

#include "store/pg_columns.h"
#include "store/pg_conn.h"
#include "store/pg_secrets.h"
#include "store/pg_usage.h"
#include "store/validate.h"

namespace gpupool {
namespace {

// Small appenders: each writes one SQL value followed by nothing.
void Q(std::string* o, std::string_view s) { AppendQuoted(o, s); }
void N(std::string* o, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  o->append(buf, r.ptr);
}
void B(std::string* o, bool b) { o->append(b ? "true" : "false"); }
void Arr(std::string* o, const std::vector<std::string>& v) {
  if (v.empty()) {
    o->append("'{}'::text[]");
    return;
  }
  o->append("ARRAY[");
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) o->push_back(',');
    Q(o, v[i]);
  }
  o->push_back(']');
}
void Pairs(std::string* o, const std::map<std::string, std::string>& m) {
  if (m.empty()) {
    o->append("'{}'::text[]");
    return;
  }
  o->append("ARRAY[");
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) o->push_back(',');
    first = false;
    Q(o, k);
    o->push_back(',');
    Q(o, v);
  }
  o->push_back(']');
}
// Starts a new "(…)" row in a VALUES list.
void Row(std::string* rows) {
  if (!rows->empty()) rows->push_back(',');
  rows->push_back('(');
}
void C(std::string* o) { o->push_back(','); }

void AppendAllocations(std::string* rows, const TaskRecord& t) {
  for (size_t i = 0; i < t.allocations.size(); ++i) {
    const Allocation& a = t.allocations[i];
    Row(rows);
    N(rows, t.job_id), C(rows), N(rows, t.index), C(rows), N(rows, static_cast<int64_t>(i));
    C(rows), Q(rows, a.device_id), C(rows), N(rows, a.amount.milli_tflops), C(rows);
    N(rows, a.amount.vram_mib), C(rows), N(rows, a.slots), C(rows), B(rows, a.exclusive);
    rows->push_back(')');
  }
}

std::vector<std::string> EndpointTexts(const TaskRecord& t) {
  std::vector<std::string> out;
  for (const TaskEndpoint& e : t.endpoints) out.push_back(FormatTaskEndpoint(e));
  return out;
}

// The typed stop and preemption facts of a task, in GP_TASK_COLS order after finished_us.
void AppendStopFacts(std::string* o, const TaskRecord& t) {
  Q(o, ToString(t.stop)), C(o), N(o, t.preempted_by.job_id), C(o);
  N(o, t.preempted_by.index), C(o), Q(o, ToString(t.preempted_by.rule)), C(o);
  B(o, t.preempted_by.reserved);
}

// The number of columns in a column list such as GP_TEMPLATE_COLS.
constexpr int CountColumns(std::string_view cols) {
  int n = 1;
  for (char c : cols) n += c == ',' ? 1 : 0;
  return n;
}
static_assert(CountColumns(GP_TEMPLATE_COLS) == kTemplateColumns);

void Require(std::string* sql, std::string_view condition, std::string_view code,
             const std::string& message) {
  sql->append("SELECT gp_require(");
  sql->append(condition);
  sql->append(", '");
  sql->append(code);
  sql->append("', ");
  Q(sql, message);
  sql->append(");\n");
}

}  // namespace

void AppendTemplateValues(std::string* o, const TaskTemplate& t) {
  const ResourceRequest& r = t.resources;
  Arr(o, t.command), C(o), Pairs(o, t.env), C(o);
  N(o, static_cast<int>(r.shape)), C(o), N(o, r.fractional.milli_tflops), C(o);
  N(o, r.fractional.vram_mib), C(o), N(o, r.gpu_count), C(o), Arr(o, r.models), C(o);
  Q(o, r.mig_profile), C(o), Q(o, r.sku), C(o), N(o, r.cpu_milli), C(o), N(o, r.memory_mib), C(o);
  Q(o, t.image), C(o), Q(o, t.registry_credential), C(o);
  Arr(o, t.entrypoint), C(o), Q(o, t.working_dir), C(o), Pairs(o, t.volumes), C(o);
  std::vector<std::string> ports;
  for (const TaskPort& p : t.ports) ports.push_back(FormatTaskPort(p));
  Arr(o, ports);
}

GroupSql::GroupSql(int64_t epoch, int64_t lease_us, const SecretKeyring* ring) : ring_(ring) {
  sql_.reserve(4096);
  sql_ += "SELECT gp_fence(";
  N(&sql_, epoch);
  sql_ += ',';
  N(&sql_, lease_us);
  sql_ += ");\n";
}

void GroupSql::Add(const Mutation& m) {
  if (const auto* ij = std::get_if<InsertJob>(&m)) return Insert(ij->job);
  if (const auto* ev = std::get_if<AppendEvent>(&m)) return Event(ev->event);
  Flush();
  if (const auto* uj = std::get_if<UpdateJob>(&m)) return Update(*uj);
  if (const auto* ut = std::get_if<UpdateTask>(&m)) return Update(*ut);
  if (const auto* up = std::get_if<UpsertPool>(&m)) return Upsert(up->pool);
  if (const auto* dp = std::get_if<DeletePool>(&m)) return Delete(*dp);
  if (const auto* un = std::get_if<UpsertNode>(&m)) return Upsert(un->node);
  if (const auto* sn = std::get_if<SetNodeState>(&m)) return Set(*sn);
  if (const auto* ut = std::get_if<UpsertTenant>(&m)) return Upsert(ut->tenant);
  if (const auto* dt = std::get_if<DeleteTenant>(&m)) return Delete(*dt);
  if (const auto* sq = std::get_if<SetQuota>(&m)) return Set(sq->quota);
  if (const auto* df = std::get_if<SetDeviceFault>(&m))
    return AppendDeviceFaultSql(&sql_, df->fault);
  if (const auto* ds = std::get_if<SetDeviceSlots>(&m))
    return AppendDeviceSlotsSql(&sql_, ds->slots);
  if (const auto* ml = std::get_if<PutMigLayout>(&m)) return AppendMigLayoutSql(&sql_, ml->layout);
  if (const auto* au = std::get_if<AppendUsage>(&m)) return AppendUsageSql(&sql_, *au);
  if (const auto* ru = std::get_if<RollUpUsage>(&m)) return AppendRollUpSql(&sql_, *ru);
  Delete(std::get<DeleteQuota>(m));
}

Result<std::string> GroupSql::Finish() {
  Flush();
  if (!status_.ok()) return status_;
  return std::move(sql_);
}

void GroupSql::SealedSecrets(const JobRecord& j, std::string* digest_sql, std::string* env_sql) {
  const std::map<std::string, std::string>& env = j.spec.task_template.secret_env;
  if (env.empty()) {
    Pairs(env_sql, env);
    return Q(digest_sql, j.spec.request_digest);
  }
  auto fail = [this](Status st) {
    if (status_.ok()) status_ = std::move(st);
  };
  if (ring_ == nullptr) {
    fail(Status::FailedPrecondition(
        "store: job " + std::to_string(j.id) +
        " has secret env, and this store was opened without a secrets key to seal it"));
    Pairs(env_sql, {});
    return Q(digest_sql, "");
  }
  std::map<std::string, std::string> sealed;
  for (const auto& [name, value] : env) {
    Result<std::string> s = ring_->Seal(value, SecretEnvContext(j.id, name));
    if (!s.ok()) fail(s.status());
    sealed[name] = s.ok() ? *std::move(s) : std::string();
  }
  Pairs(env_sql, sealed);
  if (j.spec.request_digest.empty()) return Q(digest_sql, "");
  Result<std::string> d = ring_->Seal(j.spec.request_digest, RequestDigestContext(j.id));
  if (!d.ok()) fail(d.status());
  Q(digest_sql, d.ok() ? *d : std::string());
}

void GroupSql::Flush() {
  auto insert = [this](const char* table, const char* cols, std::string* rows) {
    if (rows->empty()) return;
    sql_ += "INSERT INTO ";
    sql_ += table;
    sql_ += " (";
    sql_ += cols;
    sql_ += ") VALUES ";
    sql_ += *rows;
    sql_ += ";\n";
    rows->clear();
  };
  if (!job_ids_.empty()) {
    sql_ +=
        "SELECT gp_require(false, 'GPA01', 'job ' || id || ': already exists') FROM jobs "
        "WHERE id IN (";
    sql_ += job_ids_;
    sql_ += ");\n";
    job_ids_.clear();
  }
  if (!idempotency_keys_.empty()) {
    sql_ +=
        "SELECT gp_require(false, 'GPA01', format('tenant ''%s'': idempotency key ''%s'' already "
        "names job %s', tenant, idempotency_key, id)) FROM jobs WHERE (tenant, idempotency_key) "
        "IN (";
    sql_ += idempotency_keys_;
    sql_ += ");\n";
    idempotency_keys_.clear();
  }
  insert("jobs", GP_JOB_COLS, &jobs_);
  insert("tasks", GP_TASK_COLS, &tasks_);
  insert("allocations", GP_ALLOC_COLS, &allocs_);
  insert("events", GP_EVENT_COLS, &events_);
}

void GroupSql::Insert(const JobRecord& j) {
  if (!job_ids_.empty()) job_ids_ += ',';
  N(&job_ids_, j.id);
  const JobSpec& s = j.spec;
  std::string* o = &jobs_;
  Row(o);
  N(o, j.id), C(o), Q(o, s.tenant), C(o), Q(o, s.pool), C(o), Q(o, s.priority_class), C(o);
  N(o, s.task_count), C(o), B(o, s.gang), C(o), B(o, s.preemptible), C(o);
  N(o, s.max_runtime_ms), C(o), N(o, s.max_retries), C(o), Pairs(o, s.labels), C(o);
  AppendTemplateValues(o, s.task_template), C(o);
  Q(o, ToString(j.state)), C(o), Q(o, j.reason), C(o), N(o, j.submit_us), C(o);
  N(o, j.finish_us), C(o), Q(o, s.idempotency_key), C(o);
  std::string digest, secret_env;
  SealedSecrets(j, &digest, &secret_env);
  o->append(digest);
  C(o);
  o->append(secret_env);
  C(o), Q(o, s.submitted_by), C(o), N(o, s.service_id), C(o), N(o, s.service_generation);
  C(o), Q(o, s.service_name);
  o->push_back(')');
  if (!s.idempotency_key.empty()) {
    if (!idempotency_keys_.empty()) idempotency_keys_ += ',';
    idempotency_keys_ += '(';
    Q(&idempotency_keys_, s.tenant), C(&idempotency_keys_),
        Q(&idempotency_keys_, s.idempotency_key);
    idempotency_keys_ += ')';
  }
  for (const TaskRecord& t : j.tasks) {
    o = &tasks_;
    Row(o);
    N(o, j.id), C(o), N(o, t.index), C(o), Q(o, ToString(t.state)), C(o), Q(o, t.node), C(o);
    N(o, t.attempt), C(o), N(o, t.exit_code), C(o), Q(o, t.reason), C(o);
    N(o, t.scheduled_us), C(o), N(o, t.started_us), C(o), N(o, t.finished_us), C(o);
    AppendStopFacts(o, t);
    C(o), N(o, t.usage.cpu_usage_us), C(o), N(o, t.usage.peak_memory_bytes), C(o);
    N(o, t.usage.oom_kills), C(o), N(o, t.usage.spill_mib_seconds), C(o);
    Arr(o, EndpointTexts(t));
    o->push_back(')');
    AppendAllocations(&allocs_, t);
  }
}

void GroupSql::Event(const EventRecord& e) {
  std::string* o = &events_;
  Row(o);
  N(o, e.time_us), C(o), Q(o, e.kind), C(o), Q(o, e.subject), C(o), Q(o, e.message), C(o),
      Q(o, e.tenant);
  o->push_back(')');
}

void GroupSql::Update(const UpdateJob& m) {
  std::string* o = &sql_;
  *o += "WITH u AS (UPDATE jobs SET state=";
  Q(o, ToString(m.state));
  *o += ", reason=";
  Q(o, m.reason);
  *o += ", finish_us=";
  N(o, m.finish_us);
  *o += " WHERE id=";
  N(o, m.job_id);
  *o += " RETURNING 1) ";
  Require(o, "EXISTS (SELECT 1 FROM u)", "GPN01", JobNotFoundMessage(m.job_id));
}

void GroupSql::Update(const UpdateTask& m) {
  const TaskRecord& t = m.task;
  std::string key = "job_id=" + std::to_string(t.job_id) + " AND idx=" + std::to_string(t.index);
  std::string* o = &sql_;
  *o += "WITH u AS (UPDATE tasks SET state=";
  Q(o, ToString(t.state));
  *o += ", node=";
  Q(o, t.node);
  *o += ", attempt=";
  N(o, t.attempt);
  *o += ", exit_code=";
  N(o, t.exit_code);
  *o += ", reason=";
  Q(o, t.reason);
  *o += ", scheduled_us=";
  N(o, t.scheduled_us);
  *o += ", started_us=";
  N(o, t.started_us);
  *o += ", finished_us=";
  N(o, t.finished_us);
  *o += ", stop_intent=";
  Q(o, ToString(t.stop));
  *o += ", preempted_by_job=";
  N(o, t.preempted_by.job_id);
  *o += ", preempted_by_idx=";
  N(o, t.preempted_by.index);
  *o += ", preempt_rule=";
  Q(o, ToString(t.preempted_by.rule));
  *o += ", preempt_reserved=";
  B(o, t.preempted_by.reserved);
  *o += ", usage_cpu_us=";
  N(o, t.usage.cpu_usage_us);
  *o += ", usage_peak_memory_bytes=";
  N(o, t.usage.peak_memory_bytes);
  *o += ", usage_oom_kills=";
  N(o, t.usage.oom_kills);
  *o += ", usage_spill_mib_seconds=";
  N(o, t.usage.spill_mib_seconds);
  *o += ", endpoints=";
  Arr(o, EndpointTexts(t));
  *o += " WHERE " + key + " RETURNING 1) ";
  Require(o, "EXISTS (SELECT 1 FROM u)", "GPN01", TaskNotFoundMessage(t.job_id, t.index));
  *o += "DELETE FROM allocations WHERE " + key + ";\n";
  AppendAllocations(&allocs_, t);
  Flush();
}

void GroupSql::Upsert(const PoolRecord& p) {
  std::string* o = &sql_;
  *o += "INSERT INTO pools (" GP_POOL_COLS ") VALUES (";
  Q(o, p.name), C(o), Q(o, ToString(p.visibility)), C(o), Arr(o, p.allowed_tenants), C(o);
  Q(o, p.placement_strategy), C(o), N(o, p.compute_overcommit.permille), C(o);
  N(o, p.memory_overcommit.permille), C(o), Q(o, ToString(p.sharing_mode)), C(o);
  N(o, p.time_slice_replicas), C(o), N(o, p.create_us), C(o), B(o, p.mps_tenant_isolation), C(o);
  Arr(o, p.required_capabilities), C(o), Q(o, ToString(p.network)), C(o);
  Arr(o, p.pinned_images), C(o), B(o, p.compute_fair), C(o), Q(o, ToString(p.mig_relayout));
  *o +=
      ") ON CONFLICT (name) DO UPDATE SET visibility=EXCLUDED.visibility, "
      "allowed_tenants=EXCLUDED.allowed_tenants, placement_strategy=EXCLUDED.placement_strategy, "
      "compute_permille=EXCLUDED.compute_permille, memory_permille=EXCLUDED.memory_permille, "
      "sharing_mode=EXCLUDED.sharing_mode, time_slice_replicas=EXCLUDED.time_slice_replicas, "
      "create_us=EXCLUDED.create_us, mps_tenant_isolation=EXCLUDED.mps_tenant_isolation, "
      "required_capabilities=EXCLUDED.required_capabilities, network=EXCLUDED.network, "
      "pinned_images=EXCLUDED.pinned_images, compute_fair=EXCLUDED.compute_fair, "
      "mig_relayout=EXCLUDED.mig_relayout;\n";
}

void GroupSql::Delete(const DeletePool& m) {
  std::string name;
  Q(&name, m.name);
  Require(&sql_, "EXISTS (SELECT 1 FROM pools WHERE name=" + name + ")", "GPN01",
          PoolNotFoundMessage(m.name));
  Require(&sql_, "NOT EXISTS (SELECT 1 FROM nodes WHERE pool=" + name + ")", "GPP01",
          PoolHasNodesMessage(m.name));
  sql_ += "DELETE FROM pools WHERE name=" + name + ";\n";
}

void GroupSql::Upsert(const NodeRecord& n) {
  std::string name, pool;
  Q(&name, n.name);
  Q(&pool, n.pool);
  Require(&sql_, "EXISTS (SELECT 1 FROM pools WHERE name=" + pool + ")", "GPN01",
          NodePoolNotFoundMessage(n.name, n.pool));
  std::string* o = &sql_;
  *o += "INSERT INTO nodes (" GP_NODE_COLS ") VALUES (";
  *o += name + "," + pool + ",";
  Q(o, ToString(n.state)), C(o), Pairs(o, n.labels), C(o), N(o, n.cpu_milli), C(o);
  N(o, n.memory_mib), C(o), N(o, n.spill_budget_mib), C(o), N(o, n.last_heartbeat_us), C(o);
  std::vector<std::string> caps;  // flattened: name, "t"/"f", detail, …
  for (const NodeCapabilityRecord& c : n.capabilities) {
    caps.insert(caps.end(), {c.name, c.enforced ? "t" : "f", c.detail});
  }
  Arr(o, caps);
  *o +=
      ") ON CONFLICT (name) DO UPDATE SET pool=EXCLUDED.pool, state=EXCLUDED.state, "
      "labels=EXCLUDED.labels, cpu_milli=EXCLUDED.cpu_milli, memory_mib=EXCLUDED.memory_mib, "
      "spill_budget_mib=EXCLUDED.spill_budget_mib, "
      "last_heartbeat_us=EXCLUDED.last_heartbeat_us, capabilities=EXCLUDED.capabilities;\n";
  *o +=
      "DELETE FROM devices WHERE node=" + name + ";\nDELETE FROM links WHERE node=" + name + ";\n";
  if (!n.devices.empty()) {
    *o += "INSERT INTO devices (" GP_DEVICE_COLS ") VALUES ";
    for (size_t i = 0; i < n.devices.size(); ++i) {
      const DeviceRecord& d = n.devices[i];
      if (i > 0) *o += ',';
      *o += '(' + name + ',';
      N(o, static_cast<int64_t>(i)), C(o), Q(o, d.id), C(o), Q(o, d.model), C(o);
      N(o, d.index), C(o), N(o, d.physical.milli_tflops), C(o), N(o, d.physical.vram_mib);
      C(o), Q(o, d.mig_profile), C(o), Q(o, d.parent_id), C(o), B(o, d.healthy), C(o);
      N(o, d.numa_node), C(o), N(o, d.time_slice_slots), C(o), N(o, d.mig_start), C(o);
      B(o, d.mig_enabled);
      *o += ')';
    }
    *o += ";\n";
  }
  if (!n.links.empty()) {
    *o += "INSERT INTO links (" GP_LINK_COLS ") VALUES ";
    for (size_t i = 0; i < n.links.size(); ++i) {
      const LinkRecord& l = n.links[i];
      if (i > 0) *o += ',';
      *o += '(' + name + ',';
      N(o, static_cast<int64_t>(i)), C(o), N(o, l.a), C(o), N(o, l.b), C(o);
      N(o, static_cast<int>(l.kind)), C(o), N(o, l.bandwidth_gbps);
      *o += ')';
    }
    *o += ";\n";
  }
}

void GroupSql::Set(const SetNodeState& m) {
  std::string* o = &sql_;
  *o += "WITH u AS (UPDATE nodes SET state=";
  Q(o, ToString(m.state));
  *o += " WHERE name=";
  Q(o, m.name);
  *o += " RETURNING 1) ";
  Require(o, "EXISTS (SELECT 1 FROM u)", "GPN01", NodeNotFoundMessage(m.name));
}

void GroupSql::Upsert(const TenantRecord& t) {
  std::string* o = &sql_;
  *o += "INSERT INTO tenants (path, create_us) VALUES (";
  Q(o, t.path), C(o), N(o, t.create_us);
  *o += ") ON CONFLICT (path) DO UPDATE SET create_us=EXCLUDED.create_us;\n";
}

void GroupSql::Delete(const DeleteTenant& m) {
  std::string* o = &sql_;
  *o += "WITH d AS (DELETE FROM tenants WHERE path=";  // quotas go with it (ON DELETE CASCADE)
  Q(o, m.path);
  *o += " RETURNING 1) ";
  Require(o, "EXISTS (SELECT 1 FROM d)", "GPN01", TenantNotFoundMessage(m.path));
}

void GroupSql::Set(const QuotaRecord& q) {
  std::string tenant;
  Q(&tenant, q.tenant);
  Require(&sql_, "EXISTS (SELECT 1 FROM tenants WHERE path=" + tenant + ")", "GPN01",
          TenantNotFoundMessage(q.tenant));
  std::string* o = &sql_;
  *o += "INSERT INTO quotas (" GP_QUOTA_COLS ") VALUES (" + tenant + ",";
  Q(o, q.pool), C(o), N(o, q.guaranteed.resources.milli_tflops), C(o);
  N(o, q.guaranteed.resources.vram_mib), C(o), N(o, q.guaranteed.devices), C(o);
  N(o, q.limit.resources.milli_tflops), C(o), N(o, q.limit.resources.vram_mib), C(o);
  N(o, q.limit.devices);
  *o +=
      ") ON CONFLICT (tenant, pool) DO UPDATE SET "
      "guaranteed_milli_tflops=EXCLUDED.guaranteed_milli_tflops, "
      "guaranteed_vram_mib=EXCLUDED.guaranteed_vram_mib, "
      "guaranteed_devices=EXCLUDED.guaranteed_devices, "
      "limit_milli_tflops=EXCLUDED.limit_milli_tflops, limit_vram_mib=EXCLUDED.limit_vram_mib, "
      "limit_devices=EXCLUDED.limit_devices;\n";
}

void GroupSql::Delete(const DeleteQuota& m) {
  std::string* o = &sql_;
  *o += "WITH d AS (DELETE FROM quotas WHERE tenant=";
  Q(o, m.tenant);
  *o += " AND pool=";
  Q(o, m.pool);
  *o += " RETURNING 1) ";
  Require(o, "EXISTS (SELECT 1 FROM d)", "GPN01", QuotaNotFoundMessage(m.tenant, m.pool));
}

}  // namespace gpupool
