// ServiceImpl::CompareWhatIf: the what-if pre-flight (docs/twin.md, "Pre-flight: gpupoolctl
// whatif"). Admins only: the replay is of every tenant's recent workload in the pool, and the
// candidate may change anyone's quota. The reply holds aggregates only (per priority class).
//
// Steps: check the caller, validate and convert the change at the edge (each error names its
// field), hand it to the PreflightRunner (twin/preflight.h), which reads snapshots and the
// store's history and replays on its own worker thread — never on the scheduler's loop or this
// thread — and answers from there; convert both reports and their deltas.
#include <cmath>
#include <set>

#include "api/service_impl.h"
#include "api/service_internal.h"
#include "api/validate.h"
#include "placement/strategy.h"
#include "scheduler/tenancy.h"
#include "twin/preflight.h"

namespace gpupool::api {
namespace {

// "90m", "24h", "1h30m", "2d": digits and a unit (s, m, h, d), repeated.
Result<int64_t> ParseWindowUs(const std::string& text) {
  if (text.empty()) return int64_t{24} * 3600 * 1'000'000;
  int64_t total_s = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
    if (j == i || j == text.size() || j - i > 6) {
      return Invalid("window", "'" + text + "' is not a duration such as 90m or 24h");
    }
    const int64_t n = std::stoll(text.substr(i, j - i));
    int64_t unit = 0;
    switch (text[j]) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        return Invalid("window", "'" + text + "' is not a duration such as 90m or 24h");
    }
    total_s += n * unit;
    i = j + 1;
  }
  const int64_t us = total_s * 1'000'000;
  if (us < twin::kMinPreflightWindowUs || us > kMaxPoolHistoryWindowUs) {
    return Invalid("window", "must be 1m..168h, got '" + text + "'");
  }
  return us;
}

Result<twin::PreflightRequest> RequestFromProto(const v1::CompareWhatIfRequest& req,
                                                const SchedulerOptions& options) {
  twin::PreflightRequest out;
  if (req.pool().empty()) return Invalid("pool", "must not be empty");
  out.pool = req.pool();
  GPUPOOL_ASSIGN_OR_RETURN(out.window_us, ParseWindowUs(req.window()));
  const v1::WhatIfChange& c = req.change();
  if (!c.strategy().empty()) {
    if (!placement::ParseStrategy(c.strategy()).ok()) {
      return Invalid("change.strategy", "unknown placement strategy '" + c.strategy() + "'");
    }
    out.change.strategy = c.strategy();
  }
  if (c.compute_overcommit() != 0) {
    const double r = c.compute_overcommit();
    if (!std::isfinite(r) || r < 1.0 || r > 100.0) {
      return Invalid("change.compute_overcommit",
                     "must be 1..100 (a ratio such as 1.5), got " + std::to_string(r));
    }
    out.change.compute_overcommit_permille = Ratio::FromDouble(r).permille;
  }
  if (c.preemption() == "on" || c.preemption() == "off") {
    out.change.preemption = c.preemption() == "on";
  } else if (!c.preemption().empty()) {
    return Invalid("change.preemption", "must be on or off, got '" + c.preemption() + "'");
  }
  if (!c.mig_relayout().empty()) {
    std::optional<MigRelayout> policy = ParseMigRelayout(c.mig_relayout());
    if (!policy) {
      return Invalid("change.mig_relayout",
                     "must be off, idle or drain, got '" + c.mig_relayout() + "'");
    }
    out.change.mig_relayout = *policy;
  }
  for (int i = 0; i < c.quotas_size(); ++i) {
    const v1::WhatIfQuota& q = c.quotas(i);
    const std::string field = "change.quotas[" + std::to_string(i) + "]";
    GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(q.tenant(), field + ".tenant"));
    if (out.change.quotas.contains(q.tenant())) {
      return Invalid(field + ".tenant", "'" + q.tenant() + "' is given twice");
    }
    if (!q.has_guaranteed() && !q.has_limit()) {
      return Invalid(field, "give a guaranteed amount, a limit or both");
    }
    twin::QuotaChange& change = out.change.quotas[q.tenant()];
    if (q.has_guaranteed()) {
      GPUPOOL_ASSIGN_OR_RETURN(
          change.guaranteed, QuotaAmountFromProto(q.guaranteed(), options, field + ".guaranteed"));
    }
    if (q.has_limit()) {
      GPUPOOL_ASSIGN_OR_RETURN(change.limit,
                               QuotaAmountFromProto(q.limit(), options, field + ".limit"));
    }
  }
  return out;
}

