#include "store/memory_store.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "store/validate.h"

namespace gpupool {

struct MemoryDatabase {
  std::mutex mu;
  int64_t epoch = 0;                                                        // guarded by mu
  std::map<std::string, PoolRecord> pools;                                  // guarded by mu
  std::map<std::string, NodeRecord> nodes;                                  // guarded by mu
  std::map<int64_t, JobRecord> jobs;                                        // guarded by mu
  std::vector<EventRecord> events;                                          // guarded by mu
  std::map<std::string, TenantRecord> tenants;                              // guarded by mu
  std::map<std::pair<std::string, std::string>, QuotaRecord> quotas;        // guarded by mu
  std::vector<AuditRecord> audit;                                           // guarded by mu
  std::map<std::pair<std::string, std::string>, DeviceFaultRecord> faults;  // guarded by mu
  std::map<std::pair<std::string, std::string>, DeviceSlotsRecord> slots;   // guarded by mu
  std::map<std::pair<std::string, std::string>, MigLayoutRecord> mig;       // guarded by mu
  Status unavailable;                                                       // guarded by mu
  // The usage ledger by (job, task, attempt, start), and its daily roll-ups by their dimensions.
  std::map<std::tuple<int64_t, int32_t, int32_t, int64_t>, UsageInterval> ledger;  // guarded by mu
  // A daily row of preempted attempts has end == kPreempted (the key's last member).
  std::map<std::tuple<int64_t, std::string, std::string, std::string, std::string, int, std::string,
                      std::string, std::string, bool>,
           UsageInterval>
      usage_daily;  // guarded by mu
  // Price plans by (name, version); guarded by mu.
  std::map<std::pair<std::string, int64_t>, billing::PricePlan> price_plans;
};

namespace {

using Undo = std::vector<std::function<void()>>;

constexpr int64_t kDayUs = 24LL * 3600 * 1'000'000;

auto LedgerKey(const UsageInterval& u) {
  return std::tuple{u.job_id, u.task_index, u.attempt, u.start_us};
}
auto DailyKey(const UsageInterval& u, bool preempted) {
  return std::tuple{
      u.start_us / kDayUs * kDayUs,     u.tenant,         u.pool,        u.node,    u.model,
      static_cast<int>(u.sharing_mode), u.priority_class, u.mig_profile, u.service, preempted};
}

using AttemptKey = std::tuple<int64_t, int32_t, int32_t>;

// The attempts whose last interval says they ended by preemption.
template <typename Ledger>
std::set<AttemptKey> PreemptedAttempts(const Ledger& ledger) {
  std::set<AttemptKey> out;
  for (const auto& [key, u] : ledger) {
    if (u.end == AttemptEnd::kPreempted) out.emplace(u.job_id, u.task_index, u.attempt);
  }
  return out;
}

TaskRecord* FindTask(JobRecord& job, int32_t index) {
  for (auto& t : job.tasks) {
    if (t.index == index) return &t;
  }
  return nullptr;
}

// Applies one mutation, pushing what undoes it. REQUIRES: db.mu held.
class Applier {
 public:
  Applier(MemoryDatabase& db, Undo& undo) : db_(db), undo_(undo) {}

