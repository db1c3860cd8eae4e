#include "cmd/daemon/reload.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <future>
#include <map>
#include <set>
#include <tuple>

#include "api/auth.h"
#include "api/service_impl.h"
#include "base/log.h"
#include "scheduler/scheduler.h"

namespace gpupool {
namespace {

// Sets a pool's record to `rec` (its creation time kept) through the scheduler.
Status ReplacePool(AdminPort& admin, const PoolRecord& rec) {
  return CallAndWait<PoolView>([&](auto cb) {
    admin.UpdatePool(
        rec.name,
        [rec](PoolRecord* p) {
          const int64_t created = p->create_us;
          *p = rec;
          p->create_us = created;
          return Status::Ok();
        },
        cb);
  });
}

bool SameTokens(const std::vector<api::ApiToken>& a, const std::vector<api::ApiToken>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tie(a[i].token, a[i].principal, a[i].admin, a[i].role) !=
        std::tie(b[i].token, b[i].principal, b[i].admin, b[i].role)) {
      return false;
    }
  }
  return true;
}

bool SameClasses(const SchedulerOptions& a, const SchedulerOptions& b) {
  if (a.default_priority_class != b.default_priority_class) return false;
  if (a.priority_classes.size() != b.priority_classes.size()) return false;
  for (const auto& [name, x] : a.priority_classes) {
    auto it = b.priority_classes.find(name);
    if (it == b.priority_classes.end()) return false;
    const PriorityClass& y = it->second;
    if (std::tie(x.value, x.preemptible, x.may_preempt, x.min_runtime_ms) !=
        std::tie(y.value, y.preemptible, y.may_preempt, y.min_runtime_ms)) {
      return false;
    }
  }
  return true;
}

bool SameSkus(const SchedulerOptions& a, const SchedulerOptions& b) {
  if (a.skus.size() != b.skus.size()) return false;
  for (const auto& [name, x] : a.skus) {
    auto it = b.skus.find(name);
    if (it == b.skus.end() || !(it->second.request == x.request)) return false;
  }
  return true;
}

// The keys a running daemon cannot take without a restart, and whether each differs.
std::vector<std::string> RestartOnlyChanges(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> out;
  auto check = [&](bool same, const char* key) {
    if (!same) out.push_back(std::string(key) + " changed: applied at the next restart");
  };
  check(a.grpc_listen == b.grpc_listen, "listen.grpc");
  check(a.http_listen == b.http_listen, "listen.http");
  check(a.grpc_tls_listen == b.grpc_tls_listen, "listen.grpc_tls");
  check(a.gateway_listen == b.gateway_listen, "listen.gateway");
  check(std::tie(a.gateway_rate_per_second, a.gateway_burst, a.gateway_hold_timeout_ms) ==
            std::tie(b.gateway_rate_per_second, b.gateway_burst, b.gateway_hold_timeout_ms),
        "gateway");
  check(a.http_max_connections_per_client == b.http_max_connections_per_client,
        "listen.http_max_connections_per_client");
  check(a.grpc_max_connections_per_client == b.grpc_max_connections_per_client,
        "listen.grpc_max_connections_per_client");
  check(a.data_dir == b.data_dir, "data_dir");
  check(a.database == b.database, "database");
  check(a.embedded_port == b.embedded_port, "embedded_port");
  check(a.catalog == b.catalog, "catalog");
  check(a.node_tokens == b.node_tokens, "auth.node_tokens");
  check(a.oidc == b.oidc, "auth.oidc");
  check(a.secrets == b.secrets, "secrets");
  check(a.services == b.services, "services");
  const SchedulerOptions &x = a.scheduler, &y = b.scheduler;
  check(x.default_strategy == y.default_strategy, "scheduler.default_strategy");
  check(x.node_lease_ms == y.node_lease_ms, "scheduler.node_lease_ms");
  check(std::tie(x.heartbeat_interval_ms, x.heartbeat_timeout_ms, x.stop_grace_period_ms,
                 x.max_tasks_per_job, x.job_retention_ms) ==
            std::tie(y.heartbeat_interval_ms, y.heartbeat_timeout_ms, y.stop_grace_period_ms,
                     y.max_tasks_per_job, y.job_retention_ms),
        "scheduler timing and limits");
  check(std::tie(x.tenancy.fair_share_half_life_ms, x.tenancy.disruption_budget_victims,
                 x.tenancy.disruption_budget_window_ms, x.tenancy.reservation_timeout_ms,
                 x.tenancy.preemption_backoff_ms, x.tenancy.preemption_backoff_max_ms) ==
            std::tie(y.tenancy.fair_share_half_life_ms, y.tenancy.disruption_budget_victims,
                     y.tenancy.disruption_budget_window_ms, y.tenancy.reservation_timeout_ms,
                     y.tenancy.preemption_backoff_ms, y.tenancy.preemption_backoff_max_ms),
        "scheduler fair share, disruption budget and preemption back-off");
  check(std::tie(x.tenancy.starvation_reserve_after_ms, x.tenancy.starvation_max_reservations,
                 x.tenancy.starvation_reservation_timeout_ms) ==
            std::tie(y.tenancy.starvation_reserve_after_ms, y.tenancy.starvation_max_reservations,
                     y.tenancy.starvation_reservation_timeout_ms),
        "scheduler starvation reservations");
  check(a.submit_rate_per_second == b.submit_rate_per_second && a.submit_burst == b.submit_burst,
        "tenant_defaults.submit_rate_per_second/submit_burst");
  check(CoreMeteringSame(x.metering, y.metering),
        "metering (enabled, interval_s, metrics_tenant_depth, rollup_after_days, "
        "max_intervals_per_batch)");
  return out;
}

