// The read half of pg_sql.h: SELECT lists and rows → domain records.
#include <pqxx/pqxx>

#include "store/pg_columns.h"
#include "store/pg_secrets.h"
#include "store/pg_sql.h"

namespace gpupool {

// Text keys sort bytewise (COLLATE "C") whatever the database's locale, as MemoryStore's maps do.
const char* const kSelectPools = "SELECT " GP_POOL_COLS " FROM pools ORDER BY name COLLATE \"C\"";
const char* const kSelectNodes = "SELECT " GP_NODE_COLS " FROM nodes ORDER BY name COLLATE \"C\"";
const char* const kSelectTenants =
    "SELECT path, create_us FROM tenants ORDER BY path COLLATE \"C\"";
const char* const kSelectQuotas =
    "SELECT " GP_QUOTA_COLS " FROM quotas ORDER BY tenant COLLATE \"C\", pool COLLATE \"C\"";
const char* const kSelectDevices = "SELECT " GP_DEVICE_COLS " FROM devices ORDER BY node, pos";
const char* const kSelectLinks = "SELECT " GP_LINK_COLS " FROM links ORDER BY node, pos";
const char* const kSelectJobs = "SELECT " GP_JOB_COLS " FROM jobs ORDER BY id";
const char* const kSelectTasks = "SELECT " GP_TASK_COLS " FROM tasks ORDER BY job_id, idx";
const char* const kSelectAllocations =
    "SELECT " GP_ALLOC_COLS " FROM allocations ORDER BY job_id, idx, pos";

std::vector<std::string> TextArray(const pqxx::field& f) {
  std::vector<std::string> out;
  if (f.is_null()) return out;
  pqxx::array_parser parser = f.as_array();
  for (;;) {
    auto [kind, value] = parser.get_next();
    if (kind == pqxx::array_parser::done) break;
    if (kind == pqxx::array_parser::string_value) out.push_back(std::move(value));
    if (kind == pqxx::array_parser::null_value) out.emplace_back();
  }
  return out;
}

namespace {

std::map<std::string, std::string> PairMap(const pqxx::field& f) {
  std::vector<std::string> flat = TextArray(f);
  std::map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) out[flat[i]] = flat[i + 1];
  return out;
}

template <typename E>
Result<E> Enum(const pqxx::field& f, std::optional<E> (*parse)(std::string_view),
               std::string_view what) {
  std::optional<E> v = parse(f.c_str());
  if (!v) {
    return Status::Internal("store: unknown " + std::string(what) + " '" + f.c_str() +
                            "' in the database");
  }
  return *v;
}

}  // namespace

Result<TaskTemplate> ReadTemplate(const pqxx::row& r, int first, const std::string& what) {
  auto f = [&](int i) { return r[static_cast<pqxx::row::size_type>(first + i)]; };
  TaskTemplate t;
  ResourceRequest& q = t.resources;
  t.command = TextArray(f(0));
  t.env = PairMap(f(1));
  q.shape = static_cast<RequestShape>(f(2).as<int>());
  q.fractional = Resources{f(3).as<int64_t>(), f(4).as<int64_t>()};
  q.gpu_count = f(5).as<int32_t>();
  q.models = TextArray(f(6));
  q.mig_profile = f(7).c_str();
  q.sku = f(8).c_str();
  q.cpu_milli = f(9).as<int64_t>();
  q.memory_mib = f(10).as<int64_t>();
  t.image = f(11).c_str();
  t.registry_credential = f(12).c_str();
  t.entrypoint = TextArray(f(13));
  t.working_dir = f(14).c_str();
  t.volumes = PairMap(f(15));
  for (const std::string& text : TextArray(f(16))) {
    Result<TaskPort> port = ParseTaskPort(text);
    if (!port.ok()) return Status::Internal(what + ": " + port.status().message());
    t.ports.push_back(*port);
  }
  static_assert(kTemplateColumns == 17, "ReadTemplate reads every template column");
  return t;
}