  Status operator()(const InsertJob& m) {
    if (db_.jobs.count(m.job.id) != 0) return Status::AlreadyExists(JobExistsMessage(m.job.id));
    if (!m.job.spec.idempotency_key.empty()) {
      for (const auto& [id, other] : db_.jobs) {
        if (other.spec.tenant == m.job.spec.tenant &&
            other.spec.idempotency_key == m.job.spec.idempotency_key) {
          return Status::AlreadyExists(
              IdempotencyKeyUsedMessage(m.job.spec.tenant, m.job.spec.idempotency_key, id));
        }
      }
    }
    JobRecord job = m.job;
    std::sort(job.tasks.begin(), job.tasks.end(),
              [](const TaskRecord& a, const TaskRecord& b) { return a.index < b.index; });
    for (TaskRecord& t : job.tasks) {
      t.pending = {};  // not stored, as in PgStore
      t.pull = {};
    }
    db_.jobs.emplace(job.id, std::move(job));
    undo_.push_back([this, id = m.job.id] { db_.jobs.erase(id); });
    return Status::Ok();
  }
  Status operator()(const UpdateJob& m) {
    auto it = db_.jobs.find(m.job_id);
    if (it == db_.jobs.end()) return Status::NotFound(JobNotFoundMessage(m.job_id));
    JobRecord& j = it->second;
    undo_.push_back([&j, s = j.state, r = j.reason, f = j.finish_us] {
      j.state = s;
      j.reason = r;
      j.finish_us = f;
    });
    j.state = m.state;
    j.reason = m.reason;
    j.finish_us = m.finish_us;
    return Status::Ok();
  }
  Status operator()(const UpdateTask& m) {
    auto it = db_.jobs.find(m.task.job_id);
    TaskRecord* t = it == db_.jobs.end() ? nullptr : FindTask(it->second, m.task.index);
    if (t == nullptr) return Status::NotFound(TaskNotFoundMessage(m.task.job_id, m.task.index));
    undo_.push_back([t, old = *t] { *t = old; });
    *t = m.task;
    t->pending = {};  // not stored, as in PgStore
    t->pull = {};
    return Status::Ok();
  }
  Status operator()(const UpsertPool& m) {
    auto it = db_.pools.find(m.pool.name);
    if (it == db_.pools.end()) {
      db_.pools.emplace(m.pool.name, m.pool);
      undo_.push_back([this, name = m.pool.name] { db_.pools.erase(name); });
    } else {
      undo_.push_back([&p = it->second, old = it->second] { p = old; });
      it->second = m.pool;
    }
    return Status::Ok();
  }
  Status operator()(const DeletePool& m) {
    auto it = db_.pools.find(m.name);
    if (it == db_.pools.end()) return Status::NotFound(PoolNotFoundMessage(m.name));
    for (const auto& [name, node] : db_.nodes) {
      if (node.pool == m.name) return Status::FailedPrecondition(PoolHasNodesMessage(m.name));
    }
    undo_.push_back([this, old = it->second] { db_.pools.emplace(old.name, old); });
    db_.pools.erase(it);
    return Status::Ok();
  }
  Status operator()(const UpsertNode& m) {
    if (db_.pools.count(m.node.pool) == 0) {
      return Status::NotFound(NodePoolNotFoundMessage(m.node.name, m.node.pool));
    }
    auto it = db_.nodes.find(m.node.name);
    if (it == db_.nodes.end()) {
      db_.nodes.emplace(m.node.name, m.node);
      undo_.push_back([this, name = m.node.name] { db_.nodes.erase(name); });
    } else {
      undo_.push_back([&n = it->second, old = it->second] { n = old; });
      it->second = m.node;
    }
    return Status::Ok();
  }
  Status operator()(const SetNodeState& m) {
    auto it = db_.nodes.find(m.name);
    if (it == db_.nodes.end()) return Status::NotFound(NodeNotFoundMessage(m.name));
    undo_.push_back([&n = it->second, s = it->second.state] { n.state = s; });
    it->second.state = m.state;
    return Status::Ok();
  }
  Status operator()(const AppendEvent& m) {
    db_.events.push_back(m.event);
    undo_.push_back([this] { db_.events.pop_back(); });
    return Status::Ok();
  }
  Status operator()(const UpsertTenant& m) {
    auto it = db_.tenants.find(m.tenant.path);
    if (it == db_.tenants.end()) {
      db_.tenants.emplace(m.tenant.path, m.tenant);
      undo_.push_back([this, path = m.tenant.path] { db_.tenants.erase(path); });
    } else {
      undo_.push_back([&t = it->second, old = it->second] { t = old; });
      it->second = m.tenant;
    }
    return Status::Ok();
  }
  Status operator()(const DeleteTenant& m) {
    auto it = db_.tenants.find(m.path);
    if (it == db_.tenants.end()) return Status::NotFound(TenantNotFoundMessage(m.path));
    for (auto q = db_.quotas.begin(); q != db_.quotas.end();) {
      if (q->first.first != m.path) {
        ++q;
        continue;
      }
      undo_.push_back([this, old = q->second] {
        db_.quotas.emplace(std::pair{old.tenant, old.pool}, old);
      });
      q = db_.quotas.erase(q);
    }
    undo_.push_back([this, old = it->second] { db_.tenants.emplace(old.path, old); });
    db_.tenants.erase(it);
    return Status::Ok();
  }
  Status operator()(const SetQuota& m) {
    if (db_.tenants.count(m.quota.tenant) == 0) {
      return Status::NotFound(TenantNotFoundMessage(m.quota.tenant));
    }
    std::pair key{m.quota.tenant, m.quota.pool};
    auto it = db_.quotas.find(key);
    if (it == db_.quotas.end()) {
      db_.quotas.emplace(key, m.quota);
      undo_.push_back([this, key] { db_.quotas.erase(key); });
    } else {
      undo_.push_back([&q = it->second, old = it->second] { q = old; });
      it->second = m.quota;
    }
    return Status::Ok();
  }
  Status operator()(const DeleteQuota& m) {
    auto it = db_.quotas.find({m.tenant, m.pool});
    if (it == db_.quotas.end()) return Status::NotFound(QuotaNotFoundMessage(m.tenant, m.pool));
    undo_.push_back([this, old = it->second] {
      db_.quotas.emplace(std::pair{old.tenant, old.pool}, old);
    });
    db_.quotas.erase(it);
    return Status::Ok();
  }
  Status operator()(const SetDeviceFault& m) {
    std::pair key{m.fault.node, m.fault.device};
    auto it = db_.faults.find(key);
    if (it == db_.faults.end()) {
      db_.faults.emplace(key, m.fault);
      undo_.push_back([this, key] { db_.faults.erase(key); });
    } else {
      undo_.push_back([&f = it->second, old = it->second] { f = old; });
      it->second = m.fault;
    }
    return Status::Ok();
  }
  Status operator()(const PutMigLayout& m) {
    std::pair key{m.layout.node, m.layout.gpu};
    auto it = db_.mig.find(key);
    if (it == db_.mig.end()) {
      db_.mig.emplace(key, m.layout);
      undo_.push_back([this, key] { db_.mig.erase(key); });
    } else {
      undo_.push_back([&row = it->second, old = it->second] { row = old; });
      it->second = m.layout;
    }
    return Status::Ok();
  }
  Status operator()(const SetDeviceSlots& m) {
    std::pair key{m.slots.node, m.slots.device};
    auto it = db_.slots.find(key);
    if (it != db_.slots.end()) {
      undo_.push_back([this, key, old = it->second] { db_.slots[key] = old; });
      db_.slots.erase(it);
    } else {
      undo_.push_back([this, key] { db_.slots.erase(key); });
    }
    if (m.slots.slots > 0) db_.slots.emplace(key, m.slots);
    return Status::Ok();
  }
  Status operator()(const AppendUsage& m) {
    for (const UsageInterval& u : m.intervals) {
      auto [it, added] = db_.ledger.emplace(LedgerKey(u), u);
      if (added) undo_.push_back([this, key = it->first] { db_.ledger.erase(key); });
    }
    return Status::Ok();
  }
  Status operator()(const RollUpUsage& m) {
    const std::set<AttemptKey> preempted = PreemptedAttempts(db_.ledger);
    for (auto it = db_.ledger.begin(); it != db_.ledger.end();) {
      const UsageInterval& u = it->second;
      if (u.start_us >= m.before_us || AttemptActive(u)) {
        ++it;
        continue;
      }
      const bool was_preempted = preempted.count({u.job_id, u.task_index, u.attempt}) > 0;
      auto key = DailyKey(u, was_preempted);
      auto day = db_.usage_daily.find(key);
      if (day == db_.usage_daily.end()) {
        UsageInterval d = u;
        d.job_id = 0;
        d.task_index = 0;
        d.attempt = 0;
        d.start_us = std::get<0>(key);
        d.end_us = d.start_us + kDayUs;
        d.end = was_preempted ? AttemptEnd::kPreempted : AttemptEnd::kNone;
        db_.usage_daily.emplace(key, d);
        undo_.push_back([this, key] { db_.usage_daily.erase(key); });
      } else {
        undo_.push_back([&d = day->second, old = day->second] { d = old; });
        day->second.totals += u.totals;
      }
      undo_.push_back([this, old = u] { db_.ledger.emplace(LedgerKey(old), old); });
      it = db_.ledger.erase(it);
    }
    return Status::Ok();
  }

