// Scenario tests of tenants and quotas on the deterministic core: refusal, waiting, the tree,
// persistence, and why-pending reasons.
#include <gtest/gtest.h>

#include "scheduler/core.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

// acme ⊃ acme/research ⊃ acme/research/{alice,bob}; a 2×H100 node in pool "gpu".
void AcmeTree(CoreHarness& h) {
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
  for (const char* t : {"acme", "acme/research", "acme/research/alice", "acme/research/bob"}) {
    ASSERT_TRUE(h.CreateTenant(t).ok()) << t;
  }
}

TEST(TenancyTest, SubmissionThatCanNeverFitItsQuotaIsRefused) {
  CoreHarness h;
  AcmeTree(h);
  ASSERT_TRUE(
      h.SetQuota("acme/research", "gpu", CoreHarness::Tflops(100), CoreHarness::Tflops(200)).ok());
  struct Case {
    std::string name;
    JobSpec spec;
    StatusCode code;
    std::string message;
  };
  JobSpec gang = CoreHarness::Fractional("gpu", 100'000, 1024, 3);  // 3 × 100 = 300 together
  gang.gang = true;
  std::vector<Case> cases{
      {"one task above the limit", CoreHarness::Fractional("gpu", 400'000, 1024),
       StatusCode::kFailedPrecondition,
       "quota of acme/research in pool gpu: limit 200 TFLOPS, job needs 400 TFLOPS"},
      {"gang above the limit", gang, StatusCode::kFailedPrecondition,
       "quota of acme/research in pool gpu: limit 200 TFLOPS, job needs 300 TFLOPS"},
      // Three separate tasks of 100 each: each fits the limit, they take turns.
      {"tasks that take turns", CoreHarness::Fractional("gpu", 100'000, 1024, 3), StatusCode::kOk,
       ""},
  };
  for (const Case& c : cases) {
    Result<JobRecord> r = h.Submit(CoreHarness::As("acme/research/alice", c.spec));
    EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status().ToString();
    if (c.code != StatusCode::kOk) {
      EXPECT_EQ(r.status().message(), c.message) << c.name;
    }
  }
  // Quotas are opt-in: a tenant no quota covers, registered or not, is not limited.
  EXPECT_TRUE(
      h.Submit(CoreHarness::As("globex/ml", CoreHarness::Fractional("gpu", 400'000, 1024))).ok());
}

TEST(TenancyTest, FitsTheLimitButNotNowWaitsAndSaysSo) {
  CoreHarness h;
  AcmeTree(h);
  ASSERT_TRUE(
      h.SetQuota("acme/research", "gpu", CoreHarness::Tflops(100), CoreHarness::Tflops(200)).ok());
  Result<JobRecord> a = h.Submit(
      CoreHarness::As("acme/research/alice", CoreHarness::Fractional("gpu", 180'000, 1024)));
  Result<JobRecord> b =
      h.Submit(CoreHarness::As("acme/research/bob", CoreHarness::Fractional("gpu", 40'000, 1024)));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(h.Task(a->id).state, TaskState::kScheduled);
  // Bob's 40 on top of alice's 180 is 220 > research's 200: the parent's quota binds the child.
  EXPECT_EQ(h.Task(b->id).state, TaskState::kPending);
  EXPECT_EQ(h.Task(b->id).reason,
            "waiting: quota acme/research at 180/200 TFLOPS in pool gpu (task needs 40 TFLOPS)");
  EXPECT_EQ(h.Task(b->id).pending,
            (PendingVerdict{PendingCode::kOverQuota, "acme/research in pool gpu: tflops", {}}));
  Result<QuotaView> q = h.core->GetQuota("acme/research", "gpu");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->used.resources.milli_tflops, 180'000);
  EXPECT_EQ(q->borrowed.resources.milli_tflops, 80'000);  // 180 used − 100 guaranteed
  // Alice finishes: bob goes.
  h.Report("n1", a->id, 0, TaskState::kRunning);
  h.Report("n1", a->id, 0, TaskState::kSucceeded);
  EXPECT_EQ(h.Task(b->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.core->GetQuota("acme/research", "gpu")->used.resources.milli_tflops, 40'000);
}

TEST(TenancyTest, DeviceQuotaCountsWholeGpus) {
  CoreHarness h;
  AcmeTree(h);
  ASSERT_TRUE(h.SetQuota("acme", "gpu", CoreHarness::Devices(1), CoreHarness::Devices(1)).ok());
  EXPECT_EQ(
      h.Submit(CoreHarness::As("acme/research", CoreHarness::Whole("gpu", 2))).status().message(),
      "quota of acme in pool gpu: limit 1 device(s), job needs 2 device(s)");
  Result<JobRecord> one =
      h.Submit(CoreHarness::As("acme/research", CoreHarness::Whole("gpu", 1, 2)));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(h.Task(one->id, 0).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(one->id, 1).reason,
            "waiting: quota acme at 1/1 device(s) in pool gpu (task needs 1 device(s))");
}

TEST(TenancyTest, AdminRulesAndErrors) {
  CoreHarness h;
  AcmeTree(h);
  TenantRecord orphan{"initech/ml", 0};
  EXPECT_EQ(h.Sync<TenantView>([&](auto cb) { h.core->CreateTenant(orphan, cb); }).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      h.Sync<bool>([&](auto cb) { h.core->DeleteTenant("acme/research", cb); }).status().code(),
      StatusCode::kFailedPrecondition);  // has children
  EXPECT_EQ(h.SetQuota("acme", "nope", CoreHarness::Tflops(1), CoreHarness::Tflops(1)).code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(h.SetQuota("acme", "gpu", CoreHarness::Tflops(100), CoreHarness::Tflops(200)).ok());
  Status child =
      h.SetQuota("acme/research", "gpu", CoreHarness::Tflops(50), CoreHarness::Tflops(300));
  EXPECT_EQ(child.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(child.message(),
            "quota of acme/research in pool gpu: limit 300 TFLOPS exceeds the limit of parent acme "
            "(200 TFLOPS)");
  ASSERT_TRUE(
      h.SetQuota("acme/research", "gpu", CoreHarness::Tflops(50), CoreHarness::Tflops(150)).ok());
  EXPECT_EQ(h.core->ListQuotas("acme", "").size(), 2u);
  EXPECT_EQ(h.core->ListQuotas("acme/research", "gpu").size(), 1u);
  EXPECT_EQ(h.core->ListQuotas("", "other").size(), 0u);
  Result<TenantView> research = h.core->GetTenant("acme/research");
  ASSERT_TRUE(research.ok());
  ASSERT_EQ(research->quotas.size(), 1u);
  EXPECT_EQ(research->quotas[0].quota.limit.resources.milli_tflops, 150'000);
  ASSERT_TRUE(h.Sync<bool>([&](auto cb) { h.core->DeleteQuota("acme/research", "gpu", cb); }).ok());
  EXPECT_EQ(h.core->GetQuota("acme/research", "gpu").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(h.core->ListTenants("acme/research").size(), 3u);  // research, alice, bob
  EXPECT_EQ(h.core->ListTenants("").size(), 4u);
  ASSERT_TRUE(h.Sync<bool>([&](auto cb) { h.core->DeleteTenant("acme/research/bob", cb); }).ok());
  EXPECT_EQ(h.core->GetTenant("acme/research/bob").status().code(), StatusCode::kNotFound);
  Result<std::vector<EventRecord>> events = h.store->ListEvents("tenant/acme", 100);
  ASSERT_TRUE(events.ok());
  EXPECT_GE(events->size(), 8u);  // 4 created (acme…), 3 quota changes, 1 deleted
}

TEST(TenancyTest, TenantsAndQuotasSurviveRestartAndUsageIsRebuilt) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t job_id = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    AcmeTree(h);
    ASSERT_TRUE(
        h.SetQuota("acme/research", "gpu", CoreHarness::Tflops(100), CoreHarness::Tflops(200))
            .ok());
    Result<JobRecord> job = h.Submit(
        CoreHarness::As("acme/research/alice", CoreHarness::Fractional("gpu", 150'000, 1024)));
    ASSERT_TRUE(job.ok());
    job_id = job->id;
    h.Report("n1", job_id, 0, TaskState::kRunning);
  }
  CoreHarness h(SchedulerOptions::Defaults(), db);
  EXPECT_EQ(h.core->ListTenants("").size(), 4u);
  Result<QuotaView> q = h.core->GetQuota("acme/research", "gpu");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->quota.limit.resources.milli_tflops, 200'000);
  EXPECT_EQ(q->used.resources.milli_tflops, 150'000);  // the running task, charged again
  h.agents.connected.insert("n1");
  Result<JobRecord> more =
      h.Submit(CoreHarness::As("acme/research/bob", CoreHarness::Fractional("gpu", 100'000, 1024)));
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(h.Task(more->id).reason,
            "waiting: quota acme/research at 150/200 TFLOPS in pool gpu (task needs 100 TFLOPS)");
}

TEST(TenancyTest, WhyPendingSaysBehindHigherPriority) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  Result<JobRecord> busy = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(busy.ok());
  h.Report("n1", busy->id, 0, TaskState::kRunning);
  // Two normal tasks wait (normal may not preempt), then a low one behind them.
  Result<JobRecord> normal = h.Submit(CoreHarness::Whole("gpu", 1, 2));
  JobSpec low = CoreHarness::Whole("gpu", 1);
  low.priority_class = "low";
  Result<JobRecord> lowjob = h.Submit(low);
  ASSERT_TRUE(normal.ok() && lowjob.ok());
  h.core->Schedule();
  EXPECT_EQ(h.Task(normal->id, 1).pending.code, PendingCode::kNoCapacity)
      << h.Task(normal->id, 1).reason;
  ASSERT_EQ(h.Task(normal->id, 1).pending.nodes_by_reason.size(), 1u);
  EXPECT_EQ(h.Task(normal->id, 1).pending.nodes_by_reason[0].second, 1);
  EXPECT_EQ(h.Task(lowjob->id).pending.code, PendingCode::kNoCapacity) << h.Task(lowjob->id).reason;
  // The display text adds what the code cannot say: how many wait ahead of it.
  EXPECT_TRUE(h.Task(lowjob->id).reason.ends_with("; behind 2 task(s) of higher priority"))
      << h.Task(lowjob->id).reason;
}

}  // namespace
}  // namespace gpupool
