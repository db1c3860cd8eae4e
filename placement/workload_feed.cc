#include "placement/workload_feed.h"

#include <algorithm>

namespace gpupool::placement {

uint64_t PoolTieSeed(std::string_view pool_name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : pool_name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

uint64_t DaemonTieSeed(Strategy s, std::string_view pool_name) {
  return UsesWorkload(s) ? PoolTieSeed(pool_name) : 0;
}

uint64_t ReplayTieSeed(Strategy s, uint64_t seed) { return UsesWorkload(s) ? seed : 0; }

bool UsesWorkload(Strategy s) { return s == Strategy::kFgd || s == Strategy::kFgdPack; }

double WorkloadCoverage(Strategy s) { return s == Strategy::kFgd ? 0.95 : 1.0; }

WorkloadFeed::WorkloadFeed(WorkloadModelOptions options, int64_t refresh_tasks)
    : model_(options), refresh_tasks_(std::max<int64_t>(refresh_tasks, 1)) {}

bool WorkloadFeed::Sync(Engine& engine) {
  const Strategy s = engine.policy().strategy;
  if (!UsesWorkload(s)) return false;
  const int64_t n = model_.tasks_observed();
  const int64_t step = std::clamp<int64_t>(pushed_at_, 1, refresh_tasks_);
  const bool stale = !engine.workload_given() || engine.inventory_changed_since_workload();
  if (!stale && n - pushed_at_ < step) return false;
  engine.SetWorkload(model_.ForEngine(WorkloadCoverage(s)));
  pushed_at_ = n;
  return true;
}

}  // namespace gpupool::placement