 private:
  // True while the interval's attempt is SCHEDULED or RUNNING: the core resumes metering from
  // its rows, so they stay.
  bool AttemptActive(const UsageInterval& u) {
    auto job = db_.jobs.find(u.job_id);
    const TaskRecord* t = job == db_.jobs.end() ? nullptr : FindTask(job->second, u.task_index);
    return t != nullptr && t->attempt == u.attempt &&
           (t->state == TaskState::kScheduled || t->state == TaskState::kRunning);
  }

  MemoryDatabase& db_;
  Undo& undo_;
};

}  // namespace

MemoryStore::MemoryStore() : db_(std::make_shared<MemoryDatabase>()) {}
MemoryStore::MemoryStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}
MemoryStore::~MemoryStore() = default;

void MemoryStore::SetUnavailable(Status status) {
  std::lock_guard lock(db_->mu);
  db_->unavailable = status.ok() ? Status::Ok() : Status::Unavailable(status.message());
}

Result<int64_t> MemoryStore::AcquireLeadership() {
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  epoch_ = ++db_->epoch;
  return epoch_;
}

Result<RecoveredState> MemoryStore::Recover() {
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  RecoveredState state;
  for (const auto& [name, pool] : db_->pools) state.pools.push_back(pool);
  for (const auto& [name, node] : db_->nodes) state.nodes.push_back(node);
  for (const auto& [id, job] : db_->jobs) state.jobs.push_back(job);
  state.max_job_id = db_->jobs.empty() ? 0 : db_->jobs.rbegin()->first;
  for (const auto& [path, tenant] : db_->tenants) state.tenants.push_back(tenant);
  for (const auto& [key, quota] : db_->quotas) state.quotas.push_back(quota);
  for (const auto& [key, fault] : db_->faults) state.device_faults.push_back(fault);
  for (const auto& [key, row] : db_->slots) state.device_slots.push_back(row);
  for (const auto& [key, row] : db_->mig) state.mig_layouts.push_back(row);
  for (const auto& [id, job] : db_->jobs) {
    for (const TaskRecord& t : job.tasks) {
      if (t.state != TaskState::kScheduled && t.state != TaskState::kRunning) continue;
      // The attempt's intervals are contiguous from its start: the last one ends where it stops.
      auto first = db_->ledger.lower_bound({id, t.index, t.attempt, 0});
      auto last = db_->ledger.lower_bound({id, t.index, t.attempt + 1, 0});
      if (first == last) continue;
      state.usage_marks.push_back({id, t.index, t.attempt, std::prev(last)->second.end_us});
    }
  }
  return state;
}

