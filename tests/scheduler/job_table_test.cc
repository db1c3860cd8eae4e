// The job table's indexes (scheduler/job_table.h): tasks by node and jobs by pool stay equal to
// what the jobs say through add, placement, move, finish and removal.
#include "scheduler/job_table.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

JobEntry Job(int64_t id, const std::string& pool, int32_t tasks) {
  JobRecord rec;
  rec.id = id;
  rec.spec.pool = pool;
  rec.spec.task_count = tasks;
  for (int32_t i = 0; i < tasks; ++i) {
    TaskRecord t;
    t.job_id = id;
    t.index = i;
    rec.tasks.push_back(t);
  }
  return JobEntry::FromRecord(rec);
}

void Place(JobTable& table, int64_t id, int32_t index, const std::string& node, TaskState state) {
  JobEntry& job = table.at(id);
  job.task(index).rec.node = node;
  job.task(index).rec.state = state;
  table.Reindex(job, index);
}

std::set<TaskKey> Keys(std::initializer_list<TaskKey> keys) { return keys; }

TEST(JobTableIndex, PendingTasksAreOnNoNodeAndJobsAreInTheirPool) {
  JobTable table;
  table.Insert(Job(1, "gpu", 2));
  table.Insert(Job(2, "cpu", 1));
  table.Insert(Job(3, "gpu", 1));
  EXPECT_EQ(table.InPool("gpu"), (std::set<int64_t>{1, 3}));
  EXPECT_EQ(table.InPool("cpu"), (std::set<int64_t>{2}));
  EXPECT_TRUE(table.InPool("none").empty());
  EXPECT_TRUE(table.OnNode("n1").empty());
  EXPECT_TRUE(table.CheckIndexes().ok()) << table.CheckIndexes().ToString();
}

TEST(JobTableIndex, PlacedTasksAreFoundOnTheirNodeAndFollowAMove) {
  JobTable table;
  table.Insert(Job(1, "gpu", 3));
  Place(table, 1, 0, "n1", TaskState::kScheduled);
  Place(table, 1, 2, "n1", TaskState::kScheduled);
  Place(table, 1, 1, "n2", TaskState::kScheduled);
  EXPECT_EQ(table.OnNode("n1"), Keys({{1, 0}, {1, 2}}));
  EXPECT_EQ(table.OnNode("n2"), Keys({{1, 1}}));
  Place(table, 1, 0, "n1", TaskState::kRunning);  // same node, still placed: unchanged
  EXPECT_EQ(table.OnNode("n1"), Keys({{1, 0}, {1, 2}}));
  // Requeued (pending, node cleared) and placed again elsewhere.
  Place(table, 1, 2, "", TaskState::kPending);
  EXPECT_EQ(table.OnNode("n1"), Keys({{1, 0}}));
  Place(table, 1, 2, "n2", TaskState::kScheduled);
  EXPECT_EQ(table.OnNode("n2"), Keys({{1, 1}, {1, 2}}));
  EXPECT_TRUE(table.CheckIndexes().ok()) << table.CheckIndexes().ToString();
}

TEST(JobTableIndex, AFinishedTaskLeavesItsNodeButKeepsItsRecord) {
  JobTable table;
  table.Insert(Job(1, "gpu", 2));
  Place(table, 1, 0, "n1", TaskState::kRunning);
  Place(table, 1, 1, "n1", TaskState::kRunning);
  Place(table, 1, 0, "n1", TaskState::kSucceeded);  // the record still names n1 for display
  EXPECT_EQ(table.at(1).task(0).rec.node, "n1");
  EXPECT_EQ(table.OnNode("n1"), Keys({{1, 1}}));
  Place(table, 1, 1, "n1", TaskState::kFailed);
  EXPECT_TRUE(table.OnNode("n1").empty());
  EXPECT_TRUE(table.CheckIndexes().ok()) << table.CheckIndexes().ToString();
}

TEST(JobTableIndex, ARecoveredJobIsIndexedAsItsRecordsSay) {
  JobEntry job = Job(7, "gpu", 2);
  job.task(1).rec.node = "n3";
  job.task(1).rec.state = TaskState::kRunning;
  JobTable table;
  table.Insert(std::move(job));
  EXPECT_EQ(table.OnNode("n3"), Keys({{7, 1}}));
  EXPECT_TRUE(table.CheckIndexes().ok()) << table.CheckIndexes().ToString();
}

TEST(JobTableIndex, ErasingAJobTakesItOutOfBothIndexes) {
  JobTable table;
  table.Insert(Job(1, "gpu", 1));
  table.Insert(Job(2, "gpu", 1));
  Place(table, 1, 0, "n1", TaskState::kRunning);
  Place(table, 2, 0, "n1", TaskState::kRunning);
  auto next = table.Erase(table.begin());
  ASSERT_NE(next, table.end());
  EXPECT_EQ(next->first, 2);
  EXPECT_EQ(table.InPool("gpu"), (std::set<int64_t>{2}));
  EXPECT_EQ(table.OnNode("n1"), Keys({{2, 0}}));
  table.Erase(table.begin());
  EXPECT_TRUE(table.InPool("gpu").empty());
  EXPECT_TRUE(table.OnNode("n1").empty());
  EXPECT_TRUE(table.CheckIndexes().ok()) << table.CheckIndexes().ToString();
}

TEST(JobTableIndex, CheckIndexesNamesAChangeThatWasNotReindexed) {
  JobTable table;
  table.Insert(Job(1, "gpu", 1));
  JobEntry& job = table.at(1);
  job.task(0).rec.node = "n1";
  job.task(0).rec.state = TaskState::kRunning;  // no Reindex: the table cannot know
  Status st = table.CheckIndexes();
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("'n1'"), std::string::npos) << st.ToString();
  table.Reindex(job, 0);
  EXPECT_TRUE(table.CheckIndexes().ok());
}

}  // namespace
}  // namespace gpupool
