// Scenario tests of the change path (plan → persist → apply → act, core_change.cc): a stop is
// sent only once it is stored, a drain survives a daemon restart, a cancel is CANCELLING until its
// tasks stop, and ends reported while the store refuses writes are kept and stored later, never
// shown before they are durable and never run twice. Every step is also held to the harness's
// invariant (memory = store once nothing waits to be stored again).
#include <gtest/gtest.h>

#include "scheduler/core.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;
using testing::kSecond;
using testing::Of;
using testing::StoresStop;

TaskRecord Stored(CoreHarness& h, int64_t job, int index = 0) {
  Result<RecoveredState> s = h.store->Recover();
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return {};
  for (const JobRecord& j : s->jobs) {
    if (j.id == job) return j.tasks[static_cast<size_t>(index)];
  }
  ADD_FAILURE() << "job " << job << " not stored";
  return {};
}

JobState StoredJobStateIn(MemoryStore& store, int64_t job) {
  Result<RecoveredState> s = store.Recover();
  if (!s.ok()) return JobState::kPending;
  for (const JobRecord& j : s->jobs) {
    if (j.id == job) return j.state;
  }
  return JobState::kPending;
}

JobState StoredJobState(CoreHarness& h, int64_t job) { return StoredJobStateIn(*h.store, job); }

Result<NodeView> SetState(CoreHarness& h, const std::string& node, NodeState state) {
  return h.Sync<NodeView>([&](auto cb) { h.core->SetNodeState(node, state, cb); });
}

// A drain's stop intent is a typed column: after a daemon restart mid-drain, the task's exit
// still requeues it (it used to end FAILED, its "stopping: node … is draining" reason lost).
TEST(ChangePathTest, DrainSurvivesADaemonRestart) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t job = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
    job = h.Submit(CoreHarness::Whole("gpu", 1))->id;
    h.RunStarted();
    ASSERT_TRUE(SetState(h, "n1", NodeState::kDraining).ok());
    ASSERT_EQ(h.agents.stops.size(), 1u);
    EXPECT_EQ(Stored(h, job).stop, StopIntent::kDrain);
  }
  CoreHarness h(SchedulerOptions::Defaults(), db);
  EXPECT_EQ(h.Task(job).stop, StopIntent::kDrain);
  ASSERT_TRUE(h.Reconnect("n1", "gpu", 1).ok());
  ASSERT_EQ(h.agents.stops.size(), 1u) << "the stop is sent again on reconnect";
  h.ExitStopped();
  TaskRecord t = h.Task(job);
  EXPECT_EQ(t.state, TaskState::kPending) << "requeued, not ended";
  EXPECT_EQ(t.attempt, 1);
  EXPECT_EQ(t.stop, StopIntent::kNone);
  EXPECT_EQ(h.core->GetJob(job)->state, JobState::kPending);
  // A ready node takes it.
  ASSERT_TRUE(h.Register("n2", "gpu", 1).ok());
  EXPECT_EQ(h.Task(job).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(job).node, "n2");
}

TEST(ChangePathTest, DrainTheStoreRefusesSendsNoStop) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  int64_t job = h.Submit(CoreHarness::Whole("gpu", 1))->id;
  h.RunStarted();
  h.faults.refuse = [](const std::vector<Mutation>&) { return true; };
  Result<NodeView> r = SetState(h, "n1", NodeState::kDraining);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(h.agents.stops.empty());
  EXPECT_EQ(h.core->GetNode("n1")->node.state, NodeState::kReady);
  EXPECT_EQ(h.Task(job).stop, StopIntent::kNone);
  h.faults.refuse = nullptr;
  ASSERT_TRUE(SetState(h, "n1", NodeState::kDraining).ok());
  EXPECT_EQ(h.agents.stops.size(), 1u);
}