void MemoryStore::Apply(std::vector<Mutation> batch, Done done) {
  Status result = ValidateBatch(batch);
  {
    std::lock_guard lock(db_->mu);
    if (!db_->unavailable.ok()) {
      result = db_->unavailable;
    } else if (epoch_ == 0) {
      result = Status::FailedPrecondition("store: AcquireLeadership() was not called");
    } else if (epoch_ != db_->epoch) {
      result = Status::Aborted("fenced: epoch " + std::to_string(epoch_) +
                               " is no longer the leader (current epoch " +
                               std::to_string(db_->epoch) + ")");
    }
    if (result.ok()) {
      Undo undo;
      Applier apply(*db_, undo);
      for (const Mutation& m : batch) {
        result = std::visit(apply, m);
        if (!result.ok()) break;
      }
      if (!result.ok()) {
        for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
      }
    }
  }
  if (done) done(result);
}

Result<std::vector<EventRecord>> MemoryStore::ListEvents(const std::string& subject_prefix,
                                                         int limit) {
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  std::vector<EventRecord> out;
  for (const auto& e : db_->events) {
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    if (e.subject.starts_with(subject_prefix)) out.push_back(e);
  }
  return out;
}

void MemoryStore::AppendAudit(std::vector<AuditRecord> records, Done done) {
  Status st = ValidateAuditRecords(records);
  {
    std::lock_guard lock(db_->mu);
    if (!db_->unavailable.ok()) st = db_->unavailable;
    if (st.ok()) {
      for (AuditRecord& r : records) {
        r.id = static_cast<int64_t>(db_->audit.size()) + 1;
        db_->audit.push_back(std::move(r));
      }
    }
  }
  done(st);
}

