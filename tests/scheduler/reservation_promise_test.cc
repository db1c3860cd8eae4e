// What a preemption promises (scheduler/core_preempt_room.cc): the room and the quota of a
// reservation belong to its preemptor until it takes them, so the victims are stopped once, not
// again and again. The two bugs the cluster twin found, as core scenarios on the deterministic
// core: a room given up over a quota limit (the victim restarts in it and is preempted at the
// next pass), and the free CPU of one room promised to a second preemptor.
#include <gtest/gtest.h>

#include "scheduler/core.h"
#include "scheduler/tenancy.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;
using testing::kSecond;

JobSpec Of(const std::string& cls, const std::string& tenant, JobSpec spec) {
  spec.priority_class = cls;
  spec.tenant = tenant;
  return spec;
}

// Two 1-GPU nodes; tenant a may hold one device, b and c have no quota.
void OneDeviceForA(CoreHarness& h) {
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  for (const char* t : {"a", "b", "c"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  ASSERT_TRUE(h.SetQuota("a", "gpu", {}, CoreHarness::Devices(1)).ok());
}

// a's high task preempts b's low one; before the victim has stopped, a GPU frees elsewhere and
// a's normal task would take it — the quota the room was made for. The reservation holds that
// quota: the normal task waits, the high task takes its room, the victim is stopped once and
// restarts on the free GPU.
TEST(ReservationPromiseTest, TheRoomsQuotaIsHeldUntilThePreemptorTakesIt) {
  SchedulerOptions opts = SchedulerOptions::Defaults();
  opts.tenancy.preemption_backoff_ms = 0;  // the victim restarts at once (core_backoff.cc)
  CoreHarness h(opts);
  OneDeviceForA(h);
  Result<JobRecord> c = h.Submit(Of("normal", "c", CoreHarness::Whole("gpu", 1)));
  Result<JobRecord> low = h.Submit(Of("low", "b", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(c.ok() && low.ok());
  h.RunStarted();
  Result<JobRecord> second = h.Submit(Of("normal", "a", CoreHarness::Whole("gpu", 1)));
  Result<JobRecord> high = h.Submit(Of("high", "a", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(second.ok() && high.ok());
  ASSERT_EQ(h.agents.stops.size(), 1u);  // low; c's normal task is within its minimum runtime
  EXPECT_EQ(h.agents.stops[0].second.task_id, TaskId(low->id, 0));
  const std::string room = h.Task(low->id).node;

  h.Report(h.Task(c->id).node, c->id, 0, TaskState::kSucceeded);  // a GPU frees
  EXPECT_EQ(h.Task(second->id).state, TaskState::kPending);
  EXPECT_EQ(h.Task(second->id).pending.code, PendingCode::kOverQuota) << h.Task(second->id).reason;
  EXPECT_EQ(h.Task(second->id).reason,
            "waiting: quota a at 1/1 device(s) in pool gpu (task needs 1 device(s))");

  h.ExitStopped();
  EXPECT_EQ(h.Task(high->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(high->id).node, room);
  EXPECT_EQ(h.Task(low->id).state, TaskState::kScheduled);  // restarted on the other GPU
  EXPECT_NE(h.Task(low->id).node, room);
  EXPECT_EQ(h.Task(second->id).state, TaskState::kPending);
  EXPECT_EQ(h.core->GetQuota("a", "gpu")->used.devices, 1);

  // Later passes leave the restarted victim alone: a stays at its limit.
  h.RunStarted();
  for (int i = 0; i < 3; ++i) {
    h.clock.Advance(kSecond);
    h.core->Tick();
    h.Drain();
  }
  EXPECT_EQ(h.agents.stops.size(), 1u);
}

// The twin's ping-pong: a's limit is in TFLOPS, which a whole-GPU request does not state until
// it is placed. a already holds one H100's worth; its high task must not preempt for a second
// GPU that would put a over its limit (the room would be given up when it came due, the victim
// would restart in it, and the next pass would preempt it again).
TEST(ReservationPromiseTest, NoPreemptionForRoomThatWouldPutTheChainOverItsLimit) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  for (const char* t : {"a", "b"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  ASSERT_TRUE(h.SetQuota("a", "gpu", {}, CoreHarness::Tflops(989)).ok());
  Result<JobRecord> first = h.Submit(Of("normal", "a", CoreHarness::Whole("gpu", 1)));
  Result<JobRecord> low = h.Submit(Of("low", "b", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(first.ok() && low.ok());
  h.RunStarted();
  Result<JobRecord> high = h.Submit(Of("high", "a", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(high.ok());
  for (int i = 0; i < 5; ++i) {
    h.clock.Advance(kSecond);
    h.core->Tick();
    h.Drain();
    h.ExitStopped();
  }
  EXPECT_TRUE(h.agents.stops.empty());
  EXPECT_EQ(h.Task(high->id).pending.code, PendingCode::kOverQuota) << h.Task(high->id).reason;
  EXPECT_EQ(h.Task(high->id).reason,
            "waiting: quota a at 989/989 TFLOPS in pool gpu (task needs 989 TFLOPS)");
  EXPECT_EQ(h.Task(low->id).state, TaskState::kRunning);
}

// Within one tenant at its limit, a high task may still preempt the tenant's own low task: the
// victim's usage leaves the chain when it stops.
TEST(ReservationPromiseTest, ATenantAtItsLimitMayPreemptItsOwnLowerTask) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.CreateTenant("a").ok());
  ASSERT_TRUE(h.SetQuota("a", "gpu", {}, CoreHarness::Tflops(989)).ok());
  Result<JobRecord> low = h.Submit(Of("low", "a", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(low.ok());
  h.RunStarted();
  Result<JobRecord> high = h.Submit(Of("high", "a", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(high.ok());
  ASSERT_EQ(h.agents.stops.size(), 1u);
  h.ExitStopped();
  EXPECT_EQ(h.Task(high->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(low->id).state, TaskState::kPending);
}

JobSpec WithCpu(JobSpec spec, int64_t cores) {
  spec.task_template.resources.cpu_milli = cores * 1000;
  return spec;
}

// One node, 3 GPUs, 64 cores. low v1 (30 cores), low v2 (4 cores) and a young normal task
// (4 cores) hold the GPUs; 26 cores are free. h1 (1 GPU, 50 cores) preempts v1: its room is
// v1's GPU and 30 cores plus 20 of the free 26. h2 (1 GPU, 20 cores) would fit now in v2's GPU
// with v2's 4 cores and 16 free ones — the free cores h1 counts on. Once the room of h1 is
// counted as taken, v2 makes room for only 10 cores: h2 must not preempt, and h1 gets its room
// when v1 is gone (the twin saw "reserved room no longer fits … cpu: need 9810, free 2876").
TEST(ReservationPromiseTest, OneRoomsFreeCpuIsNotPromisedToASecondPreemptor) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 3).ok());
  Result<JobRecord> v1 = h.Submit(WithCpu(Of("low", "b", CoreHarness::Whole("gpu", 1)), 30));
  Result<JobRecord> v2 = h.Submit(WithCpu(Of("low", "b", CoreHarness::Whole("gpu", 1)), 4));
  Result<JobRecord> young = h.Submit(WithCpu(Of("normal", "b", CoreHarness::Whole("gpu", 1)), 4));
  ASSERT_TRUE(v1.ok() && v2.ok() && young.ok());
  h.RunStarted();
  Result<JobRecord> h1 = h.Submit(WithCpu(Of("high", "a", CoreHarness::Whole("gpu", 1)), 50));
  ASSERT_TRUE(h1.ok());
  ASSERT_EQ(h.agents.stops.size(), 1u);
  EXPECT_EQ(h.agents.stops[0].second.task_id, TaskId(v1->id, 0));
  Result<JobRecord> h2 = h.Submit(WithCpu(Of("high", "a", CoreHarness::Whole("gpu", 1)), 20));
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(h.agents.stops.size(), 1u) << "v2 was stopped for cores promised to h1";
  EXPECT_EQ(h.Task(h2->id).state, TaskState::kPending);
  h.ExitStopped();
  EXPECT_EQ(h.Task(h1->id).state, TaskState::kScheduled) << h.Task(h1->id).reason;
  EXPECT_EQ(h.Task(v2->id).state, TaskState::kRunning);
}

TEST(ReservationPromiseTest, HeldQuotaCountsForLimitsAndGuaranteesNotForUsage) {
  TenantBook book;
  for (const char* t : {"o", "o/p"}) {
    TenantRecord r;
    r.path = t;
    book.PutTenant(r);
  }
  book.PutQuota(QuotaRecord{"o", "gpu", CoreHarness::Devices(2), CoreHarness::Devices(3)});
  book.Charge("gpu", "o/p", CoreHarness::Devices(1), +1, 0);
  book.Hold("gpu", "o/p", CoreHarness::Devices(1), +1);
  EXPECT_EQ(book.Used("gpu", "o").devices, 1);
  EXPECT_EQ(book.Held("gpu", "o").devices, 1);
  // 1 used + 1 held + 1 = 3 ≤ 3; + 2 is over.
  EXPECT_EQ(book.WhyOverLimit("gpu", "o/p", CoreHarness::Devices(1)), "");
  EXPECT_EQ(book.WhyOverLimit("gpu", "o/p", CoreHarness::Devices(2)),
            "quota o at 2/3 device(s) in pool gpu (task needs 2 device(s))");
  // Freeing a task of the chain makes room again; one outside it does not.
  EXPECT_EQ(book.WhyOverLimitFreeing("gpu", "o/p", CoreHarness::Devices(2),
                                     {{"o/p", CoreHarness::Devices(1)}}),
            "");
  EXPECT_NE(book.WhyOverLimitFreeing("gpu", "o/p", CoreHarness::Devices(2),
                                     {{"x", CoreHarness::Devices(1)}}),
            "");
  // The guarantee (2) is full with 1 used + 1 held.
  EXPECT_FALSE(book.WithinGuarantee("gpu", "o/p", CoreHarness::Devices(1)));
  book.Hold("gpu", "o/p", CoreHarness::Devices(1), -1);
  EXPECT_TRUE(book.WithinGuarantee("gpu", "o/p", CoreHarness::Devices(1)));
}

}  // namespace
}  // namespace gpupool
