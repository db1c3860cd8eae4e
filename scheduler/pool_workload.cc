#include "scheduler/pool_workload.h"

#include "scheduler/core_state.h"

namespace gpupool {

void ConfigureEngine(const PoolRecord& rec, placement::PoolPolicy* policy) {
  policy->tie_seed = placement::DaemonTieSeed(policy->strategy, rec.name);
}

void LearnSubmission(PoolEntry& pool, const placement::Request& request, int32_t tasks) {
  pool.workload.Observe(request, tasks);
}

void FeedEngine(PoolEntry& pool) {
  if (pool.engine != nullptr) pool.workload.Sync(*pool.engine);
}

LearnedWorkload LearnedOf(const PoolEntry& pool) {
  LearnedWorkload out;
  out.tasks_observed = pool.workload.model().tasks_observed();
  out.top = pool.workload.model().Classes();
  if (out.top.size() > kShownLearnedClasses) out.top.resize(kShownLearnedClasses);
  return out;
}

}  // namespace gpupool
