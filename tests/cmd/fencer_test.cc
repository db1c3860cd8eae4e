// NodeFencer against a real Scheduler (the core on its loop, the in-memory store) and real child
// processes for the fencing command: a silent node holding work is fenced once the command exits
// 0 and its task moves at once; a command that fails or hangs fences nothing, the task stays on
// the node and the command is tried again later. Only time is simulated (the core's clock).
#include "cmd/daemon/fencer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "scheduler/scheduler.h"
#include "store/memory_store.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

class AcceptingAgents : public AgentGateway {
 public:
  bool StartTask(const std::string&, const StartTaskCommand&) override { return true; }
  bool StopTask(const std::string&, const StopTaskCommand&) override { return true; }
};

class FencerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupool-fencer-XXXXXX";
    dir_ = mkdtemp(tmpl);
    SchedulerOptions o = SchedulerOptions::Defaults();
    o.heartbeat_timeout_ms = 3'000;
    o.node_lease_ms = 300'000;  // the lease alone would hold the work for five minutes
    scheduler_ = std::make_unique<Scheduler>(o, &clock_, &store_, &agents_);
    Result<int64_t> epoch = store_.AcquireLeadership();
    Result<RecoveredState> state = store_.Recover();
    ASSERT_TRUE(epoch.ok() && state.ok());
    ASSERT_TRUE(scheduler_->Start(*state, *epoch, 20ms).ok());
    PoolRecord pool;
    pool.name = "gpu";
    ASSERT_TRUE(CallAndGet<PoolView>([&](SchedulerCallback<PoolView> cb) {
                  scheduler_->CreatePool(pool, cb);
                }).ok());
    ASSERT_TRUE(Register("n1").ok());
    JobSpec spec;
    spec.tenant = "acme/research";
    spec.pool = "gpu";
    spec.task_count = 1;
    spec.task_template.command = {"/bin/true"};
    spec.task_template.resources.shape = RequestShape::kWholeGpus;
    spec.task_template.resources.gpu_count = 1;
    Result<JobRecord> job = CallAndGet<JobRecord>(
        [&](SchedulerCallback<JobRecord> cb) { scheduler_->SubmitJob(spec, cb); });
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    job_id_ = job->id;
    scheduler_->Flush();
    ASSERT_EQ(Task().node, "n1");
    ASSERT_EQ(Task().state, TaskState::kScheduled);
    ASSERT_TRUE(Register("idle").ok());  // silent too, but holds nothing: never fenced
  }

  void TearDown() override {
    fencer_.reset();
    scheduler_->Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Status Register(const std::string& name) {
    AgentRegistration reg;
    reg.node.name = name;
    reg.node.pool = "gpu";
    DeviceRecord d;
    d.id = "GPU-" + name;
    d.model = "H100-SXM";
    d.physical = {989'000, 81'920};
    reg.node.devices.push_back(d);
    return CallAndGet<RegistrationResult>([&](SchedulerCallback<RegistrationResult> cb) {
             scheduler_->OnAgentRegister(reg, cb);
           })
        .status();
  }

  TaskRecord Task() {
    return CallAndGet<JobRecord>(
               [&](SchedulerCallback<JobRecord> cb) { scheduler_->GetJob(job_id_, cb); })
        ->tasks[0];
  }

  // An executable script in the test's directory.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  // Starts the fencer; every node falls silent (no heartbeats) and the core counts it NOT_READY.
  void StartFencerAndSilenceTheNodes(FencingOptions o) {
    o.poll = 20ms;
    fencer_ = std::make_unique<NodeFencer>(o, scheduler_.get(), &clock_, [this](const auto& a) {
      std::lock_guard lock(mu_);
      attempts_.push_back(a);
      cv_.notify_all();
    });
    fencer_->Start();
    clock_.Advance(4'000'000);  // past the heartbeat timeout
    scheduler_->Tick();
    scheduler_->Flush();
  }

  // The attempts once there are `n` (or all there are after 15 s).
  std::vector<FenceAttempt> WaitAttempts(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 15s, [&] { return attempts_.size() >= n; });
    return attempts_;
  }

  ManualClock clock_;
  MemoryStore store_;
  AcceptingAgents agents_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<NodeFencer> fencer_;
  int64_t job_id_ = 0;
  std::string dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<FenceAttempt> attempts_;
};