// A preemption whose batch the store refuses stops nobody: the victim runs on as if never chosen,
// and the next pass (store back) preempts it properly, once.
TEST(ChangePathTest, StopWhoseCommitFailsIsNotSent) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  int64_t low = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)))->id;
  h.RunStarted();
  h.faults.refuse = [](const std::vector<Mutation>& b) {
    return StoresStop(b, StopIntent::kPreempt);
  };
  int64_t high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)))->id;
  EXPECT_GE(h.faults.refused, 1);
  EXPECT_TRUE(h.agents.stops.empty()) << "a stop that is not stored is not sent";
  TaskRecord v = h.Task(low);
  EXPECT_EQ(v.state, TaskState::kRunning);
  EXPECT_EQ(v.stop, StopIntent::kNone);
  EXPECT_TRUE(v.preempted_by.empty());
  EXPECT_EQ(h.Task(high).state, TaskState::kPending);

  h.faults.refuse = nullptr;
  h.core->Tick();
  h.Drain();
  ASSERT_EQ(h.agents.stops.size(), 1u);
  EXPECT_EQ(h.agents.stops[0].second.task_id, TaskId(low, 0));
  EXPECT_EQ(Stored(h, low).stop, StopIntent::kPreempt);
  EXPECT_EQ(Stored(h, low).preempted_by,
            (Preemption{high, 0, PreemptRule::kPriority, /*reserved=*/true}));
  h.ExitStopped();
  EXPECT_EQ(h.Task(high).state, TaskState::kScheduled);
  // The victim is requeued and still says who preempted it, by which rule.
  v = h.Task(low);
  EXPECT_EQ(v.state, TaskState::kPending);
  EXPECT_EQ(v.stop, StopIntent::kNone);
  EXPECT_EQ(v.preempted_by, (Preemption{high, 0, PreemptRule::kPriority, true}));
}

// CancelJob: nothing changes and nothing is sent before the cancel is stored; a refused cancel
// is an error with the job as it was; a stored one is CANCELLING until the task has stopped.
TEST(ChangePathTest, CancelIsStoredFirstAndCancellingUntilTasksStop) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  int64_t job = h.Submit(CoreHarness::Whole("gpu", 1))->id;
  h.RunStarted();
  auto cancel = [&] {
    return h.Sync<JobRecord>([&](auto cb) { h.core->CancelJob(job, "user asked", cb); });
  };
  h.faults.refuse = [](const std::vector<Mutation>&) { return true; };
  Result<JobRecord> refused = cancel();
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(h.agents.stops.empty());
  EXPECT_EQ(h.core->GetJob(job)->state, JobState::kRunning);
  EXPECT_EQ(h.Task(job).stop, StopIntent::kNone);

  h.faults.refuse = nullptr;
  std::vector<JobState> seen;
  ASSERT_TRUE(h.core->WatchJob(job, [&](const JobChange& c) { seen.push_back(c.job.state); }).ok());
  Result<JobRecord> r = cancel();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, JobState::kCancelling);
  EXPECT_EQ(StoredJobState(h, job), JobState::kCancelling);
  ASSERT_EQ(h.agents.stops.size(), 1u);
  EXPECT_EQ(cancel()->state, JobState::kCancelling) << "asking again changes nothing";
  EXPECT_EQ(h.agents.stops.size(), 1u);
  h.ExitStopped();
  EXPECT_EQ(h.core->GetJob(job)->state, JobState::kCancelled);
  EXPECT_EQ(StoredJobState(h, job), JobState::kCancelled);
  EXPECT_EQ(seen, (std::vector<JobState>{JobState::kRunning, JobState::kCancelling,
                                         JobState::kCancelled}));
}

// A cancel that arrives while the job's last task's end is being stored: the job ends once, as
// CANCELLED or as it ended, never stuck CANCELLING, and memory equals the store.
TEST(ChangePathTest, CancelWhileTheLastEndIsBeingStored) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  int64_t job = h.Submit(CoreHarness::Whole("gpu", 1))->id;
  h.RunStarted();
  TaskReport r;
  r.node = "n1";
  r.task_id = TaskId(job, 0);
  r.attempt = 0;
  r.state = TaskState::kSucceeded;
  h.core->OnTaskReport(r);  // its end is in flight: not drained yet
  std::optional<Result<JobRecord>> cancelled;
  h.core->CancelJob(job, "", [&](Result<JobRecord> c) { cancelled.emplace(std::move(c)); });
  h.Drain();
  ASSERT_TRUE(cancelled.has_value() && cancelled->ok());
  EXPECT_TRUE(IsTerminal(h.core->GetJob(job)->state)) << ToString(h.core->GetJob(job)->state);
  EXPECT_EQ(StoredJobState(h, job), h.core->GetJob(job)->state);
  EXPECT_EQ(h.Task(job).state, TaskState::kSucceeded);
}

