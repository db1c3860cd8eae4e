// Core::SetPolicy: the part of SchedulerOptions a running daemon may replace (gpupoold's SIGHUP
// reload, cmd/daemon/reload.h) — priority classes, the default class and the SKU table.
//
// An accepted job cached what it needs at submission (its priority value, its request with any
// SKU resolved), so new values apply to new submissions. Preemption still looks a job's class up
// by name, so a class that unfinished jobs use may not go away: the reload is refused naming the
// class and one such job.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

Status Core::SetPolicy(const SchedulerOptions& policy) {
  if (!policy.priority_classes.contains(policy.default_priority_class)) {
    return Status::FailedPrecondition("default priority class '" + policy.default_priority_class +
                                      "' is not defined");
  }
  for (const auto& [id, job] : s_->jobs) {
    const std::string& cls = job.head.spec.priority_class;
    if (IsTerminal(job.head.state) || policy.priority_classes.contains(cls)) continue;
    return Status::FailedPrecondition("priority class '" + cls + "' is used by job " +
                                      std::to_string(id) +
                                      ", which has not finished; keep the class until it has");
  }
  s_->options.priority_classes = policy.priority_classes;
  s_->options.default_priority_class = policy.default_priority_class;
  s_->options.skus = policy.skus;
  return Status::Ok();
}

}  // namespace gpupool