// `to` keeps `from`'s restart-only values: what runs until the next restart.
void KeepRestartOnly(const DaemonConfig& from, DaemonConfig* to) {
  DaemonConfig keep = from;
  keep.api_tokens = to->api_tokens;
  keep.log_level = to->log_level;
  keep.scheduler.priority_classes = to->scheduler.priority_classes;
  keep.scheduler.default_priority_class = to->scheduler.default_priority_class;
  keep.scheduler.skus = to->scheduler.skus;
  keep.pools = to->pools;
  keep.tenants = to->tenants;
  keep.quotas = to->quotas;
  keep.default_priority_classes = to->default_priority_classes;
  keep.tenant_priority_classes = to->tenant_priority_classes;
  keep.origins = to->origins;
  keep.price_plans = to->price_plans;
  keep.scheduler.metering.report_concurrency = to->scheduler.metering.report_concurrency;
  keep.scheduler.metering.report_timeout_ms = to->scheduler.metering.report_timeout_ms;
  *to = std::move(keep);
}

std::string Where(const DaemonConfig& c, const std::string& key) {
  auto it = c.origins.find(key);
  return it == c.origins.end() ? key : it->second;
}

}  // namespace

Result<api::PriorityAccess> PriorityAccessOf(const DaemonConfig& c) {
  GPUPOOL_ASSIGN_OR_RETURN(api::PriorityAccess a,
                           api::PriorityAccess::Create(c.scheduler, c.default_priority_classes));
  for (const auto& [tenant, classes] : c.tenant_priority_classes) {
    GPUPOOL_RETURN_IF_ERROR(a.Add(tenant, classes));
  }
  return a;
}

struct ConfigReloader::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : reloads(prometheus::BuildCounter()
                    .Name("gpupool_config_reloads_total")
                    .Help("Configuration reloads (SIGHUP) by outcome: applied, unchanged or "
                          "refused (nothing changed; the log names file, line and key)")
                    .Register(r)),
        last(prometheus::BuildGauge()
                 .Name("gpupool_config_last_reload_timestamp_seconds")
                 .Help("Unix time of the last configuration reload with this outcome")
                 .Register(r)) {
    for (const char* o : {"applied", "unchanged", "refused"}) {
      reloads.Add({{"outcome", o}});  // present at 0 before the first reload
    }
  }
  void Count(const char* outcome) {
    reloads.Add({{"outcome", outcome}}).Increment();
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    last.Add({{"outcome", outcome}})
        .Set(std::chrono::duration_cast<std::chrono::duration<double>>(now).count());
  }
  prometheus::Family<prometheus::Counter>& reloads;
  prometheus::Family<prometheus::Gauge>& last;
};

ConfigReloader::ConfigReloader(std::function<Result<DaemonConfig>()> load, DaemonConfig running,
                               ReloadTargets targets, prometheus::Registry* registry)
    : load_(std::move(load)), running_(std::move(running)), t_(targets) {
  if (registry != nullptr) metrics_ = std::make_unique<Metrics>(*registry);
}

ConfigReloader::~ConfigReloader() = default;