// Tasks that end while the store refuses writes: their ends are kept and stored again until the
// store takes them; the API shows the job RUNNING (and the GPUs held) until then; a restart after
// that finds the job SUCCEEDED and runs nothing again.
TEST(ChangePathTest, EndsTheStoreRefusedAreKeptAndStoredLater) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t job = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
    job = h.Submit(CoreHarness::Whole("gpu", 1, 2))->id;
    h.RunStarted();
    ASSERT_EQ(h.agents.starts.size(), 2u);
    h.store->SetUnavailable(Status::Unavailable("database unavailable"));
    h.Report("n1", job, 0, TaskState::kSucceeded);
    h.Report("n1", job, 1, TaskState::kSucceeded);
    EXPECT_EQ(h.core->unstored_changes(), 2u);
    // Not shown done before it is durable.
    EXPECT_EQ(h.core->GetJob(job)->state, JobState::kRunning);
    EXPECT_EQ(h.Task(job, 0).state, TaskState::kRunning);
    EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated.milli_tflops, 2 * 989'000);
    // A repeated report while it waits changes nothing.
    h.Report("n1", job, 0, TaskState::kSucceeded);
    EXPECT_EQ(h.core->unstored_changes(), 2u);
    h.core->Tick();  // still down: kept
    h.Drain();
    EXPECT_EQ(h.core->unstored_changes(), 2u);

    h.store->SetUnavailable(Status::Ok());
    h.core->OnHeartbeat("n1", {});
    h.core->Tick();
    h.Drain();
    EXPECT_EQ(h.core->unstored_changes(), 0u);
    EXPECT_EQ(h.core->GetJob(job)->state, JobState::kSucceeded);
    EXPECT_EQ(StoredJobState(h, job), JobState::kSucceeded);
    EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated.milli_tflops, 0);
  }
  CoreHarness h(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(h.core->GetJob(job)->state, JobState::kSucceeded);
  EXPECT_TRUE(h.agents.starts.empty()) << "nothing runs a second time";
}

// A job's state is stored in a later commit than its tasks' ends when those were kept and
// stored late (the store was down). A daemon restart between the two left every task SUCCEEDED
// and the job RUNNING for good (seen in a fresh-clone run of OutageE2eTest under load). Recovery
// now takes the job's state from its tasks and stores it.
TEST(ChangePathTest, AJobRowBehindItsTasksIsRepairedOnRecovery) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t job = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
    job = h.Submit(CoreHarness::Whole("gpu", 1, 2))->id;
    h.RunStarted();
    h.Report("n1", job, 0, TaskState::kSucceeded);
    h.Report("n1", job, 1, TaskState::kSucceeded);
    h.Drain();
    ASSERT_EQ(StoredJobState(h, job), JobState::kSucceeded);
  }
  // The torn state: the tasks' ends stored, the job's own row not yet.
  MemoryStore torn(db);
  ASSERT_TRUE(torn.AcquireLeadership().ok());
  torn.Apply({UpdateJob{job, JobState::kRunning, "", 0}}, [](Status st) { ASSERT_TRUE(st.ok()); });
  ASSERT_EQ(StoredJobStateIn(torn, job), JobState::kRunning);
  CoreHarness h(SchedulerOptions::Defaults(), db);
  h.Drain();
  EXPECT_EQ(h.core->GetJob(job)->state, JobState::kSucceeded);
  EXPECT_EQ(StoredJobState(h, job), JobState::kSucceeded);
  EXPECT_NE(h.core->GetJob(job)->finish_us, 0);
}

