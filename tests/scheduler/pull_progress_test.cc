// An image pull's progress in the core (docs/images.md, "Cold start"): kept in memory on the
// SCHEDULED task for the API and told to the job's watchers; never stored, never a transition,
// and ignored when it is stale (another attempt or node, or the task runs already).
#include <gtest/gtest.h>

#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

TaskReport Pull(const std::string& node, int64_t job, int32_t attempt, int64_t done,
                int64_t total) {
  TaskReport r;
  r.node = node;
  r.task_id = TaskId(job, 0);
  r.attempt = attempt;
  r.state = TaskState::kScheduled;
  r.pull.image = "registry.local/app:1";
  r.pull.bytes_done = done;
  r.pull.bytes_total = total;
  return r;
}

// A pool "gpu" with one node, n1, and a job of one task placed there.
Result<JobRecord> OneTaskOnN1(CoreHarness& h) {
  GPUPOOL_RETURN_IF_ERROR(h.CreatePool("gpu").status());
  GPUPOOL_RETURN_IF_ERROR(h.Register("n1", "gpu", 1).status());
  return h.Submit(CoreHarness::Whole("gpu", 1));
}

TEST(PullProgressTest, AScheduledTaskShowsItsPullAndItsWatchersHearOfIt) {
  CoreHarness h;
  Result<JobRecord> job = OneTaskOnN1(h);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_EQ(h.Task(job->id).state, TaskState::kScheduled);
  EXPECT_FALSE(h.Task(job->id).Pulling());

  std::vector<std::string> heard;
  ASSERT_TRUE(
      h.core->WatchJob(job->id, [&](const JobChange& c) { heard.push_back(c.message); }).ok());
  h.core->OnTaskReport(Pull("n1", job->id, 0, 1 << 20, 4 << 20));
  h.Drain();
  TaskRecord t = h.Task(job->id);
  EXPECT_EQ(t.state, TaskState::kScheduled);  // progress, not a transition
  ASSERT_TRUE(t.Pulling());
  EXPECT_EQ(t.pull.image, "registry.local/app:1");
  EXPECT_EQ(t.pull.bytes_done, 1 << 20);
  EXPECT_EQ(t.pull.bytes_total, 4 << 20);
  ASSERT_FALSE(heard.empty());
  EXPECT_EQ(heard.back(),
            "task " + TaskId(job->id, 0) + ": PULLING registry.local/app:1 on n1, 1.0 of 4.0 MiB");

  // Stale reports change nothing: another node, another attempt.
  h.core->OnTaskReport(Pull("n2", job->id, 0, 3 << 20, 4 << 20));
  h.core->OnTaskReport(Pull("n1", job->id, 1, 3 << 20, 4 << 20));
  h.Drain();
  EXPECT_EQ(h.Task(job->id).pull.bytes_done, 1 << 20);

  // Nothing of it is stored: the stored task is plain SCHEDULED.
  auto stored = h.store->Recover();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->jobs.size(), 1u);
  EXPECT_EQ(stored->jobs[0].tasks[0].pull, PullProgress{});

  // Once it runs, a late progress report is ignored and the task shows RUNNING.
  h.Report("n1", job->id, 0, TaskState::kRunning);
  h.core->OnTaskReport(Pull("n1", job->id, 0, 4 << 20, 4 << 20));
  h.Drain();
  t = h.Task(job->id);
  EXPECT_EQ(t.state, TaskState::kRunning);
  EXPECT_FALSE(t.Pulling());
}

TEST(PullProgressTest, ARequeuedTaskForgetsThePullOfItsLastAttempt) {
  CoreHarness h;
  Result<JobRecord> job = OneTaskOnN1(h);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  h.core->OnTaskReport(Pull("n1", job->id, 0, 1 << 20, 4 << 20));
  h.Drain();
  ASSERT_TRUE(h.Task(job->id).Pulling());
  // The pull fails on a lapsed lease: requeued, and placed again on the only node.
  TaskReport end;
  end.node = "n1";
  end.task_id = TaskId(job->id, 0);
  end.attempt = 0;
  end.state = TaskState::kFailed;
  end.lease_expired = true;
  h.core->OnTaskReport(end);
  h.Drain();
  TaskRecord t = h.Task(job->id);
  EXPECT_EQ(t.attempt, 1);
  EXPECT_FALSE(t.Pulling());
  EXPECT_EQ(t.pull, PullProgress{});
}

}  // namespace
}  // namespace gpupool