ReloadReport ConfigReloader::Reload() {
  ReloadReport report;
  auto refuse = [&](Status st) {
    report.outcome = ReloadReport::kRefused;
    report.refused = std::move(st);
    report.changes.clear();
    LogError("gpupoold", "configuration reload refused; nothing changed",
             {{"error", report.refused.message()}});
    if (metrics_) metrics_->Count("refused");
    return report;
  };
  Result<DaemonConfig> loaded = load_();
  if (!loaded.ok()) return refuse(loaded.status());
  DaemonConfig next = std::move(loaded).value();
  report.kept = RestartOnlyChanges(running_, next);

  // Everything judged without the core first.
  Result<std::vector<api::ApiToken>> old_tokens = t_.tokens_of(running_);
  Result<std::vector<api::ApiToken>> new_tokens = t_.tokens_of(next);
  if (!old_tokens.ok()) return refuse(old_tokens.status().WithContext("auth.api_tokens"));
  if (!new_tokens.ok()) return refuse(new_tokens.status().WithContext("auth.api_tokens"));
  if (new_tokens->empty() != old_tokens->empty()) {
    return refuse(Status::FailedPrecondition(
        "auth.api_tokens: a reload cannot turn authentication " +
        std::string(new_tokens->empty() ? "off" : "on") + "; restart gpupoold for that"));
  }
  const bool tokens_changed = !SameTokens(*old_tokens, *new_tokens);
  Result<api::Authenticator> auth = api::Authenticator::Create(std::move(new_tokens).value());
  if (!auth.ok()) return refuse(auth.status().WithContext("auth.api_tokens"));
  Result<api::PriorityAccess> access = PriorityAccessOf(next);
  if (!access.ok()) return refuse(access.status().WithContext("priority classes of tenants"));

  // The core's changes, undone on refusal.
  if (Status st = ApplyCore(next, &report); !st.ok()) return refuse(st);

  // The edge's policy and tokens: cannot fail.
  const bool classes_changed = !SameClasses(running_.scheduler, next.scheduler) ||
                               !SameSkus(running_.scheduler, next.scheduler) ||
                               running_.default_priority_classes != next.default_priority_classes ||
                               running_.tenant_priority_classes != next.tenant_priority_classes;
  if (classes_changed) {
    t_.service->SetPolicy(api::ServicePolicy{next.scheduler, std::move(access).value()});
  }
  if (running_.default_priority_classes != next.default_priority_classes ||
      running_.tenant_priority_classes != next.tenant_priority_classes) {
    report.changes.push_back("tenants' priority class lists updated");
  }
  if (tokens_changed) {
    t_.auth->ReplaceTokens(*auth);
    report.changes.push_back("API tokens replaced (" + std::to_string(next.api_tokens.size()) +
                             " tokens)");
  }
  ReloadReportLimits(t_.billing, running_, next, &report.changes);
  if (next.log_level != running_.log_level) {
    LogLevel level = LogLevel::kInfo;
    ParseLogLevel(next.log_level, &level);
    SetLogLevel(level);
    report.changes.push_back("log_level " + next.log_level);
  }

  KeepRestartOnly(running_, &next);
  running_ = std::move(next);
  report.outcome = report.changes.empty() ? ReloadReport::kUnchanged : ReloadReport::kApplied;
  for (const std::string& c : report.changes) LogInfo("gpupoold", "reload", {{"change", c}});
  for (const std::string& k : report.kept) LogWarn("gpupoold", "reload", {{"kept", k}});
  LogInfo("gpupoold", "configuration reloaded",
          {{"outcome", report.outcome == ReloadReport::kApplied ? "applied" : "unchanged"},
           {"changes", std::to_string(report.changes.size())}});
  if (metrics_) {
    metrics_->Count(report.outcome == ReloadReport::kApplied ? "applied" : "unchanged");
  }
  return report;
}