void ToProto(const twin::TwinReport& r, int64_t overcommit_permille, v1::WhatIfReport* out) {
  out->set_label(r.label);
  out->set_strategy(r.strategy);
  out->set_compute_overcommit(static_cast<double>(overcommit_permille) / 1000.0);
  out->set_preemption(r.preemption);
  out->set_time_avg_gpu_allocation_pct(r.time_avg_gpu_allocation_pct);
  out->set_time_avg_gpu_allocation_offered_pct(r.time_avg_gpu_allocation_offered_pct);
  out->set_time_avg_demand_pct(r.time_avg_demand_pct);
  for (const auto& [cls, w] : r.wait_by_class) {
    v1::WhatIfWait& o = (*out->mutable_wait_by_class())[cls];
    o.set_count(w.count);
    o.set_never_started(w.never_started);
    o.set_p50_s(w.p50);
    o.set_p99_s(w.p99);
  }
  out->set_preemptions(r.preemptions);
  out->set_lost_gpu_s(r.lost_gpu_s);
  out->set_quota_violations(r.quota_violations);
  out->set_rejected(r.rejected);
  out->set_mig_relayout(r.mig_relayout);
  out->set_mig_relayouts(r.mig_relayouts);
}

v1::CompareWhatIfResponse ToProto(const std::string& pool, const twin::PreflightOutcome& o,
                                  int64_t base_permille, int64_t cand_permille) {
  v1::CompareWhatIfResponse out;
  out.set_pool(pool);
  SetTimestamp(o.from_us, out.mutable_from());
  SetTimestamp(o.to_us, out.mutable_to());
  out.set_nodes(o.baseline.nodes);
  out.set_gpus(o.baseline.gpus);
  out.set_tasks(o.stats.tasks);
  out.set_running_censored(o.stats.running_censored);
  out.set_pending_censored(o.stats.pending_censored);
  out.set_never_ran(o.stats.never_ran);
  out.set_unmodelled(o.stats.unmodelled);
  out.set_unmodelled_gpus(o.stats.unmodelled_gpus);
  out.set_truncated(o.stats.truncated);
  ToProto(o.baseline, base_permille, out.mutable_baseline());
  ToProto(o.candidate, cand_permille, out.mutable_candidate());
  v1::WhatIfDelta* d = out.mutable_delta();
  d->set_time_avg_gpu_allocation_pct(o.candidate.time_avg_gpu_allocation_pct -
                                     o.baseline.time_avg_gpu_allocation_pct);
  d->set_preemptions(o.candidate.preemptions - o.baseline.preemptions);
  d->set_quota_violations(o.candidate.quota_violations - o.baseline.quota_violations);
  std::set<std::string> classes;
  for (const auto& [cls, w] : o.baseline.wait_by_class) classes.insert(cls);
  for (const auto& [cls, w] : o.candidate.wait_by_class) classes.insert(cls);
  for (const std::string& cls : classes) {
    auto a = o.baseline.wait_by_class.find(cls);
    auto b = o.candidate.wait_by_class.find(cls);
    const twin::WaitStats none;
    const twin::WaitStats& wa = a == o.baseline.wait_by_class.end() ? none : a->second;
    const twin::WaitStats& wb = b == o.candidate.wait_by_class.end() ? none : b->second;
    v1::WhatIfClassDelta& cd = (*d->mutable_wait_by_class())[cls];
    cd.set_p50_s(wb.p50 - wa.p50);
    cd.set_p99_s(wb.p99 - wa.p99);
  }
  return out;
}

void Answer(const Reply<v1::CompareWhatIfResponse>& done, const std::string& pool,
            const Result<twin::PreflightOutcome>& out) {
  if (!out.ok()) return Fail(done, out.status());
  const twin::PreflightOutcome& o = out.value();
  done(Status::Ok(), ToProto(pool, o, o.base_overcommit_permille, o.candidate_overcommit_permille));
}

}  // namespace

void ServiceImpl::CompareWhatIf(const CallContext& ctx, const v1::CompareWhatIfRequest& req,
                                Reply<v1::CompareWhatIfResponse> done) {
  if (Status st = RequireAdmin(ctx, "whatif"); !st.ok()) return Fail(done, std::move(st));
  if (options_.what_if == nullptr) {
    return Fail(done, Status::Unimplemented("CompareWhatIf: this server runs no what-if replays"));
  }
  Result<twin::PreflightRequest> request = RequestFromProto(req, policy()->scheduler);
  if (!request.ok()) return Fail(done, request.status());
  options_.what_if->Compare(std::move(request).value(),
                            [done, pool = req.pool()](const Result<twin::PreflightOutcome>& out) {
                              Answer(done, pool, out);
                            });
}

}  // namespace gpupool::api
