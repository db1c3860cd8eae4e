// Core: retention — finished jobs are forgotten after `job_retention_ms` (their rows stay in the
// store), a bounded slice of the job table per tick.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

bool Core::State::Forgettable(const JobEntry& job, int64_t cutoff_us) {
  if (!IsTerminal(job.head.state) || job.head.finish_us == 0 || job.head.finish_us >= cutoff_us) {
    return false;
  }
  for (const Task& rt : job.tasks) {
    if (!IsTerminal(rt.rec.state) || rt.holds || rt.committing || rt.changing ||
        rt.reservation != 0 || rt.reserved_for != 0) {
      return false;
    }
  }
  return true;
}

void Core::State::EvictFinished(int64_t now_us, int budget) {
  if (options.job_retention_ms <= 0 || jobs.empty()) return;
  const int64_t cutoff = now_us - options.job_retention_ms * 1000;
  auto it = jobs.upper_bound(retention_cursor);
  if (it == jobs.end()) it = jobs.begin();  // wrap around: the next sweep starts over
  for (; it != jobs.end() && budget-- > 0;) {
    retention_cursor = it->first;
    if (Forgettable(it->second, cutoff) && !watchers_by_job.contains(it->first)) {
      it = jobs.Erase(it);
    } else {
      ++it;
    }
  }
  if (it == jobs.end()) retention_cursor = 0;
}

}  // namespace gpupool