TEST_F(FencerTest, ACommandThatExitsZeroFencesTheSilentNodeAndItsTaskMovesAtOnce) {
  const std::string log = dir_ + "/fenced.log";
  FencingOptions o;
  o.command = {Script("fence-ok", "echo \"$* $GPUPOOL_NODE $GPUPOOL_POOL\" >> " + log),
               "--power-off"};
  o.after_ms = 10'000;
  StartFencerAndSilenceTheNodes(o);
  // Silent, but not for after_ms yet: nothing runs.
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(WaitAttempts(0).empty());
  EXPECT_FALSE(std::filesystem::exists(log));
  clock_.Advance(11'000'000);
  std::vector<FenceAttempt> attempts = WaitAttempts(1);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].node, "n1");
  EXPECT_TRUE(attempts[0].outcome.ok()) << attempts[0].outcome.ToString();
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  // argv: the configured words, then the node's name; the environment names node and pool.
  EXPECT_EQ(line, "--power-off n1 n1 gpu");
  // The task was requeued at once, five minutes before the lease would have let it go.
  scheduler_->Flush();
  const TaskRecord t = Task();
  EXPECT_EQ(t.attempt, 1);
  EXPECT_NE(t.node, "n1");
  // Fenced once: the node stays silent but is not fenced again, and `idle` never is.
  clock_.Advance(120'000'000);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(WaitAttempts(0).size(), 1u);
}

TEST_F(FencerTest, AFailingCommandLeavesTheTaskWhereItIsAndIsTriedAgain) {
  FencingOptions o;
  o.command = {Script("fence-fails", "echo 'BMC 10.0.0.9 unreachable' >&2; exit 3")};
  o.after_ms = 0;
  o.retry_ms = 30'000;
  StartFencerAndSilenceTheNodes(o);
  std::vector<FenceAttempt> attempts = WaitAttempts(1);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].node, "n1");
  EXPECT_EQ(attempts[0].outcome.code(), StatusCode::kUnavailable);
  EXPECT_NE(attempts[0].outcome.message().find("exit 3: BMC 10.0.0.9 unreachable"),
            std::string::npos)
      << attempts[0].outcome.message();
  scheduler_->Flush();
  EXPECT_EQ(Task().attempt, 0);
  EXPECT_EQ(Task().node, "n1");
  // Not before retry_ms; then once more.
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(WaitAttempts(1).size(), 1u);
  clock_.Advance(31'000'000);
  EXPECT_EQ(WaitAttempts(2).size(), 2u);
  EXPECT_EQ(Task().node, "n1");
}

TEST_F(FencerTest, AHangingCommandIsKilledAfterItsTimeoutAndFencesNothing) {
  FencingOptions o;
  const std::string pid_file = dir_ + "/sleeper.pid";
  o.command = {Script("fence-hangs", "sleep 30 & echo $! > " + pid_file + "; wait")};
  o.after_ms = 0;
  o.timeout_ms = 300;
  StartFencerAndSilenceTheNodes(o);
  const auto started = std::chrono::steady_clock::now();
  std::vector<FenceAttempt> attempts = WaitAttempts(1);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_NE(attempts[0].outcome.message().find("timed out"), std::string::npos)
      << attempts[0].outcome.message();
  // What the command started went with it (its process group was killed).
  int sleeper = 0;
  std::ifstream(pid_file) >> sleeper;
  ASSERT_GT(sleeper, 0);
  auto gone = [&] {
    std::ifstream stat("/proc/" + std::to_string(sleeper) + "/stat");
    std::string pid, comm, state;
    return !(stat >> pid >> comm >> state) || state == "Z";
  };
  for (int i = 0; i < 100 && !gone(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(gone()) << "the command's child " << sleeper << " outlived it";
  scheduler_->Flush();
  EXPECT_EQ(Task().attempt, 0);
  EXPECT_EQ(Task().node, "n1");
}

}  // namespace
}  // namespace gpupool
