// Pool history (pool_history.h): the query's bounds and the row shape both stores share.
#include "scheduler/pool_history.h"

#include <algorithm>
#include <tuple>

namespace gpupool {

Status ValidatePoolHistoryQuery(const PoolHistoryQuery& q) {
  if (q.pool.empty()) return Status::InvalidArgument("pool history: pool: must not be empty");
  if (q.from_us < 0) return Status::InvalidArgument("pool history: from: must not be negative");
  if (q.to_us <= q.from_us) return Status::InvalidArgument("pool history: to: must be after from");
  if (q.to_us - q.from_us > kMaxPoolHistoryWindowUs) {
    return Status::InvalidArgument("pool history: window: at most 7 days (168h)");
  }
  if (q.max_tasks < 1 || q.max_tasks > kMaxPoolHistoryTasks) {
    return Status::InvalidArgument("pool history: max_tasks: must be 1.." +
                                   std::to_string(kMaxPoolHistoryTasks));
  }
  return Status::Ok();
}

void AppendPoolHistory(const JobRecord& job, const PoolHistoryQuery& q,
                       std::vector<PoolHistoryTask>* out) {
  if (job.spec.pool != q.pool || job.submit_us < q.from_us || job.submit_us >= q.to_us) return;
  for (const TaskRecord& t : job.tasks) {
    PoolHistoryTask r;
    r.job_id = job.id;
    r.index = t.index;
    r.tenant = job.spec.tenant;
    r.priority_class = job.spec.priority_class;
    r.gang = job.spec.gang;
    r.task_count = job.spec.task_count;
    r.request = job.spec.task_template.resources;
    r.submit_us = job.submit_us;
    r.state = t.state;
    r.started_us = t.started_us;
    r.finished_us = t.finished_us;
    out->push_back(std::move(r));
  }
}

PoolHistory FinishPoolHistory(std::vector<PoolHistoryTask> rows, const PoolHistoryQuery& q) {
  std::sort(rows.begin(), rows.end(), [](const PoolHistoryTask& a, const PoolHistoryTask& b) {
    return std::tie(a.submit_us, a.job_id, a.index) < std::tie(b.submit_us, b.job_id, b.index);
  });
  PoolHistory h;
  if (rows.size() > static_cast<size_t>(q.max_tasks)) {
    rows.resize(static_cast<size_t>(q.max_tasks));
    h.truncated = true;
  }
  h.tasks = std::move(rows);
  return h;
}

}  // namespace gpupool