// UpdatePool with live work and a reservation: running tasks keep their devices in the new
// engine, the preemptor's reservation (room held in the old engine) is dropped and it queues
// again, and its victim, still stopping, is requeued when it exits; the preemptor then gets the
// room it freed.
TEST(ChangePathTest, UpdatePoolWithLiveWorkAndAReservation) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  int64_t a = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)))->id;
  h.clock.Advance(10 * kSecond);
  int64_t b = h.Submit(Of("low", CoreHarness::Whole("gpu", 1)))->id;
  h.RunStarted();
  h.clock.Advance(10 * kSecond);
  int64_t high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)))->id;
  ASSERT_EQ(h.agents.stops.size(), 1u);
  const std::string victim = h.agents.stops[0].second.task_id;
  const int64_t victim_job = victim == TaskId(a, 0) ? a : b;
  const int64_t other_job = victim_job == a ? b : a;
  EXPECT_EQ(h.Task(high).pending.code, PendingCode::kWaitingForVictims);

  PoolRecord p = h.core->GetPool("gpu")->pool;
  p.placement_strategy = "best-fit";
  Result<PoolView> updated = h.Sync<PoolView>([&](auto cb) { h.core->UpdatePool(p, cb); });
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(updated->pool.placement_strategy, "best-fit");
  // Both running tasks still hold their GPU in the new engine.
  EXPECT_EQ(updated->capacity.allocated.milli_tflops, 2 * 989'000);
  EXPECT_EQ(h.Task(victim_job).stop, StopIntent::kPreempt);
  EXPECT_EQ(h.Task(other_job).state, TaskState::kRunning);

  h.ExitStopped();
  EXPECT_EQ(h.Task(victim_job).state, TaskState::kPending);
  EXPECT_EQ(h.Task(victim_job).attempt, 1);
  EXPECT_EQ(h.Task(high).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(high).node, h.agents.stops[0].first);
  EXPECT_EQ(h.agents.stops.size(), 1u) << "nobody else was preempted";
}

// Pins (docs/images.md, "Prepull and pins"): a change of only a pool's pinned images is stored,
// then sent to each of the pool's nodes, and leaves placement's policy and the room held for a
// preemptor as they were; a node that registers later gets the list with its RegisterAck.
TEST(ChangePathTest, PinnedImagesAreStoredThenSentAndLeavePlacementAlone) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.CreatePool("other").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("x0", "other", 1).ok());
  h.agents.connected = {"n0", "n1", "x0"};
  ASSERT_TRUE(h.Submit(Of("low", CoreHarness::Whole("gpu", 1))).ok());
  ASSERT_TRUE(h.Submit(Of("low", CoreHarness::Whole("gpu", 1))).ok());
  h.RunStarted();
  h.clock.Advance(10 * kSecond);
  const int64_t high = h.Submit(Of("high", CoreHarness::Whole("gpu", 1)))->id;
  ASSERT_EQ(h.Task(high).pending.code, PendingCode::kWaitingForVictims);
  const size_t stops = h.agents.stops.size();

  PoolRecord p = h.core->GetPool("gpu")->pool;
  p.pinned_images = {"registry.example:5000/ml/pytorch:2.4"};
  Result<PoolView> updated = h.Sync<PoolView>([&](auto cb) { h.core->UpdatePool(p, cb); });
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(updated->pool.pinned_images, p.pinned_images);
  // Stored before it was sent (ExpectDurable after each Drain), to the pool's nodes only.
  std::set<std::string> told;
  for (const auto& [node, cmd] : h.agents.pins) {
    told.insert(node);
    EXPECT_EQ(cmd.images, p.pinned_images);
  }
  EXPECT_EQ(told, (std::set<std::string>{"n0", "n1"}));
  // The preemptor still waits on the room held for it; nothing else was stopped.
  EXPECT_EQ(h.Task(high).pending.code, PendingCode::kWaitingForVictims);
  EXPECT_EQ(h.agents.stops.size(), stops);
  // Unchanged: nothing sent again.
  h.agents.pins.clear();
  ASSERT_TRUE(h.Sync<PoolView>([&](auto cb) { h.core->UpdatePool(p, cb); }).ok());
  EXPECT_TRUE(h.agents.pins.empty());
  // A node (re-)registering gets its pool's list.
  Result<RegistrationResult> reg = h.Register("n2", "gpu", 1);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->pinned_images, p.pinned_images);
  Result<RegistrationResult> other = h.Register("x0", "other", 1);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->pinned_images.empty());
  // Recovered from the store as stored.
  EXPECT_EQ(h.core->GetPool("gpu")->pool.pinned_images, p.pinned_images);
}

}  // namespace
}  // namespace gpupool
