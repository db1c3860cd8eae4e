// PreflightRunner: `gpupoolctl whatif` inside gpupoold — replays a pool's recent real workload
// through the twin twice, under the live config and under a candidate change, and returns both
// reports (docs/twin.md, "Pre-flight: gpupoolctl whatif").
//
//  * Inputs are read, never written: the pool, its nodes, the tenant tree and the pool's quotas
//    as snapshots through the Scheduler facade (AdminPort; answered on the loop thread, waited
//    for here), and the pool's recent tasks through Store::QueryPoolHistory (a read-only,
//    bounded query). The replays run the twin's own Core on its own MemoryStore and ManualClock:
//    production state cannot change.
//  * Off the hot paths: each what-if runs on this runner's worker thread, never on the
//    scheduler's loop or an API completion thread; `done` is called there.
//  * One at a time per daemon: a Compare while another runs is refused at once with
//    RESOURCE_EXHAUSTED (retry advice in the message). Bounded: at most `max_tasks` tasks of
//    history and `max_gpus` GPUs; both replays together stop at `deadline` (DEADLINE_EXCEEDED).
//  * Errors name the field: NOT_FOUND "pool: unknown pool 'x'"; INVALID_ARGUMENT for a bad
//    window, strategy, overcommit or a quota of an unknown tenant; FAILED_PRECONDITION for a
//    pool without GPUs or over the size bound.
//
// Lifetime: destroy before the Scheduler and the Store (the destructor stops a running replay
// at its next check and joins the worker).
// Thread safety: Compare may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "scheduler/options.h"
#include "twin/recent_workload.h"
#include "twin/report.h"

namespace gpupool {
class AdminPort;
class Store;
}  // namespace gpupool

namespace gpupool::twin {

inline constexpr int64_t kMinPreflightWindowUs = 60'000'000;  // 1 minute

struct PreflightRequest {
  std::string pool;
  int64_t window_us = 24LL * 3600 * 1'000'000;  // the recent past replayed, up to now
  ConfigChange change;
};

struct PreflightOutcome {
  TwinReport baseline, candidate;
  ExtractionStats stats;
  int64_t from_us = 0, to_us = 0;
  int64_t base_overcommit_permille = 1000, candidate_overcommit_permille = 1000;
};

class PreflightRunner {
 public:
  struct Options {
    int32_t max_tasks = 20'000;
    int64_t max_gpus = 4096;
    std::chrono::milliseconds deadline{std::chrono::minutes(2)};
    SchedulerOptions scheduler = SchedulerOptions::Defaults();  // the daemon's classes and SKUs
  };
  using Done = std::function<void(const Result<PreflightOutcome>&)>;

  // REQUIRES: admin, store and clock outlive this.
  PreflightRunner(AdminPort* admin, Store* store, const Clock* clock, Options options);
  ~PreflightRunner();
  PreflightRunner(const PreflightRunner&) = delete;
  PreflightRunner& operator=(const PreflightRunner&) = delete;

  // Starts the what-if on the worker, or answers RESOURCE_EXHAUSTED at once (on this thread)
  // while another runs.
  void Compare(PreflightRequest request, Done done);

  // The runs so far (tests).
  int64_t runs() const { return runs_.load(); }

 private:
  Result<PreflightOutcome> Run(const PreflightRequest& request);
  Result<LivePool> ReadLive(const std::string& pool, int64_t from_us, int64_t to_us);

  AdminPort* admin_;
  Store* store_;
  const Clock* clock_;
  const Options options_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> runs_{0};
  Mutex mu_;
  std::thread worker_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool::twin
