// Scenario tests of the scheduler core on the deterministic harness.
#include "scheduler/core.h"

#include <gtest/gtest.h>

#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;
using testing::kSecond;

TEST(CoreTest, SubmitPlaceRunSucceed) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());

  // 247.25 TFLOPS of a 989 TFLOPS H100 = 25%; MPS gets ceil(247250 × 100 / 989000) = 25%.
  Result<JobRecord> job = h.Submit(CoreHarness::Fractional("gpu", 247'250, 20'480));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kPending);

  TaskRecord t = h.Task(job->id);
  EXPECT_EQ(t.state, TaskState::kScheduled);
  EXPECT_EQ(t.node, "n1");
  ASSERT_EQ(t.allocations.size(), 1u);
  EXPECT_EQ(t.allocations[0].amount, (Resources{247'250, 20'480}));
  ASSERT_EQ(h.agents.starts.size(), 1u);
  const StartTaskCommand& cmd = h.agents.starts[0].second;
  EXPECT_EQ(cmd.task_id, TaskId(job->id, 0));
  ASSERT_EQ(cmd.devices.size(), 1u);
  EXPECT_EQ(cmd.devices[0].thread_percentage, 25);
  EXPECT_EQ(cmd.argv, std::vector<std::string>{"/bin/true"});

  h.Report("n1", job->id, 0, TaskState::kRunning);
  EXPECT_EQ(h.Task(job->id).state, TaskState::kRunning);
  EXPECT_EQ(h.core->GetJob(job->id)->state, JobState::kRunning);
  EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated, (Resources{247'250, 20'480}));

  h.Report("n1", job->id, 0, TaskState::kSucceeded);
  EXPECT_EQ(h.Task(job->id).state, TaskState::kSucceeded);
  EXPECT_EQ(h.core->GetJob(job->id)->state, JobState::kSucceeded);
  EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated, (Resources{0, 0}));
}

TEST(CoreTest, AdmissionErrorsNameTheProblemAndStoreNothing) {
  SchedulerOptions opts = SchedulerOptions::Defaults();
  CoreHarness h(opts);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  PoolRecord priv;
  priv.name = "private";
  priv.visibility = Visibility::kPrivate;
  priv.allowed_tenants = {"acme/vision"};
  ASSERT_TRUE(h.Sync<PoolView>([&](auto cb) { h.core->CreatePool(priv, cb); }).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());

  struct Case {
    std::string name;
    JobSpec spec;
    StatusCode code;
    std::string message_part;
  };
  std::vector<Case> cases;
  cases.push_back({"unknown pool", CoreHarness::Fractional("nope", 1000, 1024),
                   StatusCode::kNotFound, "pool 'nope' not found"});
  cases.push_back({"unknown class", CoreHarness::Fractional("gpu", 1000, 1024, 1, "urgent"),
                   StatusCode::kNotFound, "priority class 'urgent' not found"});
  JobSpec sku = CoreHarness::Fractional("gpu", 0, 0);
  sku.task_template.resources.shape = RequestShape::kSku;
  sku.task_template.resources.sku = "huge";
  cases.push_back({"unknown sku", sku, StatusCode::kNotFound, "sku 'huge' not found"});
  cases.push_back({"private pool", CoreHarness::Fractional("private", 1000, 1024),
                   StatusCode::kPermissionDenied, "may not use private pool 'private'"});
  // 81921 MiB is one MiB more than the largest (only) device offers.
  cases.push_back({"too large", CoreHarness::Fractional("gpu", 1000, 81'921),
                   StatusCode::kInvalidArgument, "larger than any device in pool 'gpu'"});
  cases.push_back({"too many gpus", CoreHarness::Whole("gpu", 2), StatusCode::kInvalidArgument,
                   "no node in pool 'gpu' has more than 1"});
  for (const Case& c : cases) {
    Result<JobRecord> r = h.Submit(c.spec);
    EXPECT_EQ(r.status().code(), c.code) << c.name;
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.name << ": " << r.status().message();
  }
  EXPECT_TRUE(h.store->Recover()->jobs.empty());
}

TEST(CoreTest, StoreOutageRefusesSubmissionAndUndoesReservation) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  h.store->SetUnavailable(Status::Unavailable("database unavailable"));
  Result<JobRecord> r = h.Submit(CoreHarness::Fractional("gpu", 1000, 1024));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  h.store->SetUnavailable(Status::Ok());
  EXPECT_TRUE(h.store->Recover()->jobs.empty());
  EXPECT_EQ(h.core->ListJobs({}).jobs.size(), 0u);
  EXPECT_TRUE(h.agents.starts.empty());
}

