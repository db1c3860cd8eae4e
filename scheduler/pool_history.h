// Pool history: the read-only query a what-if replay starts from (Store::QueryPoolHistory) — the
// tasks of one pool's jobs submitted in a time window, with what each asked for and when it
// started and ended, as the store holds them. Nothing here is written; nothing is secret (no
// command, env or secret env is read).
//
//  * A row is one task: its job's submission time, tenant, class, gang flag and request, and the
//    task's state, start and end (0: not started / not ended).
//  * Rows come ordered by (submit_us, job_id, index). The query is bounded: at most `max_tasks`
//    rows (the first ones in that order); `truncated` says that more matched.
//  * Bounds (ValidatePoolHistoryQuery): a pool name, 0 <= from_us < to_us, a window of at most
//    kMaxPoolHistoryWindowUs, and 1 <= max_tasks <= kMaxPoolHistoryTasks.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/model.h"

namespace gpupool {

inline constexpr int64_t kMaxPoolHistoryWindowUs = 7LL * 24 * 3600 * 1'000'000;  // 7 days
inline constexpr int32_t kMaxPoolHistoryTasks = 100'000;

struct PoolHistoryQuery {
  std::string pool;
  int64_t from_us = 0;  // jobs submitted at or after this
  int64_t to_us = 0;    // ... and before this
  int32_t max_tasks = 10'000;
};

struct PoolHistoryTask {
  int64_t job_id = 0;
  int32_t index = 0;
  std::string tenant;
  std::string priority_class;
  bool gang = false;
  int32_t task_count = 1;
  ResourceRequest request;
  int64_t submit_us = 0;
  TaskState state = TaskState::kPending;
  int64_t started_us = 0;   // the last attempt's start; 0: never started
  int64_t finished_us = 0;  // 0: not ended
  friend bool operator==(const PoolHistoryTask&, const PoolHistoryTask&) = default;
};

struct PoolHistory {
  std::vector<PoolHistoryTask> tasks;
  bool truncated = false;  // more tasks matched than max_tasks
};

// INVALID_ARGUMENT naming the field when a bound above is broken.
Status ValidatePoolHistoryQuery(const PoolHistoryQuery& query);
// Rows of `job` that the query selects (its submit time in the window, its pool), in index order.
void AppendPoolHistory(const JobRecord& job, const PoolHistoryQuery& query,
                       std::vector<PoolHistoryTask>* out);
// Sorts rows into the query's order and cuts them to max_tasks (setting truncated).
PoolHistory FinishPoolHistory(std::vector<PoolHistoryTask> rows, const PoolHistoryQuery& query);

}  // namespace gpupool