Status ConfigReloader::ApplyCore(const DaemonConfig& next, ReloadReport* report) {
  AdminPort& admin = *t_.admin;
  struct Undo {
    std::string what;
    std::function<Status()> fn;
  };
  std::vector<Undo> undo;
  auto fail = [&](const Status& st, const std::string& key) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      if (Status u = it->fn(); !u.ok()) {
        LogError("gpupoold", "reload: could not undo a change",
                 {{"change", it->what}, {"error", u.ToString()}});
      }
    }
    return Status(st.code(), Where(next, key) + ": " + st.message());
  };

  // Pools new to the file or changed in it.
  std::map<std::string, const PoolRecord*> old_pools;
  for (const PoolRecord& p : running_.pools) old_pools[p.name] = &p;
  for (const PoolRecord& p : next.pools) {
    auto it = old_pools.find(p.name);
    if (it != old_pools.end()) {
      PoolRecord a = *it->second, b = p;
      a.create_us = b.create_us = 0;
      old_pools.erase(it);
      if (a == b) continue;
    }
    Result<PoolView> cur = CallAndGet<PoolView>([&](auto cb) { admin.GetPool(p.name, cb); });
    if (!cur.ok()) {
      Status st = CallAndWait<PoolView>([&](auto cb) { admin.CreatePool(p, cb); });
      if (!st.ok()) return fail(st, "pool " + p.name);
      undo.push_back({"create pool " + p.name, [&admin, name = p.name] {
                        return CallAndWait<bool>([&](auto cb) { admin.DeletePool(name, cb); });
                      }});
      report->changes.push_back("pool '" + p.name + "' created");
      continue;
    }
    PoolRecord rec = p;
    rec.create_us = cur->pool.create_us;
    if (rec == cur->pool) continue;
    Status st = ReplacePool(admin, rec);
    if (!st.ok()) return fail(st, "pool " + p.name);
    undo.push_back(
        {"update pool " + p.name, [&admin, old = cur->pool] { return ReplacePool(admin, old); }});
    report->changes.push_back("pool '" + p.name + "' updated");
  }
  for (const auto& [name, _] : old_pools) {
    report->kept.push_back("pool '" + name +
                           "' is no longer in the file: kept (gpupoolctl pools delete removes it)");
  }

  // Tenants new to the file, parents first as the file lists them.
  std::set<std::string> old_tenants;
  for (const TenantRecord& t : running_.tenants) old_tenants.insert(t.path);
  for (const TenantRecord& t : next.tenants) {
    if (old_tenants.erase(t.path) > 0) continue;
    if (CallAndWait<TenantView>([&](auto cb) { admin.GetTenant(t.path, cb); }).ok()) continue;
    Status st = CallAndWait<TenantView>([&](auto cb) { admin.CreateTenant(t, cb); });
    if (!st.ok()) return fail(st, "tenant " + t.path);
    undo.push_back({"create tenant " + t.path, [&admin, path = t.path] {
                      return CallAndWait<bool>([&](auto cb) { admin.DeleteTenant(path, cb); });
                    }});
    report->changes.push_back("tenant '" + t.path + "' created");
  }
  for (const std::string& path : old_tenants) {
    report->kept.push_back("tenant '" + path +
                           "' is no longer in the file: kept (gpupoolctl tenants delete removes "
                           "it)");
  }

  // Quotas new to the file or changed in it.
  std::map<std::pair<std::string, std::string>, const QuotaRecord*> old_quotas;
  for (const QuotaRecord& q : running_.quotas) old_quotas[{q.tenant, q.pool}] = &q;
  for (const QuotaRecord& q : next.quotas) {
    auto it = old_quotas.find({q.tenant, q.pool});
    if (it != old_quotas.end()) {
      const bool same = *it->second == q;
      old_quotas.erase(it);
      if (same) continue;
    }
    Result<QuotaView> cur =
        CallAndGet<QuotaView>([&](auto cb) { admin.GetQuota(q.tenant, q.pool, cb); });
    if (cur.ok() && cur->quota == q) continue;
    Status st = CallAndWait<QuotaView>([&](auto cb) { admin.SetQuota(q, cb); });
    if (!st.ok()) return fail(st, "quota " + q.tenant + " " + q.pool);
    if (cur.ok()) {
      undo.push_back({"set quota", [&admin, old = cur->quota] {
                        return CallAndWait<QuotaView>([&](auto cb) { admin.SetQuota(old, cb); });
                      }});
    } else {
      undo.push_back({"set quota", [&admin, tenant = q.tenant, pool = q.pool] {
                        return CallAndWait<bool>(
                            [&](auto cb) { admin.DeleteQuota(tenant, pool, cb); });
                      }});
    }
    report->changes.push_back("quota of '" + q.tenant + "' in pool '" + q.pool + "' set");
  }
  for (const auto& [key, _] : old_quotas) {
    report->kept.push_back("quota of '" + key.first + "' in pool '" + key.second +
                           "' is no longer in the file: kept (gpupoolctl quotas delete removes "
                           "it)");
  }

  // Price plans (append-only: versions stored before an error stay; the next reload adds only
  // what still differs), before the class swap, which has no undo.
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  if (Status st = ReloadPricePlans(t_.billing, running_, next, now_ms, &report->changes);
      !st.ok()) {
    return fail(st, "price_plans");
  }

  // Priority classes and SKUs, last: the one core change that needs no undo of its own.
  if (!SameClasses(running_.scheduler, next.scheduler) ||
      !SameSkus(running_.scheduler, next.scheduler)) {
    Status st = CallAndWait<bool>([&](auto cb) { admin.SetPolicy(next.scheduler, cb); });
    if (!st.ok()) return fail(st, "priority_classes");
    report->changes.push_back("priority classes and SKUs updated (" +
                              std::to_string(next.scheduler.priority_classes.size()) +
                              " classes, " + std::to_string(next.scheduler.skus.size()) + " SKUs)");
  }
  return Status::Ok();
}

}  // namespace gpupool
