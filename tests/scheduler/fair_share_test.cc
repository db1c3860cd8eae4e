// Long-running contention on the deterministic core: fair share converges to the guaranteed
// ratios, and two tenants contending forever do not preempt each other back and forth.
#include <gtest/gtest.h>

#include "scheduler/core.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

using testing::kSecond;

// Drives tenants that always have work waiting: every task runs `run_s` seconds then succeeds;
// preempted tasks exit as soon as they are told to stop.
class Contention {
 public:
  Contention(CoreHarness& h, std::vector<std::string> tenants, std::string cls)
      : h_(h), tenants_(std::move(tenants)), cls_(std::move(cls)) {}

  // One step of `step_s` seconds; returns nothing, accumulates device-seconds per tenant.
  void Round(int64_t step_s, int64_t run_s) {
    TopUp();
    h_.clock.Advance(step_s * kSecond);
    h_.RunStarted();
    h_.ExitStopped();
    int64_t now = h_.clock.NowMicros();
    for (const auto& [id, job] : Jobs()) {
      for (const TaskRecord& t : job.tasks) {
        if (t.state != TaskState::kRunning) continue;
        used_[job.spec.tenant] += step_s;  // one whole GPU for this step
        if (now - t.started_us >= run_s * kSecond)
          h_.Report(t.node, t.job_id, t.index, TaskState::kSucceeded);
      }
    }
  }

  void ResetUsage() { used_.clear(); }
  int64_t used(const std::string& tenant) { return used_[tenant]; }

 private:
  std::map<int64_t, JobRecord> Jobs() {
    std::map<int64_t, JobRecord> out;
    JobFilter f;
    f.limit = 1000;
    for (;;) {
      JobPage page = h_.core->ListJobs(f);
      for (JobRecord& j : page.jobs) out.emplace(j.id, std::move(j));
      if (page.next_after_id == 0) return out;
      f.after_id = page.next_after_id;
    }
  }

  // Keeps at least 4 tasks of each tenant pending.
  void TopUp() {
    std::map<std::string, int> pending;
    for (const auto& [id, job] : Jobs()) {
      for (const TaskRecord& t : job.tasks)
        pending[job.spec.tenant] += t.state == TaskState::kPending;
    }
    for (const std::string& t : tenants_) {
      if (pending[t] >= 4) continue;
      JobSpec spec = CoreHarness::As(t, CoreHarness::Whole("gpu", 1, 8));
      spec.priority_class = cls_;
      ASSERT_TRUE(h_.Submit(spec).ok());
    }
  }

  CoreHarness& h_;
  std::vector<std::string> tenants_;
  std::string cls_;
  std::map<std::string, int64_t> used_;
};

TEST(FairShareTest, ConvergesToTheGuaranteedRatio) {
  struct Case {
    int32_t guaranteed_a, guaranteed_b, gpus;
  };
  // Each tenant's guarantee is its weight; with both always busy, GPU time splits a:b as the
  // guarantees: 2:1 of 3 GPUs, 3:1 of 4, 1:1 of 2.
  for (const Case& c : std::vector<Case>{{2, 1, 3}, {3, 1, 4}, {1, 1, 2}}) {
    SchedulerOptions opts = SchedulerOptions::Defaults();
    opts.tenancy.fair_share_half_life_ms = 10 * 60 * 1000;
    CoreHarness h(opts);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    for (const char* t : {"f", "f/a", "f/b"}) ASSERT_TRUE(h.CreateTenant(t).ok());
    ASSERT_TRUE(
        h.SetQuota("f/a", "gpu", CoreHarness::Devices(c.guaranteed_a), CoreHarness::Devices(c.gpus))
            .ok());
    ASSERT_TRUE(
        h.SetQuota("f/b", "gpu", CoreHarness::Devices(c.guaranteed_b), CoreHarness::Devices(c.gpus))
            .ok());
    Contention sim(h, {"f/a", "f/b"}, "normal");
    // b arrives first and alone takes every GPU; a's backlog comes with the node.
    sim.Round(0, 0);
    ASSERT_TRUE(h.Register("n0", "gpu", c.gpus).ok());
    for (int r = 0; r < 100; ++r) sim.Round(10, 95);  // warm-up: 1000 s
    sim.ResetUsage();
    for (int r = 0; r < 1000; ++r) sim.Round(10, 95);  // measure: 10 000 s
    double ratio = static_cast<double>(sim.used("f/a")) / static_cast<double>(sim.used("f/b"));
    double expected = static_cast<double>(c.guaranteed_a) / c.guaranteed_b;
    EXPECT_NEAR(ratio, expected, expected * 0.05)
        << c.guaranteed_a << ":" << c.guaranteed_b << " of " << c.gpus << " GPUs; a "
        << sim.used("f/a") << " s, b " << sim.used("f/b") << " s";
    // The whole pool stayed busy: gpus × 10 000 s.
    EXPECT_EQ(sim.used("f/a") + sim.used("f/b"), c.gpus * 10'000);
  }
}

TEST(FairShareTest, TenantsUnderOneQuotaTakeTurns) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.CreateTenant("r").ok());
  ASSERT_TRUE(h.SetQuota("r", "gpu", CoreHarness::Devices(2), CoreHarness::Devices(2)).ok());
  // alice and bob are not registered: both fall under r's quota, one share group. Between them
  // their own usage decides, so alice's older backlog does not take every GPU.
  Contention sim(h, {"r/alice", "r/bob"}, "normal");
  sim.Round(0, 0);
  ASSERT_TRUE(h.Register("n0", "gpu", 2).ok());
  for (int r = 0; r < 300; ++r) sim.Round(10, 95);
  EXPECT_NEAR(static_cast<double>(sim.used("r/alice")), static_cast<double>(sim.used("r/bob")), 100)
      << "alice " << sim.used("r/alice") << " s, bob " << sim.used("r/bob") << " s";
}

TEST(FairShareTest, NoPingPongBetweenTwoTenantsContendingForever) {
  SchedulerOptions opts = SchedulerOptions::Defaults();
  CoreHarness h(opts);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 2).ok());
  for (const char* t : {"t", "t/a", "t/b"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  for (const char* t : {"t/a", "t/b"}) {
    ASSERT_TRUE(h.SetQuota(t, "gpu", CoreHarness::Devices(1), CoreHarness::Devices(2)).ok());
  }
  // "low" has no minimum runtime: the easiest class to thrash. a starts alone and borrows b's
  // GPU; b then arrives and reclaims it: that is the one preemption this contention deserves.
  Contention a_only(h, {"t/a"}, "low");
  a_only.Round(10, 95);
  a_only.Round(10, 95);
  ASSERT_EQ(h.core->GetQuota("t/a", "gpu")->used.devices, 2);
  Contention both(h, {"t/a", "t/b"}, "low");
  for (int r = 0; r < 3000; ++r) both.Round(10, 95);  // 30 000 s of endless contention
  // Preemptions: exactly the reclaim of the borrowed GPU, never one back.
  EXPECT_EQ(h.agents.stops.size(), 1u);
  // Guarantees of 1 GPU each: an even split (b's first 10 s went to the reclaim).
  EXPECT_NEAR(static_cast<double>(both.used("t/a")), static_cast<double>(both.used("t/b")), 10);
  EXPECT_GE(both.used("t/a") + both.used("t/b"), 2 * 30'000 - 10);
}

}  // namespace
}  // namespace gpupool
