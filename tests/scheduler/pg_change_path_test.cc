// The change path on real PostgreSQL, stopped and started by the test: six tasks exit 0 while the
// database is down. The API keeps showing the job RUNNING (nothing is shown done before it is
// durable); once PostgreSQL is back the ends are stored by the core's own retries; a daemon
// restart then finds the job SUCCEEDED and starts nothing again (it used to run all six twice).
// The state recovered from PostgreSQL equals the core's memory at each quiet point.
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <mutex>

#include "base/clock.h"
#include "scheduler/core.h"
#include "store/pg_store.h"
#include "tests/scheduler/core_harness.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

// A Core on a PgStore: store completions arrive on the store's thread and are queued for the
// test's thread, which runs them in RunUntil.
class PgCore {
 public:
  explicit PgCore(std::unique_ptr<Store> store) : store_(std::move(store)) {
    core = std::make_unique<Core>(SchedulerOptions::Defaults(), &clock, store_.get(), &agents,
                                  [this](std::function<void()> fn) {
                                    std::lock_guard<std::mutex> lock(mu_);
                                    queue_.push_back(std::move(fn));
                                    cv_.notify_one();
                                  });
  }
  ~PgCore() {
    store_.reset();  // finishes its batches: their completions still find this object
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear();  // closures that refer to the core, never run
  }

  Status Start() {
    Result<int64_t> epoch = store_->AcquireLeadership();
    if (!epoch.ok()) return epoch.status();
    Result<RecoveredState> state = store_->Recover();
    if (!state.ok()) return state.status();
    GPUPOOL_RETURN_IF_ERROR(core->Recover(*state, *epoch));
    RunUntil([] { return false; }, std::chrono::milliseconds(50));
    return Status::Ok();
  }

  // Runs queued closures until `pred` holds; false if it still does not after `timeout`.
  template <typename Pred>
  bool RunUntil(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (pred()) return true;
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait_until(lock, end, [&] { return !queue_.empty(); })) return pred();
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  template <typename T>
  Result<T> Sync(std::function<void(Core::Callback<T>)> call) {
    std::optional<Result<T>> out;
    call([&](Result<T> r) { out.emplace(std::move(r)); });
    if (!RunUntil([&] { return out.has_value(); }))
      return Status::Internal("no answer within 30 s");
    return *out;
  }

  Result<RegistrationResult> Register(const std::string& node, int gpus) {
    AgentRegistration reg = SimulatedH100s(node, "gpu", gpus);
    agents.connected.insert(node);
    return Sync<RegistrationResult>([&](auto cb) { core->OnAgentRegister(reg, cb); });
  }

  void Report(int64_t job, int index, TaskState state) {
    TaskReport r;
    r.node = "n1";
    r.task_id = TaskId(job, index);
    r.attempt = core->GetJob(job)->tasks[static_cast<size_t>(index)].attempt;
    r.state = state;
    core->OnTaskReport(r);
  }

  // Memory = PostgreSQL, display text and heartbeat liveness aside.
  void ExpectDurable() {
    ASSERT_EQ(core->unstored_changes(), 0u);
    ASSERT_OK_AND_ASSIGN(RecoveredState state, store_->Recover());
    JobFilter all;
    std::vector<JobRecord> memory = core->ListJobs(all).jobs;
    ASSERT_EQ(memory.size(), state.jobs.size());
    for (size_t i = 0; i < memory.size(); ++i) {
      EXPECT_EQ(Durable(memory[i]), Durable(state.jobs[i])) << "job " << memory[i].id;
    }
  }

  ManualClock clock;
  RecordingAgents agents;
  std::unique_ptr<Core> core;

 private:
  std::unique_ptr<Store> store_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

bool AllTasks(const JobRecord& j, TaskState s) {
  for (const TaskRecord& t : j.tasks) {
    if (t.state != s) return false;
  }
  return true;
}

TEST(PgChangePathTest, EndsDuringAnOutageAreStoredWhenItReturnsAndNeverRunAgain) {
  ASSERT_OK_AND_ASSIGN(auto pg, TestPostgres::Start());
  ASSERT_OK_AND_ASSIGN(std::string uri, pg->CreateDatabase());
  PgStoreOptions opts;
  opts.uri = uri;
  int64_t job = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(opts));
    PgCore d(std::move(store));
    ASSERT_OK(d.Start());
    PoolRecord pool;
    pool.name = "gpu";
    ASSERT_OK(d.Sync<PoolView>([&](auto cb) { d.core->CreatePool(pool, cb); }).status());
    ASSERT_OK(d.Register("n1", 8).status());
    ASSERT_OK_AND_ASSIGN(JobRecord j, d.Sync<JobRecord>([&](auto cb) {
      d.core->SubmitJob(CoreHarness::Whole("gpu", 1, 6), cb);
    }));
    job = j.id;
    ASSERT_TRUE(d.RunUntil([&] { return d.agents.starts.size() == 6; }));
    for (int i = 0; i < 6; ++i) d.Report(job, i, TaskState::kRunning);
    ASSERT_TRUE(d.RunUntil([&] { return AllTasks(*d.core->GetJob(job), TaskState::kRunning); }));
    d.RunUntil([] { return false; }, std::chrono::milliseconds(200));  // the RUNNING rows
    d.ExpectDurable();

    ASSERT_OK(pg->server().Stop());
    for (int i = 0; i < 6; ++i) d.Report(job, i, TaskState::kSucceeded);
    ASSERT_TRUE(d.RunUntil([&] { return d.core->unstored_changes() == 6; }))
        << d.core->unstored_changes();
    // Not shown done before it is durable.
    EXPECT_EQ(d.core->GetJob(job)->state, JobState::kRunning);
    EXPECT_TRUE(AllTasks(*d.core->GetJob(job), TaskState::kRunning));

    ASSERT_OK(pg->server().Restart());
    // The core's own tick stores the ends again; nothing else is done for it.
    bool stored = d.RunUntil(
        [&] {
          if (d.core->unstored_changes() == 0 && d.core->GetJob(job)->state == JobState::kSucceeded)
            return true;
          d.core->Tick();
          return false;
        },
        std::chrono::seconds(60));
    ASSERT_TRUE(stored) << "unstored: " << d.core->unstored_changes();
    EXPECT_TRUE(AllTasks(*d.core->GetJob(job), TaskState::kSucceeded));
    d.RunUntil([] { return false; }, std::chrono::milliseconds(200));
    d.ExpectDurable();
  }
  // The daemon restarts on the same database; its agent reconnects running nothing.
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(opts));
  PgCore d(std::move(store));
  ASSERT_OK(d.Start());
  ASSERT_OK(d.Register("n1", 8).status());
  d.core->Tick();
  d.RunUntil([] { return false; }, std::chrono::milliseconds(200));
  ASSERT_OK_AND_ASSIGN(JobRecord j, d.core->GetJob(job));
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_TRUE(AllTasks(j, TaskState::kSucceeded));
  EXPECT_TRUE(d.agents.starts.empty()) << "nothing runs a second time";
  d.ExpectDurable();
}

}  // namespace
}  // namespace gpupool::testing
