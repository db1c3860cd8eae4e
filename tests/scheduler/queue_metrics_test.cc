// Queue depth by pool and priority class: kept by the queue itself as tasks enter and leave it
// (placed, cancelled, requeued), so publishing the metrics never walks the pending queue.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

#include "scheduler/metrics.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool::testing {
namespace {

double Depth(prometheus::Registry& registry, const std::string& pool, const std::string& cls) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != "gpupool_queue_depth_tasks") continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> labels;
      for (const prometheus::ClientMetric::Label& l : m.label) labels[l.name] = l.value;
      if (labels["pool"] == pool && labels["priority_class"] == cls) return m.gauge.value;
    }
  }
  return -1;  // no such series
}

TEST(QueueMetricsTest, DepthFollowsSubmitPlaceAndCancel) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry, "test");
  CoreHarness h(SchedulerOptions::Defaults(), nullptr, &metrics);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.CreatePool("empty").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());

  // 3 tasks of one whole GPU on a one-GPU node: 1 placed, 2 wait. 4 "low" tasks wait in a pool
  // with no nodes.
  Result<JobRecord> normal = h.Submit(CoreHarness::Whole("gpu", 1, 3));
  ASSERT_TRUE(normal.ok());
  JobSpec low = CoreHarness::Fractional("empty", 1000, 1024, 4, "low");
  Result<JobRecord> waiting = h.Submit(low);
  ASSERT_TRUE(waiting.ok());
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(Depth(*registry, "gpu", "normal"), 2);
  EXPECT_EQ(Depth(*registry, "empty", "low"), 4);
  EXPECT_EQ(Depth(*registry, "gpu", "high"), 0);  // every class has a series, zero included

  // Cancelling takes the job's pending tasks out of the count.
  ASSERT_TRUE(h.Sync<JobRecord>([&](auto cb) { h.core->CancelJob(waiting->id, "test", cb); }).ok());
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(Depth(*registry, "empty", "low"), 0);

  // The running task finishes: the next one is placed, one is left.
  h.RunStarted();
  h.Report("n0", normal->id, 0, TaskState::kSucceeded);
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(Depth(*registry, "gpu", "normal"), 1);
}

}  // namespace
}  // namespace gpupool::testing
