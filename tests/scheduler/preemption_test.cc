// Scenario tests of preemption on the deterministic core: the cheapest victims, minimum runtime,
// the reservation of freed room, gangs stopped and restarted whole, reclaim of guarantees, and
// the events and metrics a preemption leaves.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "scheduler/core.h"
#include "scheduler/metrics.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;
using testing::Of;

using testing::kSecond;

std::vector<std::string> StoppedTasks(const CoreHarness& h) {
  std::vector<std::string> out;
  for (const auto& [node, cmd] : h.agents.stops) out.push_back(cmd.task_id);
  return out;
}

// One running whole-GPU task per 1-GPU node; a "high" task arrives and needs one GPU.
TEST(PreemptionTest, ChoosesTheCheapestVictim) {
  struct Running {
    std::string cls;
    int64_t started_ago_s;
  };
  struct Case {
    std::string name;
    std::vector<Running> running;
    int expected_victim;  // index into running, -1: none
  };
  // Default classes: low 0 (min runtime 0), normal 100 (min runtime 60 s), high 1000.
  std::vector<Case> cases{
      {"least work lost", {{"low", 100}, {"low", 50}}, 1},  // 50 s lost < 100 s
      {"lowest priority before work lost", {{"normal", 500}, {"low", 10}}, 1},
      {"minimum runtime respected", {{"normal", 30}, {"normal", 120}}, 1},  // 30 s < 60 s
      {"nothing past its minimum runtime", {{"normal", 30}, {"normal", 59}}, -1},
  };
  for (const Case& c : cases) {
    CoreHarness h;
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    std::vector<int64_t> jobs;
    for (size_t i = 0; i < c.running.size(); ++i) {
      ASSERT_TRUE(h.Register("n" + std::to_string(i), "gpu", 1).ok());
      Result<JobRecord> j = h.Submit(Of(c.running[i].cls, CoreHarness::Whole("gpu", 1)));
      ASSERT_TRUE(j.ok());
      jobs.push_back(j->id);
    }
    // Start them oldest first so each has run `started_ago_s` when the high task arrives.
    int64_t t0 = h.clock.NowMicros(), oldest = 0;
    for (const Running& r : c.running) oldest = std::max(oldest, r.started_ago_s);
    std::vector<size_t> order(c.running.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return c.running[a].started_ago_s > c.running[b].started_ago_s;
    });
    for (size_t i : order) {
      h.clock.Set(t0 + (oldest - c.running[i].started_ago_s) * kSecond);
      h.Report(h.Task(jobs[i]).node, jobs[i], 0, TaskState::kRunning);
    }
    h.clock.Set(t0 + oldest * kSecond);
    Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
    ASSERT_TRUE(high.ok());
    if (c.expected_victim < 0) {
      EXPECT_TRUE(h.agents.stops.empty()) << c.name;
      EXPECT_EQ(h.Task(high->id).pending.code, PendingCode::kNoCapacity) << c.name;
      continue;
    }
    EXPECT_EQ(StoppedTasks(h),
              std::vector<std::string>{TaskId(jobs[static_cast<size_t>(c.expected_victim)], 0)})
        << c.name;
  }
}

TEST(PreemptionTest, MinimumRuntimeDelaysPreemptionUntilItIsOver) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  Result<JobRecord> normal = h.Submit(CoreHarness::Whole("gpu", 1));  // normal: 60 s minimum
  ASSERT_TRUE(normal.ok());
  h.RunStarted();
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(high.ok());
  for (int64_t s : {20, 20, 19}) {  // 59 s in: still protected
    h.clock.Advance(s * kSecond);
    h.core->OnHeartbeat("n0", {});
    h.core->Tick();
    h.Drain();
  }
  EXPECT_TRUE(h.agents.stops.empty());
  h.clock.Advance(1 * kSecond);  // 60 s: fair game
  h.core->OnHeartbeat("n0", {});
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(StoppedTasks(h), std::vector<std::string>{TaskId(normal->id, 0)});
}