Result<std::vector<PoolRecord>> ReadPools(const pqxx::result& rows) {
  std::vector<PoolRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    PoolRecord p;
    p.name = r[0].c_str();
    GPUPOOL_ASSIGN_OR_RETURN(p.visibility, Enum(r[1], &ParseVisibility, "visibility"));
    p.allowed_tenants = TextArray(r[2]);
    p.placement_strategy = r[3].c_str();
    p.compute_overcommit.permille = r[4].as<int64_t>();
    p.memory_overcommit.permille = r[5].as<int64_t>();
    GPUPOOL_ASSIGN_OR_RETURN(p.sharing_mode, Enum(r[6], &ParseSharingMode, "sharing mode"));
    p.time_slice_replicas = r[7].as<int32_t>();
    p.create_us = r[8].as<int64_t>();
    p.mps_tenant_isolation = r[9].as<bool>();
    p.required_capabilities = TextArray(r[10]);
    GPUPOOL_ASSIGN_OR_RETURN(p.network, Enum(r[11], &ParseTaskNetwork, "network"));
    p.pinned_images = TextArray(r[12]);
    p.compute_fair = r[13].as<bool>();
    GPUPOOL_ASSIGN_OR_RETURN(p.mig_relayout, Enum(r[14], &ParseMigRelayout, "MIG re-layout"));
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<NodeRecord>> ReadNodes(const pqxx::result& nodes, const pqxx::result& devices,
                                          const pqxx::result& links) {
  std::vector<NodeRecord> out;
  out.reserve(nodes.size());
  std::map<std::string, size_t> by_name;
  for (const auto& r : nodes) {
    NodeRecord n;
    n.name = r[0].c_str();
    n.pool = r[1].c_str();
    GPUPOOL_ASSIGN_OR_RETURN(n.state, Enum(r[2], &ParseNodeState, "node state"));
    n.labels = PairMap(r[3]);
    n.cpu_milli = r[4].as<int64_t>();
    n.memory_mib = r[5].as<int64_t>();
    n.spill_budget_mib = r[6].as<int64_t>();
    n.last_heartbeat_us = r[7].as<int64_t>();
    const std::vector<std::string> caps = TextArray(r[8]);  // name, "t"/"f", detail, …
    for (size_t i = 0; i + 2 < caps.size(); i += 3) {
      n.capabilities.push_back({caps[i], caps[i + 1] == "t", caps[i + 2]});
    }
    by_name[n.name] = out.size();
    out.push_back(std::move(n));
  }
  for (const auto& r : devices) {
    auto it = by_name.find(r[0].c_str());
    if (it == by_name.end()) continue;
    DeviceRecord d;
    d.id = r[2].c_str();
    d.model = r[3].c_str();
    d.index = r[4].as<int32_t>();
    d.physical = Resources{r[5].as<int64_t>(), r[6].as<int64_t>()};
    d.mig_profile = r[7].c_str();
    d.parent_id = r[8].c_str();
    d.healthy = r[9].as<bool>();
    d.numa_node = r[10].as<int32_t>();
    d.time_slice_slots = r[11].as<int32_t>();
    d.mig_start = r[12].as<int32_t>();
    d.mig_enabled = r[13].as<bool>();
    out[it->second].devices.push_back(std::move(d));
  }
  for (const auto& r : links) {
    auto it = by_name.find(r[0].c_str());
    if (it == by_name.end()) continue;
    LinkRecord l;
    l.a = r[2].as<int32_t>();
    l.b = r[3].as<int32_t>();
    l.kind = static_cast<LinkKind>(r[4].as<int>());
    l.bandwidth_gbps = r[5].as<int32_t>();
    out[it->second].links.push_back(l);
  }
  return out;
}

Result<std::vector<JobRecord>> ReadJobs(const pqxx::result& jobs, const pqxx::result& tasks,
                                        const pqxx::result& allocations, const SecretKeyring* ring,
                                        JobSecrets secrets) {
  std::vector<JobRecord> out;
  out.reserve(jobs.size());
  for (const auto& r : jobs) {
    JobRecord j;
    JobSpec& s = j.spec;
    j.id = r[0].as<int64_t>();
    const std::string job = "job " + std::to_string(j.id);
    s.tenant = r[1].c_str();
    s.pool = r[2].c_str();
    s.priority_class = r[3].c_str();
    s.task_count = r[4].as<int32_t>();
    s.gang = r[5].as<bool>();
    s.preemptible = r[6].as<bool>();
    s.max_runtime_ms = r[7].as<int64_t>();
    s.max_retries = r[8].as<int32_t>();
    s.labels = PairMap(r[9]);
    GPUPOOL_ASSIGN_OR_RETURN(s.task_template, ReadTemplate(r, 10, job));
    constexpr int k = 10 + kTemplateColumns;  // the columns after the template
    GPUPOOL_ASSIGN_OR_RETURN(j.state, Enum(r[k], &ParseJobState, "job state"));
    j.reason = r[k + 1].c_str();
    j.submit_us = r[k + 2].as<int64_t>();
    j.finish_us = r[k + 3].as<int64_t>();
    s.idempotency_key = r[k + 4].c_str();
    s.request_digest = r[k + 5].c_str();
    if (secrets == JobSecrets::kOpen) {
      for (auto& [name, value] : PairMap(r[k + 6])) {
        GPUPOOL_ASSIGN_OR_RETURN(
            s.task_template.secret_env[name],
            OpenStored(ring, value, SecretEnvContext(j.id, name), job + " secret env " + name));
      }
      GPUPOOL_ASSIGN_OR_RETURN(
          s.request_digest,
          OpenStored(ring, s.request_digest, RequestDigestContext(j.id), job + " request digest"));
    }
    s.submitted_by = r[k + 7].c_str();
    s.service_id = r[k + 8].as<int64_t>();
    s.service_generation = r[k + 9].as<int64_t>();
    s.service_name = r[k + 10].c_str();
    out.push_back(std::move(j));
  }
  // Tasks and allocations come sorted by (job_id, idx[, pos]); walk them alongside the jobs.
  size_t ji = 0;
  for (const auto& r : tasks) {
    int64_t job_id = r[0].as<int64_t>();
    while (ji < out.size() && out[ji].id < job_id) ++ji;
    if (ji == out.size() || out[ji].id != job_id) continue;
    TaskRecord t;
    t.job_id = job_id;
    t.index = r[1].as<int32_t>();
    GPUPOOL_ASSIGN_OR_RETURN(t.state, Enum(r[2], &ParseTaskState, "task state"));
    t.node = r[3].c_str();
    t.attempt = r[4].as<int32_t>();
    t.exit_code = r[5].as<int32_t>();
    t.reason = r[6].c_str();
    t.scheduled_us = r[7].as<int64_t>();
    t.started_us = r[8].as<int64_t>();
    t.finished_us = r[9].as<int64_t>();
    GPUPOOL_ASSIGN_OR_RETURN(t.stop, Enum(r[10], &ParseStopIntent, "stop intent"));
    t.preempted_by.job_id = r[11].as<int64_t>();
    t.preempted_by.index = r[12].as<int32_t>();
    GPUPOOL_ASSIGN_OR_RETURN(t.preempted_by.rule,
                             Enum(r[13], &ParsePreemptRule, "preemption rule"));
    t.preempted_by.reserved = r[14].as<bool>();
    t.usage = {r[15].as<int64_t>(), r[16].as<int64_t>(), r[17].as<int64_t>(), r[18].as<int64_t>()};
    for (const std::string& text : TextArray(r[19])) {
      auto endpoint = ParseTaskEndpoint(text);
      if (!endpoint.ok()) {
        return Status::Internal("task " + std::to_string(job_id) + "." + std::to_string(t.index) +
                                ": " + endpoint.status().message());
      }
      t.endpoints.push_back(*endpoint);
    }
    out[ji].tasks.push_back(std::move(t));
  }
  ji = 0;
  size_t ti = 0;
  for (const auto& r : allocations) {
    int64_t job_id = r[0].as<int64_t>();
    int32_t idx = r[1].as<int32_t>();
    while (ji < out.size() && out[ji].id < job_id) ++ji, ti = 0;
    if (ji == out.size() || out[ji].id != job_id) continue;
    auto& ts = out[ji].tasks;
    while (ti < ts.size() && ts[ti].index < idx) ++ti;
    if (ti == ts.size() || ts[ti].index != idx) continue;
    Allocation a;
    a.device_id = r[3].c_str();
    a.amount = Resources{r[4].as<int64_t>(), r[5].as<int64_t>()};
    a.slots = r[6].as<int32_t>();
    a.exclusive = r[7].as<bool>();
    ts[ti].allocations.push_back(std::move(a));
  }
  return out;
}

std::vector<TenantRecord> ReadTenants(const pqxx::result& rows) {
  std::vector<TenantRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(TenantRecord{r[0].c_str(), r[1].as<int64_t>()});
  return out;
}

std::vector<QuotaRecord> ReadQuotas(const pqxx::result& rows) {
  std::vector<QuotaRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    QuotaRecord q;
    q.tenant = r[0].c_str();
    q.pool = r[1].c_str();
    q.guaranteed.resources = Resources{r[2].as<int64_t>(), r[3].as<int64_t>()};
    q.guaranteed.devices = r[4].as<int32_t>();
    q.limit.resources = Resources{r[5].as<int64_t>(), r[6].as<int64_t>()};
    q.limit.devices = r[7].as<int32_t>();
    out.push_back(std::move(q));
  }
  return out;
}

std::vector<EventRecord> ReadEvents(const pqxx::result& rows) {
  std::vector<EventRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    out.push_back(
        EventRecord{r[0].as<int64_t>(), r[1].c_str(), r[2].c_str(), r[3].c_str(), r[4].c_str()});
  }
  return out;
}

}  // namespace gpupool
