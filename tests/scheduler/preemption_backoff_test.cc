// Back-off after preemption (scheduler/core_backoff.cc): a task preempted for the k-th time is
// placed again no sooner than base × 2^(k−1) after its requeue, at most the cap, and says why it
// waits; 0 turns it off. A `low` task (no minimum runtime) on a one-GPU node is preempted three
// times by `high` tasks that finish at once; each time the seconds until it runs again are
// counted on the injected clock.
#include <gtest/gtest.h>

#include "scheduler/core.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;
using testing::kSecond;
using testing::Of;

TEST(PreemptionBackoffTest, EachPreemptionDoublesTheWaitUpToTheCap) {
  struct Case {
    std::string name;
    int64_t base_ms, max_ms;
    std::vector<int64_t> waits_s;  // after the 1st, 2nd, 3rd preemption
  };
  std::vector<Case> cases{
      {"defaults: 10 s doubling", 10'000, 600'000, {10, 20, 40}},
      {"capped at 15 s", 10'000, 15'000, {10, 15, 15}},
      {"off", 0, 600'000, {0, 0, 0}},
  };
  for (const Case& c : cases) {
    SchedulerOptions opts = SchedulerOptions::Defaults();
    opts.tenancy.preemption_backoff_ms = c.base_ms;
    opts.tenancy.preemption_backoff_max_ms = c.max_ms;
    CoreHarness h(opts);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
    Result<JobRecord> low = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)));
    ASSERT_TRUE(low.ok());
    h.RunStarted();
    for (size_t k = 0; k < c.waits_s.size(); ++k) {
      Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
      ASSERT_TRUE(high.ok());
      ASSERT_EQ(h.agents.stops.size(), k + 1) << c.name;
      h.ExitStopped();
      ASSERT_EQ(h.Task(high->id).state, TaskState::kScheduled) << c.name;
      h.Report("n0", high->id, 0, TaskState::kSucceeded);  // the GPU is free again at once
      int64_t waited_s = 0;
      while (h.Task(low->id).state == TaskState::kPending && waited_s < 1000) {
        EXPECT_EQ(h.Task(low->id).reason.rfind("backing off after " + std::to_string(k + 1) +
                                                   " preemption(s): placed again in ",
                                               0),
                  0u)
            << c.name << ": " << h.Task(low->id).reason;
        h.clock.Advance(kSecond);
        ++waited_s;
        h.core->OnHeartbeat("n0", {});
        h.core->Tick();
        h.core->Schedule();
        h.Drain();
      }
      EXPECT_EQ(waited_s, c.waits_s[k]) << c.name << ", preemption " << k + 1;
      EXPECT_EQ(h.Task(low->id).state, TaskState::kScheduled) << c.name;
      h.RunStarted();
    }
  }
}

// A group within its guarantee is owed its room at once: its preempted task does not back off.
// a (guaranteed one device) loses its low task to its own high one, which finishes at once.
TEST(PreemptionBackoffTest, NoBackoffForAGroupWithinItsGuarantee) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  for (const char* t : {"t", "t/a"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  ASSERT_TRUE(h.SetQuota("t/a", "gpu", CoreHarness::Devices(1), CoreHarness::Devices(2)).ok());
  Result<JobRecord> low = h.Submit(CoreHarness::As("t/a", Of("low", CoreHarness::Whole("gpu", 1))));
  ASSERT_TRUE(low.ok());
  h.RunStarted();
  Result<JobRecord> high =
      h.Submit(CoreHarness::As("t/a", Of("high", CoreHarness::Whole("gpu", 1))));
  ASSERT_TRUE(high.ok());
  ASSERT_EQ(h.agents.stops.size(), 1u);
  h.ExitStopped();
  h.Report("n0", high->id, 0, TaskState::kSucceeded);
  EXPECT_EQ(h.Task(low->id).state, TaskState::kScheduled) << h.Task(low->id).reason;
}

}  // namespace
}  // namespace gpupool