TEST(PreemptionTest, FewestVictimsWin) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  // n0: two half-GPU low tasks (494.5 TFLOPS, 40 GiB each); n1: one whole-GPU-sized low task
  // that started an hour earlier. Work lost: n0 2 × 600 s = 1200 s, n1 3600 + 600 = 4200 s;
  // still one victim on n1 beats two on n0.
  Result<JobRecord> full = h.Submit(Of("low", CoreHarness::Fractional("gpu", 989'000, 81'920)));
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(h.Task(full->id).node, "n0");
  h.RunStarted();
  h.clock.Advance(3600 * kSecond);
  Result<JobRecord> halves =
      h.Submit(Of("low", CoreHarness::Fractional("gpu", 494'500, 40'960, 2)));
  ASSERT_TRUE(halves.ok());
  ASSERT_EQ(h.Task(halves->id, 1).node, "n1");
  h.RunStarted();
  h.clock.Advance(600 * kSecond);
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Fractional("gpu", 989'000, 81'920)));
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(StoppedTasks(h), std::vector<std::string>{TaskId(full->id, 0)});
}

// The scenario through the core: a low-priority pool of 16 GPUs holds one 4-GPU task and
// twelve 1-GPU tasks; a high-priority job asks for 4 GPUs and exactly one task is stopped, the
// 4-GPU one (the per-node greedy search used to stop four 1-GPU tasks).
TEST(PreemptionTest, OneFourGpuVictimRatherThanFourSmallOnes) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 8).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 8).ok());
  Result<JobRecord> big = h.Submit(Of("low", CoreHarness::Whole("gpu", 4)));
  ASSERT_TRUE(big.ok());
  Result<JobRecord> small = h.Submit(Of("low", CoreHarness::Whole("gpu", 1, 12)));
  ASSERT_TRUE(small.ok());
  for (int32_t i = 0; i < 12; ++i) ASSERT_EQ(h.Task(small->id, i).state, TaskState::kScheduled);
  const std::string big_node = h.Task(big->id).node;
  h.RunStarted();
  h.clock.Advance(3600 * kSecond);  // past every minimum runtime
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Whole("gpu", 4)));
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(StoppedTasks(h), std::vector<std::string>{TaskId(big->id, 0)});
  EXPECT_EQ(h.Task(high->id).pending.code, PendingCode::kWaitingForVictims);
  h.ExitStopped();
  EXPECT_EQ(h.Task(high->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(high->id).node, big_node);  // the room its victim left
}

// The room victims leave is kept for the preemptor even while they stop one by one.
TEST(PreemptionTest, FreedRoomIsReservedAndVictimsRequeue) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  Result<JobRecord> victims =
      h.Submit(Of("low", CoreHarness::Fractional("gpu", 494'500, 40'960, 2)));
  ASSERT_TRUE(victims.ok());
  h.RunStarted();
  h.clock.Advance(10 * kSecond);
  // A low half-GPU task waits; then a high whole-GPU-sized one arrives.
  Result<JobRecord> waiting = h.Submit(Of("low", CoreHarness::Fractional("gpu", 494'500, 40'960)));
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Fractional("gpu", 989'000, 81'920)));
  ASSERT_TRUE(waiting.ok() && high.ok());
  ASSERT_EQ(h.agents.stops.size(), 2u);
  EXPECT_EQ(h.agents.stops[0].second.grace_period_ms, 10'000);
  std::string v0 = TaskId(victims->id, 0), v1 = TaskId(victims->id, 1);
  EXPECT_EQ(h.Task(high->id).reason,
            "waiting for 2 preempted task(s) to stop on n0: " + v0 + ", " + v1);
  // The victim's stop and its preemptor are typed facts (the reason is display text).
  EXPECT_EQ(h.Task(victims->id, 0).stop, StopIntent::kPreempt);
  EXPECT_EQ(h.Task(victims->id, 0).preempted_by,
            (Preemption{high->id, 0, PreemptRule::kPriority, /*reserved=*/true}))
      << h.Task(victims->id, 0).reason;
  EXPECT_EQ(h.Task(high->id).pending.code, PendingCode::kWaitingForVictims);

  // The first victim stops: its half GPU is free in the engine's eyes only for the reservation.
  h.Report("n0", victims->id, 0, TaskState::kFailed, 143);
  EXPECT_EQ(h.Task(victims->id, 0).state, TaskState::kPending);
  EXPECT_EQ(h.Task(waiting->id).state, TaskState::kPending);
  EXPECT_EQ(h.Task(high->id).state, TaskState::kPending);
  // The second stops: the high task takes the whole room; the waiting task still waits.
  h.Report("n0", victims->id, 1, TaskState::kFailed, 143);
  EXPECT_EQ(h.Task(high->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(waiting->id).state, TaskState::kPending);
  EXPECT_EQ(h.Task(victims->id, 0).attempt, 1);  // a new attempt; no retry spent

  // The victim's owner sees why, under the job and under the task.
  Result<std::vector<EventRecord>> events =
      h.store->ListEvents("job/" + std::to_string(victims->id), 100);
  ASSERT_TRUE(events.ok());
  int preempted = 0;
  for (const EventRecord& e : *events) preempted += e.kind == "task.preempted";
  EXPECT_EQ(preempted, 2);
  events = h.store->ListEvents("task/" + v0, 100);
  ASSERT_TRUE(events.ok());
  bool stopped = false, requeued = false;
  for (const EventRecord& e : *events) {
    stopped |= e.kind == "task.preempted" && e.message.find("rule priority") != std::string::npos;
    requeued |= e.kind == "task.state" && e.message.starts_with("PREEMPTED: preempted by task");
  }
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(requeued);
}

TEST(PreemptionTest, VictimStoppingAcrossARestartIsStillRequeued) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t victim = 0, high = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
    Result<JobRecord> v = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)));
    ASSERT_TRUE(v.ok());
    h.RunStarted();
    Result<JobRecord> hi = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
    ASSERT_TRUE(hi.ok());
    ASSERT_EQ(h.agents.stops.size(), 1u);
    victim = v->id;
    high = hi->id;
  }
  // The daemon restarts before the victim's exit arrives; its agent reconnects still running it.
  CoreHarness h(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(h.Register("n0", "gpu", 1, {{TaskId(victim, 0), 0}}).ok());
  ASSERT_EQ(h.agents.stops.size(), 1u);  // the stop is sent again
  h.ExitStopped();
  EXPECT_EQ(h.Task(victim).state, TaskState::kPending);  // requeued, not failed
  EXPECT_EQ(h.Task(victim).attempt, 1);
  EXPECT_EQ(h.Task(high).state, TaskState::kScheduled);
}

