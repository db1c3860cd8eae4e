// Where a running task's declared ports are published (docs/network.md, "Published ports"): its
// node reports them with RUNNING; the core stores them with the task, gives them to StartTask's
// successors through the store, and forgets them when the task is requeued.
#include <gtest/gtest.h>

#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

TEST(TaskEndpointsTest, ReportedWithRunningStoredAndForgottenOnRequeue) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  JobSpec spec = CoreHarness::Whole("gpu", 1);
  spec.task_template.ports = {{"http", 8080, "tcp"}};
  Result<JobRecord> job = h.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // The node is told the ports with the task.
  ASSERT_FALSE(h.agents.starts.empty());
  EXPECT_EQ(h.agents.starts.back().second.ports, spec.task_template.ports);

  TaskReport running;
  running.node = "n1";
  running.task_id = TaskId(job->id, 0);
  running.attempt = 0;
  running.state = TaskState::kRunning;
  running.endpoints = {{{"http", 8080, "tcp"}, "gpu-1.example", 30001}};
  h.core->OnTaskReport(running);
  h.Drain();
  EXPECT_EQ(h.Task(job->id).endpoints, running.endpoints);
  auto stored = h.store->Recover();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->jobs[0].tasks[0].endpoints, running.endpoints);
  EXPECT_EQ(stored->jobs[0].spec.task_template.ports, spec.task_template.ports);

  // Requeued (its node's lease lapsed): the old attempt's endpoints are gone, stored too.
  TaskReport end = running;
  end.state = TaskState::kFailed;
  end.endpoints.clear();
  end.lease_expired = true;
  h.core->OnTaskReport(end);
  h.Drain();
  EXPECT_EQ(h.Task(job->id).attempt, 1);
  EXPECT_TRUE(h.Task(job->id).endpoints.empty());
  stored = h.store->Recover();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->jobs[0].tasks[0].endpoints.empty());
}

}  // namespace
}  // namespace gpupool