TEST(CoreTest, NothingDispatchedBeforeAllocationIsDurable) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  // Submit succeeds, then the database goes away before the scheduling pass commits.
  std::optional<Result<JobRecord>> out;
  h.core->SubmitJob(CoreHarness::Fractional("gpu", 1000, 1024),
                    [&](Result<JobRecord> r) { out.emplace(r); });
  // Run the submit commit completion only; the pass it requests is queued after it.
  ASSERT_FALSE(h.queue.empty());
  auto fn = std::move(h.queue.front());
  h.queue.pop_front();
  fn();
  ASSERT_TRUE(out && out->ok());
  h.store->SetUnavailable(Status::Unavailable("database unavailable"));
  h.Drain();
  EXPECT_TRUE(h.agents.starts.empty());
  TaskRecord t = h.Task((*out)->id);
  EXPECT_EQ(t.state, TaskState::kPending);
  EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated, (Resources{0, 0}));
  // The database returns: the next pass places and dispatches it.
  h.store->SetUnavailable(Status::Ok());
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(h.Task((*out)->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.agents.starts.size(), 1u);
}

TEST(CoreTest, PriorityOrderWhenCapacityIsShort) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  // No node yet: both jobs wait, then one GPU arrives.
  Result<JobRecord> low = h.Submit(CoreHarness::Whole("gpu", 1));
  JobSpec hi = CoreHarness::Whole("gpu", 1);
  hi.priority_class = "high";
  Result<JobRecord> high = h.Submit(hi);
  ASSERT_TRUE(low.ok() && high.ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  EXPECT_EQ(h.Task(high->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(low->id).state, TaskState::kPending);
  EXPECT_EQ(h.Task(low->id).pending.code, PendingCode::kNoCapacity) << h.Task(low->id).reason;
}

TEST(CoreTest, GangPlacesAllOrNothing) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
  JobSpec gang = CoreHarness::Whole("gpu", 1, 3);
  gang.gang = true;
  Result<JobRecord> job = h.Submit(gang);
  ASSERT_TRUE(job.ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(h.Task(job->id, i).state, TaskState::kPending);
  EXPECT_TRUE(h.agents.starts.empty());
  ASSERT_TRUE(h.Register("n2", "gpu", 1).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(h.Task(job->id, i).state, TaskState::kScheduled);
  EXPECT_EQ(h.agents.starts.size(), 3u);
}

TEST(CoreTest, SilentNodeLosesTasksWhichRequeueElsewhere) {
  SchedulerOptions opts = SchedulerOptions::Defaults();
  opts.heartbeat_timeout_ms = 5000;
  CoreHarness h(opts);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  Result<JobRecord> job = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(job.ok());
  h.Report("n1", job->id, 0, TaskState::kRunning);
  ASSERT_TRUE(h.Register("n2", "gpu", 1).ok());

  h.clock.Advance(3'000'000);
  h.core->OnHeartbeat("n2", {});
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(h.Task(job->id).node, "n1");  // 3 s < 5 s timeout
  h.clock.Advance(3'000'000);
  h.core->OnHeartbeat("n2", {});
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(h.core->GetNode("n1")->node.state, NodeState::kNotReady);
  // Its task moves only once n1's lease has certainly lapsed: 5 s + 2 s grace + 1 s margin.
  EXPECT_EQ(h.Task(job->id).node, "n1");
  h.clock.Advance(3'000'000);
  h.core->OnHeartbeat("n2", {});
  h.core->Tick();
  h.Drain();
  TaskRecord t = h.Task(job->id);
  EXPECT_EQ(t.state, TaskState::kScheduled);
  EXPECT_EQ(t.node, "n2");
  EXPECT_EQ(t.attempt, 1);
}

TEST(CoreTest, RestartRecoversJobsAndAllocations) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t job_id = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
    Result<JobRecord> job = h.Submit(CoreHarness::Fractional("gpu", 500'000, 40'960, 2));
    ASSERT_TRUE(job.ok());
    job_id = job->id;
    h.Report("n1", job_id, 0, TaskState::kRunning);
  }
  CoreHarness h(SchedulerOptions::Defaults(), db);
  Result<JobRecord> job = h.core->GetJob(job_id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->tasks[0].state, TaskState::kRunning);
  EXPECT_EQ(job->tasks[1].state, TaskState::kScheduled);
  // Two grants of 500 TFLOPS / 40 GiB are held again after the restart.
  EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated, (Resources{1'000'000, 81'920}));
  // A new job gets a fresh id.
  h.agents.connected.insert("n1");
  Result<JobRecord> next = h.Submit(CoreHarness::Fractional("gpu", 1000, 1024));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->id, job_id);
}

// Finished jobs are forgotten by the daemon once the retention has passed (their rows stay in
// the store), running ones never; a restart does not load them back either.
TEST(CoreTest, FinishedJobsAreForgottenAfterTheRetention) {
  SchedulerOptions opts = SchedulerOptions::Defaults();
  opts.job_retention_ms = 60'000;
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t done_id = 0, running_id = 0;
  {
    CoreHarness h(opts, db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
    done_id = h.Submit(CoreHarness::Whole("gpu", 1))->id;
    running_id = h.Submit(CoreHarness::Whole("gpu", 1))->id;
    h.RunStarted();
    h.Report("n1", done_id, 0, TaskState::kSucceeded);
    ASSERT_EQ(h.core->GetJob(done_id)->state, JobState::kSucceeded);

    h.clock.Advance(30 * kSecond);
    h.core->OnHeartbeat("n1", {});
    h.core->Tick();
    h.Drain();
    EXPECT_TRUE(h.core->GetJob(done_id).ok()) << "30 s after it finished: still kept";

    h.clock.Advance(31 * kSecond);
    h.core->OnHeartbeat("n1", {});
    h.core->Tick();
    h.Drain();
    Result<JobRecord> gone = h.core->GetJob(done_id);
    EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
    EXPECT_NE(gone.status().message().find("kept 60 s after they end"), std::string::npos)
        << gone.status().message();
    EXPECT_EQ(h.core->ListJobs(JobFilter{}).jobs.size(), 1u);
    EXPECT_EQ(h.core->GetJob(running_id)->state, JobState::kRunning) << "running: never forgotten";
  }
  // A restart 61 s after the job ended does not load it; with no retention, the same store
  // shows it was kept there all along.
  const int64_t later = ManualClock().NowMicros() + 61 * kSecond;
  CoreHarness h(opts, db, nullptr, later);
  EXPECT_EQ(h.core->GetJob(done_id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(h.core->GetJob(running_id)->state, JobState::kRunning);
  h.agents.connected.insert("n1");
  Result<JobRecord> next = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->id, running_id) << "ids keep counting past forgotten jobs";
  SchedulerOptions keep = opts;
  keep.job_retention_ms = 0;
  CoreHarness all(keep, db, nullptr, later);
  EXPECT_EQ(all.core->GetJob(done_id)->state, JobState::kSucceeded);
}

TEST(CoreTest, ReconnectReconcilesTasks) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
  Result<JobRecord> a = h.Submit(CoreHarness::Whole("gpu", 1));
  Result<JobRecord> b = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(a.ok() && b.ok());
  h.Report("n1", a->id, 0, TaskState::kRunning);
  h.Report("n1", b->id, 0, TaskState::kRunning);
  // The agent comes back running task a and an unknown task; b is gone.
  Result<RegistrationResult> reg =
      h.Register("n1", "gpu", 2, {{TaskId(a->id, 0), 0}, {"999.0", 0}});
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ(reg->stop_task_ids, std::vector<std::string>{"999.0"});
  EXPECT_EQ(h.Task(a->id).state, TaskState::kRunning);
  TaskRecord tb = h.Task(b->id);
  EXPECT_EQ(tb.attempt, 1);  // lost, requeued, and placed again
  EXPECT_EQ(tb.state, TaskState::kScheduled);
}

TEST(CoreTest, CancelStopsRunningTasksAndReleasesOnExit) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  Result<JobRecord> job = h.Submit(CoreHarness::Whole("gpu", 1, 2));
  ASSERT_TRUE(job.ok());
  h.Report("n1", job->id, 0, TaskState::kRunning);
  EXPECT_EQ(h.Task(job->id, 1).state, TaskState::kPending);
  Result<JobRecord> cancelled =
      h.Sync<JobRecord>([&](auto cb) { h.core->CancelJob(job->id, "", cb); });
  ASSERT_TRUE(cancelled.ok());
  // Not CANCELLED while task 0 still runs and holds its GPU: CANCELLING, with a stored intent.
  EXPECT_EQ(cancelled->state, JobState::kCancelling);
  EXPECT_EQ(h.Task(job->id, 1).state, TaskState::kCancelled);
  EXPECT_EQ(h.Task(job->id, 0).stop, StopIntent::kCancel);
  ASSERT_EQ(h.agents.stops.size(), 1u);
  EXPECT_EQ(h.agents.stops[0].second.task_id, TaskId(job->id, 0));
  // The GPU stays held until the process is gone.
  EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated.milli_tflops, 989'000);
  h.Report("n1", job->id, 0, TaskState::kFailed, 143);
  EXPECT_EQ(h.Task(job->id, 0).state, TaskState::kCancelled);
  EXPECT_EQ(h.core->GetJob(job->id)->state, JobState::kCancelled);
  EXPECT_EQ(h.core->GetPool("gpu")->capacity.allocated.milli_tflops, 0);
}

TEST(CoreTest, WatchSeesTransitionsUntilTheEnd) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  Result<JobRecord> job = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(job.ok());
  std::vector<std::string> seen;
  ASSERT_TRUE(
      h.core->WatchJob(job->id, [&](const JobChange& c) { seen.push_back(c.message); }).ok());
  h.Report("n1", job->id, 0, TaskState::kRunning);
  h.Report("n1", job->id, 0, TaskState::kSucceeded);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], "current state");
  EXPECT_NE(seen[1].find("RUNNING"), std::string::npos);
  EXPECT_NE(seen[2].find("SUCCEEDED"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