// The daemon restarts while a victim stops: its preemptor waits for that victim instead of
// preempting a second task for the same room.
TEST(PreemptionTest, PreemptorDoesNotPreemptAgainAfterARestart) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t a = 0, b = 0, high = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
    a = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)))->id;
    b = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)))->id;
    h.RunStarted();
    high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)))->id;
    ASSERT_EQ(h.agents.stops.size(), 1u);
  }
  CoreHarness h(SchedulerOptions::Defaults(), db);
  for (const char* node : {"n0", "n1"}) ASSERT_TRUE(h.Reconnect(node, "gpu", 1).ok());
  h.core->Tick();
  h.Drain();
  ASSERT_EQ(h.agents.stops.size(), 1u) << "only the first victim is stopped (again)";
  EXPECT_EQ(h.Task(high).pending.code, PendingCode::kWaitingForVictims) << h.Task(high).reason;
  h.ExitStopped();
  EXPECT_EQ(h.Task(high).state, TaskState::kScheduled);
  int running = 0;
  for (int64_t id : {a, b})
    running += h.Task(id).state == TaskState::kScheduled || h.Task(id).state == TaskState::kRunning;
  EXPECT_EQ(running, 1);
}

// A low gang of two whole GPUs runs on n0 and n1; a high task of one GPU preempts it. Returns
// the gang's and the high job's ids.
std::pair<int64_t, int64_t> PreemptAGang(CoreHarness& h) {
  EXPECT_TRUE(h.CreatePool("gpu").ok());
  EXPECT_TRUE(h.Register("n0", "gpu", 1).ok());
  EXPECT_TRUE(h.Register("n1", "gpu", 1).ok());
  JobSpec gang = Of("low", CoreHarness::Whole("gpu", 1, 2));
  gang.gang = true;
  Result<JobRecord> g = h.Submit(gang);
  h.RunStarted();
  h.clock.Advance(30 * kSecond);
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
  EXPECT_TRUE(g.ok() && high.ok());
  return {g.ok() ? g->id : 0, high.ok() ? high->id : 0};
}

