// PreflightRunner (preflight.h): snapshots in, two replays on the worker, reports out.
#include "twin/preflight.h"

#include <future>
#include <memory>

#include "base/log.h"
#include "base/log_scope.h"
#include "scheduler/scheduler.h"
#include "scheduler/store.h"

namespace gpupool::twin {
namespace {

// Waits for a facade call's answer. A call the scheduler dropped unanswered (it stopped) is
// UNAVAILABLE, not an exception on the worker.
template <typename T>
Result<T> Await(const std::function<void(std::function<void(T)>)>& call) {
  auto done = std::make_shared<std::promise<T>>();
  std::future<T> out = done->get_future();
  call([done](T v) { done->set_value(std::move(v)); });
  try {
    return out.get();
  } catch (const std::future_error&) {
    return Status::Unavailable("whatif: the scheduler stopped before it answered");
  }
}

}  // namespace

PreflightRunner::PreflightRunner(AdminPort* admin, Store* store, const Clock* clock,
                                 Options options)
    : admin_(admin), store_(store), clock_(clock), options_(std::move(options)) {}

PreflightRunner::~PreflightRunner() { Stop(); }

void PreflightRunner::Stop() {
  stopping_ = true;
  MutexLock lock(&mu_);
  if (worker_.joinable()) worker_.join();
}

void PreflightRunner::Compare(PreflightRequest request, Done done) {
  bool idle = false;
  if (stopping_ || !busy_.compare_exchange_strong(idle, true)) {
    return done(Status(StatusCode::kResourceExhausted,
                       "whatif: another what-if is running on this daemon (one at a time); retry "
                       "in a minute"));
  }
  MutexLock lock(&mu_);
  if (worker_.joinable()) worker_.join();  // the previous run, already finished
  worker_ = std::thread([this, request = std::move(request), done = std::move(done)] {
    Result<PreflightOutcome> out = Run(request);
    ++runs_;
    busy_ = false;
    done(out);
  });
}

Result<LivePool> PreflightRunner::ReadLive(const std::string& pool, int64_t from_us,
                                           int64_t to_us) {
  LivePool live;
  Result<Result<PoolView>> view = Await<Result<PoolView>>(
      [&](std::function<void(Result<PoolView>)> cb) { admin_->GetPool(pool, std::move(cb)); });
  if (!view.ok()) return view.status();
  if (!view->ok()) {
    if (view->status().code() == StatusCode::kNotFound)
      return Status::NotFound("pool: unknown pool '" + pool + "'");
    return view->status();
  }
  live.pool = (*view)->pool;
  GPUPOOL_ASSIGN_OR_RETURN(
      live.nodes, Await<std::vector<NodeView>>([&](std::function<void(std::vector<NodeView>)> cb) {
        admin_->ListNodes(pool, cb);
      }));
  GPUPOOL_ASSIGN_OR_RETURN(
      std::vector<QuotaView> quotas,
      Await<std::vector<QuotaView>>([&](std::function<void(std::vector<QuotaView>)> cb) {
        admin_->ListQuotas("", pool, cb);
      }));
  for (const QuotaView& q : quotas) live.quotas.push_back(q.quota);
  GPUPOOL_ASSIGN_OR_RETURN(
      std::vector<TenantView> tenants,
      Await<std::vector<TenantView>>(
          [&](std::function<void(std::vector<TenantView>)> cb) { admin_->ListTenants("", cb); }));
  for (const TenantView& t : tenants) live.tenants.push_back(t.tenant.path);
  live.scheduler = options_.scheduler;
  live.from_us = from_us;
  live.to_us = to_us;
  return live;
}

Result<PreflightOutcome> PreflightRunner::Run(const PreflightRequest& req) {
  if (req.window_us < kMinPreflightWindowUs || req.window_us > kMaxPoolHistoryWindowUs) {
    return Status::InvalidArgument("window: must be 1m..168h");
  }
  const int64_t to_us = clock_->NowMicros();
  const int64_t from_us = std::max<int64_t>(0, to_us - req.window_us);
  GPUPOOL_ASSIGN_OR_RETURN(LivePool live, ReadLive(req.pool, from_us, to_us));
  int64_t gpus = 0;
  for (const NodeView& n : live.nodes) gpus += static_cast<int64_t>(n.node.devices.size());
  if (gpus > options_.max_gpus) {
    return Status::FailedPrecondition("pool: '" + req.pool + "' has " + std::to_string(gpus) +
                                      " devices, more than a what-if replays (" +
                                      std::to_string(options_.max_gpus) + ")");
  }
  GPUPOOL_ASSIGN_OR_RETURN(
      PoolHistory history,
      store_->QueryPoolHistory(
          {.pool = req.pool, .from_us = from_us, .to_us = to_us, .max_tasks = options_.max_tasks}));
  GPUPOOL_ASSIGN_OR_RETURN(RecentWorkload base, ExtractRecentWorkload(history, live));
  GPUPOOL_ASSIGN_OR_RETURN(RecentWorkload cand, ApplyChange(base, live, req.change));

  const auto deadline = std::chrono::steady_clock::now() + options_.deadline;
  auto stop = std::make_shared<std::atomic<bool>>(false);
  auto should_stop = [this, deadline, stop] {
    if (stopping_ || std::chrono::steady_clock::now() >= deadline) *stop = true;
    return stop->load();
  };
  base.baseline.should_stop = should_stop;
  cand.baseline.should_stop = should_stop;
  PreflightOutcome out;
  out.stats = base.stats;
  out.from_us = from_us;
  out.to_us = to_us;
  out.base_overcommit_permille = base.baseline.compute_overcommit_permille;
  out.candidate_overcommit_permille = cand.baseline.compute_overcommit_permille;
  {
    // The replays run the production core on made-up state: its lines ("MIG layout stored
    // node=…", "task preempted") would read in gpupoold's log as if they had happened.
    ScopedThreadLogFloor quiet(LogLevel::kError);
    Result<TwinReport> baseline = RunTwin(base.workload, base.org, base.baseline);
    if (!baseline.ok()) return baseline.status().WithContext("baseline");
    out.baseline = std::move(baseline).value();
    if (!*stop) {
      // The candidate may break a rule the core enforces (a child's guarantee above its
      // parent's): the core refuses it in the replay as it would in production.
      Result<TwinReport> candidate = RunTwin(cand.workload, cand.org, cand.baseline);
      if (!candidate.ok()) return candidate.status().WithContext("candidate");
      out.candidate = std::move(candidate).value();
    }
  }
  if (*stop && stopping_) {
    return Status::Unavailable("whatif: gpupoold is shutting down; retry on the leader");
  }
  if (*stop) {
    return Status(StatusCode::kDeadlineExceeded,
                  "whatif: the replays did not finish within " +
                      std::to_string(options_.deadline.count() / 1000) +
                      " s; try a shorter --window");
  }
  LogInfo("whatif", "what-if replayed",
          {{"pool", req.pool},
           {"tasks", std::to_string(out.stats.tasks)},
           {"wall_s", std::to_string(out.baseline.wall_s + out.candidate.wall_s)}});
  return out;
}

}  // namespace gpupool::twin
