// The what-if history part of the Store conformance suite (scheduler/pool_history.h): one pool's
// tasks of the jobs submitted in [from, to), in (submit, job, index) order, with their requests,
// states and times; the row cap cuts in that order and says so; bad bounds name the field; the
// query writes nothing (Recover() is the same before and after).
#include "tests/store/store_conformance.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;
constexpr int64_t kS = 1'000'000;

// A job of `tasks` tasks in `pool`, submitted at kT0 + submit_s; task i started at
// kT0 + submit_s + 10 s + i and, when `finished`, ended 100 s later.
JobRecord HistoryJob(int64_t id, const std::string& pool, int64_t submit_s, int tasks,
                     bool finished) {
  JobRecord j = SampleJob(id, tasks);
  j.spec.pool = pool;
  j.submit_us = kT0 + submit_s * kS;
  for (TaskRecord& t : j.tasks) {
    t.allocations.clear();
    t.started_us = j.submit_us + 10 * kS + t.index;
    t.state = finished ? TaskState::kSucceeded : TaskState::kRunning;
    t.finished_us = finished ? t.started_us + 100 * kS : 0;
  }
  return j;
}

TEST_P(StoreConformanceTest, PoolHistoryReadsTheWindowInSubmitOrder) {
  // Ids out of submission order on purpose: the order is by submission time.
  JobRecord late = HistoryJob(1, "gpu-a", 300, 1, false);
  JobRecord early = HistoryJob(2, "gpu-a", 100, 2, true);
  JobRecord before = HistoryJob(3, "gpu-a", 10, 1, true);    // before the window
  JobRecord other = HistoryJob(4, "gpu-b", 200, 1, true);    // another pool
  JobRecord at_end = HistoryJob(5, "gpu-a", 1000, 1, true);  // at `to`: excluded
  ASSERT_OK(ApplyAndWait(*store_, {InsertJob{late}, InsertJob{early}, InsertJob{before},
                                   InsertJob{other}, InsertJob{at_end}}));
  const RecoveredState before_query = store_->Recover().value();

  PoolHistoryQuery q{.pool = "gpu-a", .from_us = kT0 + 50 * kS, .to_us = kT0 + 1000 * kS};
  ASSERT_OK_AND_ASSIGN(PoolHistory h, store_->QueryPoolHistory(q));
  EXPECT_FALSE(h.truncated);
  ASSERT_EQ(h.tasks.size(), 3u);
  EXPECT_EQ(h.tasks[0].job_id, 2);
  EXPECT_EQ(h.tasks[0].index, 0);
  EXPECT_EQ(h.tasks[1].job_id, 2);
  EXPECT_EQ(h.tasks[1].index, 1);
  EXPECT_EQ(h.tasks[2].job_id, 1);
  const PoolHistoryTask& t = h.tasks[1];
  EXPECT_EQ(t.tenant, "acme/ml/o'brien");
  EXPECT_EQ(t.priority_class, "high");
  EXPECT_TRUE(t.gang);
  EXPECT_EQ(t.task_count, 2);
  EXPECT_EQ(t.request, early.spec.task_template.resources);
  EXPECT_EQ(t.submit_us, kT0 + 100 * kS);
  EXPECT_EQ(t.state, TaskState::kSucceeded);
  EXPECT_EQ(t.started_us, kT0 + 110 * kS + 1);
  EXPECT_EQ(t.finished_us, kT0 + 210 * kS + 1);
  EXPECT_EQ(h.tasks[2].state, TaskState::kRunning);
  EXPECT_EQ(h.tasks[2].finished_us, 0);

  // The cap keeps the first rows in that order and says more matched.
  q.max_tasks = 2;
  ASSERT_OK_AND_ASSIGN(PoolHistory cut, store_->QueryPoolHistory(q));
  EXPECT_TRUE(cut.truncated);
  ASSERT_EQ(cut.tasks.size(), 2u);
  EXPECT_EQ(cut.tasks[1].job_id, 2);
  EXPECT_EQ(cut.tasks[1].index, 1);
  q.max_tasks = 3;
  ASSERT_OK_AND_ASSIGN(PoolHistory exact, store_->QueryPoolHistory(q));
  EXPECT_FALSE(exact.truncated);
  EXPECT_EQ(exact.tasks.size(), 3u);

  // An unknown pool is an empty history, not an error (the API checks the pool first).
  ASSERT_OK_AND_ASSIGN(
      PoolHistory none,
      store_->QueryPoolHistory({.pool = "nope", .from_us = kT0, .to_us = kT0 + 1000 * kS}));
  EXPECT_TRUE(none.tasks.empty());
  EXPECT_EQ(store_->Recover().value().jobs, before_query.jobs);  // read-only
}

TEST_P(StoreConformanceTest, PoolHistoryRefusesBadBoundsNamingTheField) {
  auto code_and_message = [&](PoolHistoryQuery q) {
    Result<PoolHistory> r = store_->QueryPoolHistory(q);
    EXPECT_FALSE(r.ok());
    return std::pair{r.status().code(), r.status().message()};
  };
  const int64_t week = kMaxPoolHistoryWindowUs;
  EXPECT_EQ(code_and_message({.pool = "", .from_us = 0, .to_us = 1}),
            std::pair(StatusCode::kInvalidArgument,
                      std::string("pool history: pool: must not be empty")));
  EXPECT_EQ(code_and_message({.pool = "p", .from_us = 5, .to_us = 5}).second,
            "pool history: to: must be after from");
  EXPECT_EQ(code_and_message({.pool = "p", .from_us = -1, .to_us = 5}).second,
            "pool history: from: must not be negative");
  EXPECT_EQ(code_and_message({.pool = "p", .from_us = kT0, .to_us = kT0 + week + 1}).second,
            "pool history: window: at most 7 days (168h)");
  EXPECT_EQ(code_and_message({.pool = "p", .from_us = 0, .to_us = 1, .max_tasks = 0}).second,
            "pool history: max_tasks: must be 1..100000");
  EXPECT_OK(store_->QueryPoolHistory({.pool = "p", .from_us = kT0, .to_us = kT0 + week}).status());
}

}  // namespace
}  // namespace gpupool::testing
