#include "store/validate.h"

#include <set>
#include <string_view>

namespace gpupool {
namespace {

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

class TextChecker {
 public:
  void operator()(std::string_view field, const std::string& text) {
    if (status_.ok() && !ValidUtf8(text)) {
      status_ = Status::InvalidArgument(std::string(prefix_) + std::string(field) +
                                        ": text must be UTF-8 without NUL bytes");
    }
  }
  void operator()(std::string_view field, const std::vector<std::string>& list) {
    for (const auto& s : list) (*this)(field, s);
  }
  void operator()(std::string_view field, const std::map<std::string, std::string>& map) {
    for (const auto& [k, v] : map) {
      (*this)(field, k);
      (*this)(field, v);
    }
  }
  const Status& status() const { return status_; }
  // Names given from now on are reported as `prefix` + name (a literal: it is not copied).
  void set_prefix(std::string_view prefix) { prefix_ = prefix; }

 private:
  Status status_;
  std::string_view prefix_;
};

// A task template's text, reported as "<prefix>.command", "<prefix>.image", … (secret_env aside:
// jobs keep it, services do not).
void CheckTemplate(const TaskTemplate& tt, std::string_view prefix, TextChecker& t) {
  t.set_prefix(prefix);
  t(".command", tt.command);
  t(".env", tt.env);
  t(".image", tt.image);
  t(".registry_credential", tt.registry_credential);
  t(".entrypoint", tt.entrypoint);
  t(".working_dir", tt.working_dir);
  t(".volumes", tt.volumes);
  t(".models", tt.resources.models);
  t(".mig_profile", tt.resources.mig_profile);
  t(".sku", tt.resources.sku);
  t.set_prefix("");
}

void CheckJob(const JobRecord& j, TextChecker& t) {
  t("job.tenant", j.spec.tenant);
  t("job.pool", j.spec.pool);
  t("job.priority_class", j.spec.priority_class);
  t("job.labels", j.spec.labels);
  CheckTemplate(j.spec.task_template, "job", t);
  t("job.secret_env", j.spec.task_template.secret_env);
  t("job.idempotency_key", j.spec.idempotency_key);
  t("job.request_digest", j.spec.request_digest);
  t("job.submitted_by", j.spec.submitted_by);
  t("job.service_name", j.spec.service_name);
  t("job.reason", j.reason);
}

void CheckTask(const TaskRecord& task, TextChecker& t) {
  t("task.node", task.node);
  t("task.reason", task.reason);
  for (const auto& a : task.allocations) t("allocation.device_id", a.device_id);
  for (const auto& e : task.endpoints) t("task.endpoints", e.host);
}

Status CheckInsertJob(const JobRecord& j, TextChecker& t) {
  std::string job = "job " + std::to_string(j.id);
  if (j.id <= 0) return Status::InvalidArgument(job + ": id must be positive");
  std::set<int32_t> seen;
  for (const auto& task : j.tasks) {
    if (task.job_id != j.id) {
      return Status::InvalidArgument(job + ": task " + std::to_string(task.index) + " has job_id " +
                                     std::to_string(task.job_id));
    }
    if (task.index < 0 || !seen.insert(task.index).second) {
      return Status::InvalidArgument(job + ": task index " + std::to_string(task.index) +
                                     " is negative or repeated");
    }
    CheckTask(task, t);
  }
  if (j.spec.service_id < 0 || j.spec.service_generation < 0) {
    return Status::InvalidArgument(job + ": service id and generation must not be negative");
  }
  CheckJob(j, t);
  GPUPOOL_RETURN_IF_ERROR(CheckTaskPorts(j.spec.task_template.ports, "job.ports"));
  return Status::Ok();
}

Status CheckNode(const NodeRecord& n, TextChecker& t) {
  if (n.name.empty()) return Status::InvalidArgument("node: name must not be empty");
  t("node.name", n.name);
  t("node.pool", n.pool);
  t("node.labels", n.labels);
  std::set<std::string> ids;
  for (const auto& d : n.devices) {
    if (d.id.empty() || !ids.insert(d.id).second) {
      return Status::InvalidArgument("node '" + n.name + "': device id '" + d.id +
                                     "' is empty or repeated");
    }
    t("device.id", d.id);
    t("device.model", d.model);
    t("device.mig_profile", d.mig_profile);
    t("device.parent_id", d.parent_id);
  }
  for (const NodeCapabilityRecord& c : n.capabilities) {
    t("node.capabilities.name", c.name);
    t("node.capabilities.detail", c.detail);
  }
  return Status::Ok();
}

Status CheckUsage(const AppendUsage& m, TextChecker& t) {
  for (const UsageInterval& u : m.intervals) {
    const std::string key = "usage interval " + TaskId(u.job_id, u.task_index) + " attempt " +
                            std::to_string(u.attempt) + " at " + std::to_string(u.start_us);
    if (u.job_id <= 0 || u.task_index < 0 || u.attempt < 0 || u.start_us < 0) {
      return Status::InvalidArgument(key +
                                     ": job id must be positive, index, attempt and start "
                                     "not negative");
    }
    if (u.end_us < u.start_us || (u.end_us == u.start_us && u.end == AttemptEnd::kNone)) {
      return Status::InvalidArgument(key + ": end " + std::to_string(u.end_us) +
                                     " is not after its start (only an attempt's last interval "
                                     "may be empty)");
    }
    t("usage.tenant", u.tenant);
    t("usage.pool", u.pool);
    t("usage.node", u.node);
    t("usage.model", u.model);
    t("usage.priority_class", u.priority_class);
    t("usage.mig_profile", u.mig_profile);
    t("usage.service", u.service);
  }
  return Status::Ok();
}

Status CheckOne(const Mutation& m, TextChecker& t) {
  if (const auto* ij = std::get_if<InsertJob>(&m)) return CheckInsertJob(ij->job, t);
  if (const auto* uj = std::get_if<UpdateJob>(&m)) {
    if (uj->job_id <= 0) return Status::InvalidArgument("update job: job id must be positive");
    t("job.reason", uj->reason);
    return Status::Ok();
  }
  if (const auto* ut = std::get_if<UpdateTask>(&m)) {
    if (ut->task.job_id <= 0)
      return Status::InvalidArgument("update task: job id must be positive");
    CheckTask(ut->task, t);
    return Status::Ok();
  }
  if (const auto* up = std::get_if<UpsertPool>(&m)) {
    if (up->pool.name.empty()) return Status::InvalidArgument("pool: name must not be empty");
    t("pool.name", up->pool.name);
    t("pool.allowed_tenants", up->pool.allowed_tenants);
    t("pool.placement_strategy", up->pool.placement_strategy);
    t("pool.pinned_images", up->pool.pinned_images);
    return Status::Ok();
  }
  if (const auto* dp = std::get_if<DeletePool>(&m)) {
    if (dp->name.empty()) return Status::InvalidArgument("pool: name must not be empty");
    t("pool.name", dp->name);
    return Status::Ok();
  }
  if (const auto* un = std::get_if<UpsertNode>(&m)) return CheckNode(un->node, t);
  if (const auto* sn = std::get_if<SetNodeState>(&m)) {
    if (sn->name.empty()) return Status::InvalidArgument("node: name must not be empty");
    t("node.name", sn->name);
    return Status::Ok();
  }
  if (const auto* ut = std::get_if<UpsertTenant>(&m)) {
    if (ut->tenant.path.empty()) return Status::InvalidArgument("tenant: path must not be empty");
    t("tenant.path", ut->tenant.path);
    return Status::Ok();
  }
  if (const auto* dt = std::get_if<DeleteTenant>(&m)) {
    if (dt->path.empty()) return Status::InvalidArgument("tenant: path must not be empty");
    t("tenant.path", dt->path);
    return Status::Ok();
  }
  if (const auto* sq = std::get_if<SetQuota>(&m)) {
    if (sq->quota.tenant.empty() || sq->quota.pool.empty()) {
      return Status::InvalidArgument("quota: tenant and pool must not be empty");
    }
    t("quota.tenant", sq->quota.tenant);
    t("quota.pool", sq->quota.pool);
    return Status::Ok();
  }
  if (const auto* dq = std::get_if<DeleteQuota>(&m)) {
    if (dq->tenant.empty() || dq->pool.empty()) {
      return Status::InvalidArgument("quota: tenant and pool must not be empty");
    }
    t("quota.tenant", dq->tenant);
    t("quota.pool", dq->pool);
    return Status::Ok();
  }
  if (const auto* df = std::get_if<SetDeviceFault>(&m)) {
    const DeviceFaultRecord& f = df->fault;
    if (f.node.empty() || f.device.empty()) {
      return Status::InvalidArgument("device fault: node and device must not be empty");
    }
    if (f.fault_id <= 0) return Status::InvalidArgument("device fault: fault_id must be > 0");
    t("device_fault.node", f.node);
    t("device_fault.device", f.device);
    t("device_fault.reason", f.reason);
    t("device_fault.cleared_by", f.cleared_by);
    return Status::Ok();
  }
  if (const auto* ds = std::get_if<SetDeviceSlots>(&m)) {
    const DeviceSlotsRecord& s = ds->slots;
    if (s.node.empty() || s.device.empty())
      return Status::InvalidArgument("device slots: node and device must not be empty");
    if (s.slots < 0 || s.slots > kMaxDeviceSlots)
      return Status::InvalidArgument("device slots: slots " + std::to_string(s.slots) +
                                     " outside 0.." + std::to_string(kMaxDeviceSlots));
    t("device_slots.node", s.node);
    t("device_slots.device", s.device);
    t("device_slots.set_by", s.set_by);
    return Status::Ok();
  }
  if (const auto* ml = std::get_if<PutMigLayout>(&m)) {
    const MigLayoutRecord& l = ml->layout;
    if (l.node.empty() || l.gpu.empty())
      return Status::InvalidArgument("MIG layout: node and gpu must not be empty");
    if (l.generation <= 0) return Status::InvalidArgument("MIG layout: generation must be > 0");
    t("mig_layout.node", l.node);
    t("mig_layout.gpu", l.gpu);
    t("mig_layout.layout", l.layout);
    t("mig_layout.reason", l.reason);
    t("mig_layout.set_by", l.set_by);
    return Status::Ok();
  }
  if (const auto* au = std::get_if<AppendUsage>(&m)) return CheckUsage(*au, t);
  if (const auto* ru = std::get_if<RollUpUsage>(&m)) {
    if (ru->before_us <= 0 || ru->before_us % (24LL * 3600 * 1'000'000) != 0) {
      return Status::InvalidArgument("roll up usage: before_us " + std::to_string(ru->before_us) +
                                     " is not a UTC midnight after 1970-01-01");
    }
    return Status::Ok();
  }
  const auto& ev = std::get<AppendEvent>(m).event;
  t("event.kind", ev.kind);
  t("event.subject", ev.subject);
  t("event.message", ev.message);
  t("event.tenant", ev.tenant);
  return Status::Ok();
}

}  // namespace

Status ValidateBatch(const std::vector<Mutation>& batch) {
  TextChecker text;
  for (const Mutation& m : batch) {
    GPUPOOL_RETURN_IF_ERROR(CheckOne(m, text));
    GPUPOOL_RETURN_IF_ERROR(text.status());
  }
  return Status::Ok();
}

std::string JobExistsMessage(int64_t id) {
  return "job " + std::to_string(id) + ": already exists";
}
std::string JobNotFoundMessage(int64_t id) { return "job " + std::to_string(id) + ": not found"; }
std::string TaskNotFoundMessage(int64_t job_id, int32_t index) {
  return "task " + TaskId(job_id, index) + ": not found";
}
std::string PoolNotFoundMessage(const std::string& pool) {
  return "pool '" + pool + "': not found";
}
std::string PoolHasNodesMessage(const std::string& pool) {
  return "pool '" + pool + "': still has nodes";
}
std::string NodeNotFoundMessage(const std::string& node) {
  return "node '" + node + "': not found";
}
std::string NodePoolNotFoundMessage(const std::string& node, const std::string& pool) {
  return "node '" + node + "': pool '" + pool + "' not found";
}
std::string TenantNotFoundMessage(const std::string& tenant) {
  return "tenant '" + tenant + "': not found";
}
std::string QuotaNotFoundMessage(const std::string& tenant, const std::string& pool) {
  return "quota of tenant '" + tenant + "' in pool '" + pool + "': not found";
}

std::string IdempotencyKeyUsedMessage(const std::string& tenant, const std::string& key,
                                      int64_t job_id) {
  return "tenant '" + tenant + "': idempotency key '" + key + "' already names job " +
         std::to_string(job_id);
}

Status ValidateAuditRecords(const std::vector<AuditRecord>& records) {
  TextChecker t;
  for (const AuditRecord& r : records) {
    t("audit.key_id", r.key_id);
    t("audit.principal", r.principal);
    t("audit.role", r.role);
    t("audit.tenant", r.tenant);
    t("audit.verb", r.verb);
    t("audit.resource", r.resource);
    t("audit.message", r.message);
    t("audit.request_id", r.request_id);
    t("audit.source", r.source);
  }
  return t.status();
}

Status ValidateAuditQuery(const AuditQuery& q) {
  if (q.limit < 1 || q.limit > 1000) {
    return Status::InvalidArgument("audit query: limit must be 1..1000, got " +
                                   std::to_string(q.limit));
  }
  if (q.code < -1 || q.code > 16) {
    return Status::InvalidArgument("audit query: code must be a gRPC code 0..16");
  }
  TextChecker t;
  t("audit query: principal", q.principal);
  t("audit query: verb", q.verb);
  t("audit query: resource", q.resource);
  t("audit query: tenant", q.tenant_subtree);
  return t.status();
}

bool AuditMatches(const AuditRecord& r, const AuditQuery& q) {
  if (!q.principal.empty() && r.principal != q.principal) return false;
  if (!q.verb.empty() && r.verb != q.verb) return false;
  if (!r.resource.starts_with(q.resource)) return false;
  if (q.code >= 0 && r.code != q.code) return false;
  if (q.since_us != 0 && r.time_us < q.since_us) return false;
  if (q.until_us != 0 && r.time_us >= q.until_us) return false;
  if (!q.tenant_subtree.empty() && r.tenant != q.tenant_subtree &&
      !r.tenant.starts_with(q.tenant_subtree + "/")) {
    return false;
  }
  return true;
}

Status ValidatePricePlanRecord(const billing::PricePlan& plan) {
  GPUPOOL_RETURN_IF_ERROR(billing::ValidatePricePlan(plan));
  TextChecker t;
  t("plan.description", plan.description);
  t("plan.created_by", plan.created_by);
  for (const billing::PriceRate& r : plan.rates) {
    t("plan.rates.pool", r.pool);
    t("plan.rates.model", r.model);
    t("plan.rates.mig_profile", r.mig_profile);
  }
  for (const auto& [cls, m] : plan.priority_multipliers) t("plan.priority_multipliers", cls);
  return t.status();
}

Result<int64_t> NextPricePlanVersion(const std::vector<const billing::PricePlan*>& existing,
                                     const billing::PricePlan& plan, bool create) {
  const billing::PricePlan* latest = nullptr;
  for (const billing::PricePlan* p : existing) {
    if (latest == nullptr || p->version > latest->version) latest = p;
  }
  if (create) {
    if (latest != nullptr) {
      return Status::AlreadyExists("price plan '" + plan.name + "': already exists (version " +
                                   std::to_string(latest->version) + "); update it instead");
    }
    return 1;
  }
  if (latest == nullptr) return Status::NotFound("price plan '" + plan.name + "': not found");
  if (plan.effective_from_ms < latest->effective_from_ms) {
    return Status::FailedPrecondition("price plan '" + plan.name +
                                      "': a new version may not take effect before version " +
                                      std::to_string(latest->version) + " does");
  }
  return latest->version + 1;
}

}  // namespace gpupool