Result<AuditPage> MemoryStore::ListAudit(const AuditQuery& query) {
  GPUPOOL_RETURN_IF_ERROR(ValidateAuditQuery(query));
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  AuditPage page;
  for (auto it = db_->audit.rbegin(); it != db_->audit.rend(); ++it) {
    if (query.before_id > 0 && it->id >= query.before_id) continue;
    if (!AuditMatches(*it, query)) continue;
    if (static_cast<int>(page.records.size()) == query.limit) {
      page.next_before_id = page.records.back().id;
      break;
    }
    page.records.push_back(*it);
  }
  return page;
}

Result<std::vector<UsageReportRow>> MemoryStore::QueryUsage(const UsageQuery& query) {
  GPUPOOL_RETURN_IF_ERROR(ValidateUsageQuery(query));
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  using Group = std::tuple<int64_t, std::string, std::string, std::string, std::string, std::string,
                           std::string, bool>;
  std::map<Group, UsageTotals> groups;
  std::set<AttemptKey> preempted;
  if (query.split_preempted) preempted = PreemptedAttempts(db_->ledger);
  auto add = [&](const UsageInterval& u, bool was_preempted) {
    if (!UsageMatches(u, query)) return;
    Group g{PeriodStart(query.period, u.start_us),
            TenantAtDepth(u.tenant, query.tenant_depth),
            u.pool,
            u.model,
            u.priority_class,
            u.mig_profile,
            u.service,
            query.split_preempted && was_preempted};
    groups[g] += u.totals;
  };
  for (const auto& [key, u] : db_->ledger) {
    add(u, preempted.count({u.job_id, u.task_index, u.attempt}) > 0);
  }
  for (const auto& [key, u] : db_->usage_daily) add(u, u.end == AttemptEnd::kPreempted);
  std::vector<UsageReportRow> rows;
  rows.reserve(groups.size());
  for (const auto& [g, totals] : groups) {
    rows.push_back({std::get<0>(g), std::get<1>(g), std::get<2>(g), std::get<3>(g), std::get<4>(g),
                    std::get<5>(g), totals, std::get<7>(g), std::get<6>(g)});
  }
  return rows;
}

Result<PoolHistory> MemoryStore::QueryPoolHistory(const PoolHistoryQuery& query) {
  GPUPOOL_RETURN_IF_ERROR(ValidatePoolHistoryQuery(query));
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  std::vector<PoolHistoryTask> rows;
  for (const auto& [id, job] : db_->jobs) AppendPoolHistory(job, query, &rows);
  return FinishPoolHistory(std::move(rows), query);
}

Result<billing::PricePlan> MemoryStore::AddPricePlan(billing::PricePlan plan, bool create) {
  GPUPOOL_RETURN_IF_ERROR(ValidatePricePlanRecord(plan));
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  std::vector<const billing::PricePlan*> existing;
  for (const auto& [key, p] : db_->price_plans) {
    if (key.first == plan.name) existing.push_back(&p);
  }
  GPUPOOL_ASSIGN_OR_RETURN(plan.version, NextPricePlanVersion(existing, plan, create));
  db_->price_plans[{plan.name, plan.version}] = plan;
  return plan;
}

Result<std::vector<billing::PricePlan>> MemoryStore::ListPricePlans(const std::string& name) {
  std::lock_guard lock(db_->mu);
  if (!db_->unavailable.ok()) return db_->unavailable;
  std::vector<billing::PricePlan> out;
  for (const auto& [key, p] : db_->price_plans) {
    if (name.empty() || key.first == name) out.push_back(p);
  }
  return out;
}

}  // namespace gpupool
