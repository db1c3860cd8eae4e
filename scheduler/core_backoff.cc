// Core: back-off after preemption (docs/tenancy.md, "No thrash").
//
// A class with no minimum runtime (`low` by default) is preempted whenever a higher one needs
// room, and a preempted task is requeued at once: under pressure one task can be restarted into
// room it loses again minutes later, dozens of times (the cluster twin saw one `low` task
// preempted 40 times in three hours, each restart's work lost). So a task preempted for the k-th
// time waits tenancy.preemption_backoff_ms × 2^(k−1) after its requeue before it is placed again,
// at most tenancy.preemption_backoff_max_ms; while it waits, the pass leaves it alone and its
// reason says until when. Other tasks are not held up: they are placed around it as around any
// task that does not fit. A gang restarts whole and at once (its members are not backed off), and
// a task whose group is within its guarantee with it does not wait: the guarantee comes first.
//
// The count lives in memory only: after a daemon restart a task starts over at the base back-off
// (a soft protection, not a promise, so nothing about it is stored).
#include <algorithm>

#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

void Core::State::StartBackoff(JobEntry& job, int32_t index) {
  Task& rt = job.task(index);
  ++rt.preemptions;
  const TenancyOptions& t = options.tenancy;
  if (t.preemption_backoff_ms <= 0 || job.head.spec.gang) return;
  int64_t wait_ms = t.preemption_backoff_ms;
  for (int32_t k = 1; k < rt.preemptions && wait_ms < t.preemption_backoff_max_ms; ++k)
    wait_ms *= 2;
  if (t.preemption_backoff_max_ms > 0) wait_ms = std::min(wait_ms, t.preemption_backoff_max_ms);
  rt.not_before_us = clock->NowMicros() + wait_ms * 1000;
}

bool Core::State::BacksOff(const PassState& pass, JobEntry& job, int32_t index) const {
  Task& rt = job.task(index);
  if (rt.not_before_us <= pass.now) return false;
  // A group below its guarantee is owed its room now: its tasks do not back off.
  if (book.WithinGuarantee(job.head.spec.pool, job.head.spec.tenant, ReclaimNeed(job))) {
    return false;
  }
  const int64_t left_ms = (rt.not_before_us - pass.now + 999) / 1000;
  rt.rec.reason = "backing off after " + std::to_string(rt.preemptions) +
                  " preemption(s): placed again in " + std::to_string(left_ms) + " ms";
  rt.rec.pending = {PendingCode::kQueued, "", {}};
  return true;
}

}  // namespace gpupool