TEST(PreemptionTest, GangIsPreemptedAndRestartedWhole) {
  CoreHarness h;
  auto [gang_id, high_id] = PreemptAGang(h);
  Result<JobRecord> g = h.core->GetJob(gang_id);
  Result<JobRecord> high = h.core->GetJob(high_id);
  ASSERT_TRUE(g.ok() && high.ok());
  // One GPU is enough, but the victim's gang stops whole: two stops.
  ASSERT_EQ(h.agents.stops.size(), 2u);
  h.Report(h.agents.stops[0].first, g->id, 0, TaskState::kFailed, 143);
  // One member gone, one still stopping: nothing of the gang is placed partially.
  EXPECT_EQ(h.Task(g->id, 0).state, TaskState::kPending);
  h.ExitStopped();
  EXPECT_EQ(h.Task(high->id).state, TaskState::kScheduled);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(h.Task(g->id, i).state, TaskState::kPending);
    EXPECT_EQ(h.Task(g->id, i).attempt, 1);
  }
  EXPECT_EQ(h.Task(g->id, 0).pending.code, PendingCode::kGangWaiting) << h.Task(g->id, 0).reason;
  // The high task ends: the gang comes back whole.
  h.Report(h.Task(high->id).node, high->id, 0, TaskState::kRunning);
  h.Report(h.Task(high->id).node, high->id, 0, TaskState::kSucceeded);
  EXPECT_EQ(h.Task(g->id, 0).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(g->id, 1).state, TaskState::kScheduled);
}

// The daemon restarts while a preempted gang is half stopped: the member already requeued must
// still wait for the one stopping, even when a new node offers it room on its own.
TEST(PreemptionTest, GangRestartSurvivesADaemonRestart) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t gang_id = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    gang_id = PreemptAGang(h).first;
    ASSERT_EQ(h.agents.stops.size(), 2u);
    int32_t first = 0;
    ASSERT_TRUE(ParseTaskId(h.agents.stops[0].second.task_id, &gang_id, &first));
    h.Report(h.agents.stops[0].first, gang_id, first, TaskState::kFailed, 143);
  }
  CoreHarness h(SchedulerOptions::Defaults(), db);
  // The agents reconnect with what they still run; then a new node joins with a free GPU.
  for (const char* node : {"n0", "n1"}) ASSERT_TRUE(h.Reconnect(node, "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n2", "gpu", 1).ok());
  int pending = 0;
  for (int i = 0; i < 2; ++i) pending += h.Task(gang_id, i).state == TaskState::kPending;
  EXPECT_EQ(pending, 1) << "the requeued member must not start while its peer is stopping";
  // The stopping member exits: the gang is placed again whole.
  h.ExitStopped();
  EXPECT_EQ(h.Task(gang_id, 0).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(gang_id, 1).state, TaskState::kScheduled);
}

TEST(PreemptionTest, GangPreemptsForAllItsMembersAndStartsWhole) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  Result<JobRecord> l0 = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)));
  Result<JobRecord> l1 = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(l0.ok() && l1.ok());
  h.RunStarted();
  JobSpec gang = Of("high", CoreHarness::Whole("gpu", 1, 2));
  gang.gang = true;
  Result<JobRecord> g = h.Submit(gang);
  ASSERT_TRUE(g.ok());
  // One victim per member, found as if the first member were already placed.
  EXPECT_EQ(StoppedTasks(h), (std::vector<std::string>{TaskId(l0->id, 0), TaskId(l1->id, 0)}));
  EXPECT_EQ(h.Task(g->id, 1).reason, "gang of 2 waiting for 2 preempted task(s) to stop");
  h.Report("n0", l0->id, 0, TaskState::kFailed, 143);
  // Half the room is free: the gang still starts whole, or not at all.
  EXPECT_EQ(h.Task(g->id, 0).state, TaskState::kPending);
  EXPECT_EQ(h.Task(l0->id).state, TaskState::kPending);  // and its victim cannot take it back
  h.Report("n1", l1->id, 0, TaskState::kFailed, 143);
  EXPECT_EQ(h.Task(g->id, 0).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(g->id, 1).state, TaskState::kScheduled);
}

TEST(PreemptionTest, FreePartOfAReservedRoomIsNotGivenAway) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  // The victim holds half the GPU; the other half is free.
  Result<JobRecord> v = h.Submit(Of("low", CoreHarness::Fractional("gpu", 494'500, 40'960)));
  ASSERT_TRUE(v.ok());
  h.RunStarted();
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Fractional("gpu", 989'000, 81'920)));
  ASSERT_TRUE(high.ok());
  ASSERT_EQ(h.agents.stops.size(), 1u);
  // A half-GPU task would fit the free half now, but that half belongs to the reservation.
  Result<JobRecord> small = h.Submit(Of("low", CoreHarness::Fractional("gpu", 494'500, 40'960)));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(h.Task(small->id).state, TaskState::kPending);
  EXPECT_EQ(h.Task(small->id).reason,
            "waiting: room on n0 is reserved for a preempting task; behind 1 task(s) of higher "
            "priority");
  h.ExitStopped();
  EXPECT_EQ(h.Task(high->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(small->id).state, TaskState::kPending);
}