namespace gpupool {

Status ValidateUsageQuery(const UsageQuery& q) {
  if (q.from_us < 0 || q.to_us < 0) {
    return Status::InvalidArgument("usage query: from and to must not be negative");
  }
  if (q.to_us != 0 && q.to_us <= q.from_us) {
    return Status::InvalidArgument("usage query: to (" + std::to_string(q.to_us) +
                                   ") must be after from (" + std::to_string(q.from_us) + ")");
  }
  if (q.tenant_depth < 0) {
    return Status::InvalidArgument("usage query: tenant_depth must not be negative");
  }
  TextChecker t;
  t("usage query: tenant", q.tenant);
  t("usage query: pool", q.pool);
  t("usage query: model", q.model);
  t("usage query: priority_class", q.priority_class);
  return t.status();
}

bool UsageMatches(const UsageInterval& u, const UsageQuery& q) {
  if (u.start_us < q.from_us) return false;
  if (q.to_us != 0 && u.start_us >= q.to_us) return false;
  if (!q.pool.empty() && u.pool != q.pool) return false;
  if (!q.model.empty() && u.model != q.model) return false;
  if (!q.priority_class.empty() && u.priority_class != q.priority_class) return false;
  if (!q.tenant.empty() && u.tenant != q.tenant && !u.tenant.starts_with(q.tenant + "/")) {
    return false;
  }
  return true;
}

Status ValidateNodeEnrolment(const NodeEnrolment& e) {
  if (e.node.empty()) return Status::InvalidArgument("node enrolment: the node name is empty");
  if (e.serial_hex.empty()) {
    return Status::InvalidArgument("node enrolment of '" + e.node + "': the serial is empty");
  }
  return Status::Ok();
}

Status ValidateJoinToken(const JoinTokenRecord& t) {
  auto hex = [](const std::string& s, size_t n) {
    return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string::npos;
  };
  if (!hex(t.id, 12)) return Status::InvalidArgument("join token: the id must be 12 hex digits");
  if (!hex(t.secret_sha256, 64)) {
    return Status::InvalidArgument("join token " + t.id + ": the digest must be 64 hex digits");
  }
  if (t.expire_ms < 0 || t.max_uses < 0 || t.uses < 0) {
    return Status::InvalidArgument("join token " + t.id + ": negative expiry or use count");
  }
  for (const std::string* s : {&t.note, &t.created_by, &t.last_node}) {
    if (!ValidUtf8(*s) || s->find('\0') != std::string::npos || s->size() > 1024) {
      return Status::InvalidArgument("join token " + t.id +
                                     ": a text field is not UTF-8, holds NUL or is too long");
    }
  }
  return Status::Ok();
}

Status ValidateRegistryCredential(const RegistryCredentialRecord& c) {
  const std::string what = "registry credential " + c.tenant + "/" + c.name;
  if (c.tenant.empty()) return Status::InvalidArgument(what + ": no tenant");
  GPUPOOL_RETURN_IF_ERROR(CheckRegistryCredentialName(c.name, what + ": name"));
  if (c.registry.empty() || c.username.empty() || c.password.empty()) {
    return Status::InvalidArgument(what + ": registry, user name and secret are required");
  }
  for (const std::string* s : {&c.tenant, &c.registry, &c.username, &c.password, &c.created_by}) {
    if (!ValidUtf8(*s) || s->find('\0') != std::string::npos || s->size() > 4096) {
      return Status::InvalidArgument(what + ": a field is not UTF-8, holds NUL or is too long");
    }
  }
  return Status::Ok();
}

bool StorableText(std::string_view s) { return ValidUtf8(s); }

Status ValidateWebhook(const WebhookRecord& w) {
  const std::string what = "webhook of tenant " + w.tenant;
  if (w.tenant.empty()) return Status::InvalidArgument("webhook: no tenant");
  if (w.secret.empty()) return Status::InvalidArgument(what + ": no signing secret");
  GPUPOOL_RETURN_IF_ERROR(ParseWebhookUrl(w.url, true, what + ": url").status());
  GPUPOOL_RETURN_IF_ERROR(CheckWebhookEventKinds(w.event_kinds, what + ": event kinds"));
  for (const std::string* s : {&w.tenant, &w.url, &w.secret, &w.created_by}) {
    if (!ValidUtf8(*s) || s->find('\0') != std::string::npos || s->size() > 4096) {
      return Status::InvalidArgument(what + ": a field is not UTF-8, holds NUL or is too long");
    }
  }
  return Status::Ok();
}

namespace {

// What both ValidateService and ValidateServiceUpdate check: text, ports, no secret env.
Status CheckServiceRecord(const ServiceRecord& s) {
  TextChecker t;
  t("service.tenant", s.spec.tenant);
  t("service.name", s.spec.name);
  t("service.pool", s.spec.pool);
  t("service.priority_class", s.spec.priority_class);
  t("service.created_by", s.spec.created_by);
  t("service.readiness_path", s.spec.revision.readiness_path);
  CheckTemplate(s.spec.revision.task_template, "service.template", t);
  if (!t.status().ok()) return t.status();  // names the field, not the text it holds
  GPUPOOL_RETURN_IF_ERROR(
      CheckTaskPorts(s.spec.revision.task_template.ports, "service.template.ports"));
  if (!s.spec.revision.task_template.secret_env.empty()) {
    return Status::InvalidArgument("service '" + s.spec.name + "' of tenant '" + s.spec.tenant +
                                   "': service.template.secret_env is not kept for services");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateService(const ServiceRecord& s) {
  GPUPOOL_RETURN_IF_ERROR(CheckServiceRecord(s));
  if (s.spec.tenant.empty() || s.spec.name.empty()) {
    return Status::InvalidArgument("service '" + s.spec.name + "' of tenant '" + s.spec.tenant +
                                   "': a tenant and a name are required");
  }
  return Status::Ok();
}

Status ValidateServiceUpdate(const ServiceRecord& next, int64_t expected_generation) {
  if (expected_generation < 1 ||
      (next.generation != expected_generation && next.generation != expected_generation + 1)) {
    return Status::InvalidArgument("service " + std::to_string(next.id) + ": generation " +
                                   std::to_string(next.generation) + " must be the expected " +
                                   std::to_string(expected_generation) +
                                   " (scaling only) or the one after it (a new revision)");
  }
  return CheckServiceRecord(next);
}

std::string ServiceExistsMessage(const std::string& tenant, const std::string& name) {
  return "service '" + name + "' of tenant '" + tenant + "' already exists";
}

std::string ServiceNotFoundMessage(int64_t id) {
  return "service " + std::to_string(id) + " does not exist";
}

std::string ServiceChangedMessage(int64_t id, int64_t generation) {
  return "service " + std::to_string(id) + " changed meanwhile (generation " +
         std::to_string(generation) + ")";
}

}  // namespace gpupool