// Tenants t/a and t/b are each guaranteed 1 of the 2 GPUs and may borrow up to 2.
void TwoTenants(CoreHarness& h) {
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 2).ok());
  for (const char* t : {"t", "t/a", "t/b", "t/c"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  for (const char* t : {"t/a", "t/b"}) {
    ASSERT_TRUE(h.SetQuota(t, "gpu", CoreHarness::Devices(1), CoreHarness::Devices(2)).ok());
  }
}

TEST(PreemptionTest, ReclaimTakesBackBorrowedCapacityAtEqualPriority) {
  SchedulerOptions opts = SchedulerOptions::Defaults();
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry, "test");
  CoreHarness h(opts, nullptr, &metrics);
  TwoTenants(h);
  // a takes both GPUs: one guaranteed, one borrowed (started second).
  Result<JobRecord> a = h.Submit(CoreHarness::As("t/a", CoreHarness::Whole("gpu", 1, 2)));
  ASSERT_TRUE(a.ok());
  h.RunStarted();
  EXPECT_EQ(h.core->GetQuota("t/a", "gpu")->borrowed.devices, 1);
  // c has no guarantee: at equal priority it cannot take anything back.
  Result<JobRecord> c = h.Submit(CoreHarness::As("t/c", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(c.ok());
  h.clock.Advance(61 * kSecond);  // past normal's 60 s minimum runtime
  h.core->Schedule();
  h.Drain();
  EXPECT_TRUE(h.agents.stops.empty());
  // b is under its guarantee (0 + 1 ≤ 1): it reclaims a's borrowed GPU, not a's guaranteed one.
  Result<JobRecord> b = h.Submit(CoreHarness::As("t/b", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(h.agents.stops.size(), 1u);
  EXPECT_EQ(h.agents.stops[0].second.task_id, TaskId(a->id, 1));
  EXPECT_EQ(h.Task(a->id, 1).preempted_by,
            (Preemption{b->id, 0, PreemptRule::kReclaim, /*reserved=*/true}))
      << h.agents.stops[0].second.reason;
  h.ExitStopped();
  EXPECT_EQ(h.Task(b->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(c->id).state, TaskState::kPending);  // b had the reservation, c still waits
  // a, now at its guarantee, does not reclaim back: no second stop.
  h.clock.Advance(120 * kSecond);
  h.RunStarted();
  h.core->OnHeartbeat("n0", {});
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(h.agents.stops.size(), 1u);
  EXPECT_EQ(h.core->GetQuota("t/b", "gpu")->used.devices, 1);
  EXPECT_EQ(h.core->GetQuota("t/a", "gpu")->borrowed.devices, 0);

  // Metrics: one preemption by reclaim; a's quota gauges.
  std::map<std::string, double> seen;
  for (const prometheus::MetricFamily& f : registry->Collect()) {
    for (const prometheus::ClientMetric& m : f.metric) {
      std::string key = f.name;
      for (const prometheus::ClientMetric::Label& l : m.label) key += "," + l.name + "=" + l.value;
      seen[key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  EXPECT_EQ(seen["gpupool_preemptions_total,cause=reclaim"], 1);
  EXPECT_EQ(seen["gpupool_tenant_quota_devices,kind=guaranteed,pool=gpu,tenant=t/a"], 1);
  EXPECT_EQ(seen["gpupool_tenant_quota_devices,kind=limit,pool=gpu,tenant=t/a"], 2);
  EXPECT_EQ(seen["gpupool_tenant_quota_devices,kind=used,pool=gpu,tenant=t/a"], 1);
  EXPECT_EQ(seen["gpupool_tenant_quota_devices,kind=borrowed,pool=gpu,tenant=t/a"], 0);
}

TEST(PreemptionTest, WholeGpuReclaimCountsTheGpusTflops) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 2).ok());
  for (const char* t : {"t", "t/a", "t/b"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  // a is guaranteed one H100's worth of compute, b nothing.
  ASSERT_TRUE(h.SetQuota("t/a", "gpu", CoreHarness::Tflops(989), {}).ok());
  ASSERT_TRUE(h.Submit(CoreHarness::As("t/b", CoreHarness::Whole("gpu", 1))).ok());
  Result<JobRecord> a = h.Submit(CoreHarness::As("t/a", CoreHarness::Whole("gpu", 1, 2)));
  ASSERT_TRUE(a.ok());
  h.RunStarted();
  h.clock.Advance(61 * kSecond);
  h.core->Schedule();
  h.Drain();
  // a holds 989 TFLOPS = its guarantee; a second whole GPU (989 more) is beyond it: no reclaim.
  EXPECT_TRUE(h.agents.stops.empty());
  EXPECT_EQ(h.Task(a->id, 1).state, TaskState::kPending);
}

TEST(PreemptionTest, BorrowedCapacityIsTheFirstVictim) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  for (const char* t : {"p", "p/a", "p/c"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  ASSERT_TRUE(h.SetQuota("p/a", "gpu", CoreHarness::Devices(1), CoreHarness::Devices(2)).ok());
  // c (no guarantee: all it runs is borrowed) started long ago; a's task, within its
  // guarantee, started recently. Same class: the borrowed one goes despite more work lost.
  Result<JobRecord> c = h.Submit(CoreHarness::As("p/c", Of("low", CoreHarness::Whole("gpu", 1))));
  ASSERT_TRUE(c.ok());
  h.RunStarted();
  h.clock.Advance(200 * kSecond);
  Result<JobRecord> a = h.Submit(CoreHarness::As("p/a", Of("low", CoreHarness::Whole("gpu", 1))));
  ASSERT_TRUE(a.ok());
  h.RunStarted();
  h.clock.Advance(50 * kSecond);
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(StoppedTasks(h), std::vector<std::string>{TaskId(c->id, 0)});
}

TEST(PreemptionTest, DisruptionBudgetLimitsVictimsPerWindow) {
  SchedulerOptions opts = SchedulerOptions::Defaults();
  opts.tenancy.disruption_budget_victims = 1;
  opts.tenancy.disruption_budget_window_ms = 600'000;
  CoreHarness h(opts);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 2).ok());
  Result<JobRecord> low = h.Submit(Of("low", CoreHarness::Whole("gpu", 1, 2)));
  ASSERT_TRUE(low.ok());
  h.RunStarted();
  Result<JobRecord> high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1, 2)));
  ASSERT_TRUE(high.ok());
  // acme/research/alice loses one task in the window, not two.
  EXPECT_EQ(h.agents.stops.size(), 1u);
  EXPECT_EQ(h.Task(high->id, 1).pending.code, PendingCode::kDisruptionBudget)
      << h.Task(high->id, 1).reason;
  h.ExitStopped();
  h.clock.Advance(601 * kSecond);  // the window slides
  h.core->OnHeartbeat("n0", {});
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(h.agents.stops.size(), 2u);
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

// The demo's preemption act, which showed a high gang waiting: acme's low work holds all 16 GPUs,
// 12 of them within acme's guarantee. Across tenants even the priority rule takes only what the
// victim's group can spare above its guarantee (core_reclaim.cc), so a gang of 2 × 4 waits, and
// one of 2 × 1 preempts acme's borrowed tasks.
TEST(PreemptionTest, AHighGangFromAnotherTenantTakesOnlyWhatTheVictimsTenantCanSpare) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  for (const char* t : {"acme", "globex"}) {
    ASSERT_TRUE(h.CreateTenant(t).ok());
    ASSERT_TRUE(h.SetQuota(t, "gpu", CoreHarness::Tflops(12000), CoreHarness::Tflops(24000)).ok());
  }
  ASSERT_TRUE(h.Register("n0", "gpu", 8).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 8).ok());
  Result<JobRecord> low =
      h.Submit(CoreHarness::As("acme/bob", Of("low", CoreHarness::Whole("gpu", 1, 16))));
  ASSERT_TRUE(low.ok());
  h.RunStarted();
  // 16 × 989 TFLOPS held against a 12000 guarantee: 3 GPUs' worth borrowed.
  JobSpec big = CoreHarness::As("globex/carol", Of("high", CoreHarness::Whole("gpu", 4, 2)));
  big.gang = true;
  Result<JobRecord> g = h.Submit(big);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(StoppedTasks(h).empty()) << "acme would go below its guarantee";
  ASSERT_TRUE(h.Sync<JobRecord>([&](auto cb) { h.core->CancelJob(g->id, "too big", cb); }).ok());
  JobSpec small = CoreHarness::As("globex/dan", Of("high", CoreHarness::Whole("gpu", 1, 2)));
  small.gang = true;
  Result<JobRecord> s2 = h.Submit(small);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(StoppedTasks(h).size(), 2u) << h.Task(s2->id, 0).reason;
  EXPECT_EQ(h.Task(s2->id, 1).reason, "gang of 2 waiting for 2 preempted task(s) to stop");
}

}  // namespace
}  // namespace gpupool
