// At most one running copy, and no finished task run again (issue 12), through the real binaries:
// gpupoold (embedded PostgreSQL), four gpupool-agent processes with simulated GPUs, tasks as real
// `sh` processes that append to one side-effect file while they run.
//
// Each execution of a task writes "<task> <pid> tick <ns>" every 200 ms and "<task> <pid> end
// <ns>" when it completes. The checks, per task: no two executions' [first tick, last tick]
// intervals overlap (no concurrent double run), no execution starts after one has ended (no
// finished task re-run), and exactly one execution ended. Scenarios: an agent killed with -9, an
// agent stopped (SIGSTOP) past the heartbeat timeout and the lease and then continued, and
// gpupoold killed for longer than the heartbeat timeout — with the lease equal to the heartbeat
// timeout (HaE2eTest) and with a lease longer than both outages (RideOutE2eTest, issue 30: no
// task killed at all). Timeouts are generous (a loaded 2-core
// box), and no assertion depends on a sleep.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/side_effects.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::CheckExecutions;
using testing::ChildProcess;
using testing::DaemonProcess;
using testing::Execution;
using testing::ReadExecutions;
using namespace std::chrono_literals;

// T = 3 s; the agent stops its tasks at T, its keeper kills them at T + 1 s, gpupoold requeues
// a silent node's tasks after T + 1 s + 1 s.
constexpr char kDaemonConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 3000
  node_lease_ms: 3000  # L = T: this test's scenarios predate the long lease
  stop_grace_period_ms: 1000
  node_lease_stop_grace_ms: 1000
  node_lease_margin_ms: 1000
)";

constexpr int kAgents = 4;
constexpr int kGpusPerAgent = 3;

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  return ::gpupool::testing::WaitFor(done, timeout, std::chrono::milliseconds(100));
}

class HaE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-ha-e2e");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    dir_ = *dir;
    side_ = dir_ + "/side-effects";
    std::ofstream(dir_ + "/gpupoold.yaml") << DaemonConfig();
    auto d = DaemonProcess::Start({"", {"--config", dir_ + "/gpupoold.yaml"}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Connect();
    Status created = daemon_->CreatePool("gpu");
    ASSERT_TRUE(created.ok()) << created.ToString();
    for (int i = 0; i < kAgents; ++i) StartAgent(Node(i));
  }

  void TearDown() override {
    for (auto& [node, agent] : agents_) {
      agent->Signal(SIGCONT);
      agent->Signal(SIGTERM);
      agent->Wait(10s);
    }
    agents_.clear();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  virtual const char* DaemonConfig() const { return kDaemonConfig; }
  // The agents' stop_tasks_on_shutdown is the opposite (a SIGTERM leaves the tasks running).
  virtual bool KeepTasksOnShutdown() const { return false; }
  static std::string Node(int i) { return "node-" + std::to_string(i); }

  void Connect() {
    auto channel = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel);
    pools_ = v1::PoolService::NewStub(channel);
    nodes_ = v1::NodeService::NewStub(channel);
  }

  void StartAgent(const std::string& node) {
    testing::AgentProcessOptions o;
    o.dir = dir_;
    o.node = node;
    o.scheduler = daemon_->grpc_address();
    o.gpus = kGpusPerAgent;
    o.stop_tasks_on_shutdown = !KeepTasksOnShutdown();
    auto child = testing::StartAgentProcess(o);
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    agents_[node] = std::move(child).value();
    ASSERT_TRUE(WaitFor([&] { return NodeState(node) == v1::NODE_STATE_READY; }, 60s))
        << "agent " << node << " did not register";
  }

  v1::NodeState NodeState(const std::string& node) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::ListNodesResponse resp;
    if (!nodes_->ListNodes(&ctx, v1::ListNodesRequest{}, &resp).ok()) return {};
    for (const v1::Node& n : resp.nodes()) {
      if (n.name() == node) return n.state();
    }
    return {};
  }

  // `tasks` one-GPU tasks, each ticking `ticks` times 200 ms apart; returns the job id.
  std::string Submit(int tasks, int ticks) {
    const std::string script = testing::TickingScript(side_, ticks);
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant("acme/e2e/tester");
    s->set_pool("gpu");
    s->set_task_count(tasks);
    s->set_max_retries(10);
    s->mutable_template_()->add_command("/bin/sh");
    s->mutable_template_()->add_command("-c");
    s->mutable_template_()->add_command(script);
    s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_->SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.job_id();
  }

  v1::Job Job(const std::string& id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    if (!jobs_->GetJob(&ctx, req, &job).ok()) return {};
    return job;
  }

  bool AllTasks(const std::string& id, v1::TaskState state) {
    v1::Job job = Job(id);
    if (job.tasks_size() == 0) return false;
    for (const v1::Task& t : job.tasks()) {
      if (t.state() != state) return false;
    }
    return true;
  }

  // Waits until every task runs and has ticked at least once; returns the node of each.
  std::map<std::string, std::string> WaitAllRunning(const std::string& job) {
    EXPECT_TRUE(WaitFor(
        [&] {
          if (!AllTasks(job, v1::TASK_STATE_RUNNING)) return false;
          std::map<std::string, std::map<int64_t, Execution>> ex = Executions(job);
          return static_cast<int>(ex.size()) == Job(job).tasks_size();
        },
        120s))
        << Job(job).DebugString();
    std::map<std::string, std::string> where;
    const v1::Job j = Job(job);
    for (const v1::Task& t : j.tasks()) where[t.id()] = t.node();
    return where;
  }

  std::map<std::string, std::map<int64_t, Execution>> Executions(const std::string& job = "") {
    return ReadExecutions(side_, job);
  }

  // The promise of issue 12, checked on the side-effect file once the job is done.
  void ExpectNoDoubleRunAndNoRerun(const std::string& job) {
    ASSERT_TRUE(WaitFor([&] { return AllTasks(job, v1::TASK_STATE_SUCCEEDED); }, 180s))
        << Job(job).DebugString();
    std::map<std::string, std::map<int64_t, Execution>> all = Executions(job);
    EXPECT_EQ(static_cast<int>(all.size()), Job(job).tasks_size());
    for (const std::string& v : CheckExecutions(all, &executions_)) ADD_FAILURE() << v;
  }

  std::string dir_;
  std::string side_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::map<std::string, std::unique_ptr<ChildProcess>> agents_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::PoolService::Stub> pools_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
  int executions_ = 0;
};

// kill -9 of an agent: its keeper kills the tasks at the lease deadline (no agent came back);
// gpupoold starts them elsewhere only after the lease, grace and margin; the agent restarted later
// finds nothing of its own to run and is READY.
TEST_F(HaE2eTest, AgentKilledWithMinus9) {
  const std::string job = Submit(8, 50);  // ~10 s each
  std::map<std::string, std::string> where = WaitAllRunning(job);
  const std::string victim = where.begin()->second;
  agents_[victim]->Signal(SIGKILL);
  agents_[victim]->Wait(10s);
  // Its tasks move (attempt 1 on another node).
  const std::string moved = where.begin()->first;
  EXPECT_TRUE(WaitFor(
      [&] {
        const v1::Job j = Job(job);
        for (const v1::Task& t : j.tasks()) {
          if (t.id() == moved) return t.attempt() >= 1 && t.node() != victim;
        }
        return false;
      },
      120s))
      << Job(job).DebugString();
  ExpectNoDoubleRunAndNoRerun(job);
  EXPECT_GT(executions_, 8) << "the killed node's tasks ran again elsewhere";
  StartAgent(victim);
  EXPECT_EQ(NodeState(victim), v1::NODE_STATE_READY);
}

// A partition: the agent is stopped past T + grace + margin, then continued. Its keeper killed
// its tasks at T + grace (the stopped agent could not), gpupoold requeued them after the margin;
// on SIGCONT the agent finds its lease lapsed, registers again and the node is READY; no copy
// ran twice at once.
TEST_F(HaE2eTest, AgentStoppedPastTheLeaseThenContinued) {
  const std::string job = Submit(8, 50);
  std::map<std::string, std::string> where = WaitAllRunning(job);
  const std::string victim = where.begin()->second;
  agents_[victim]->Signal(SIGSTOP);
  EXPECT_TRUE(WaitFor([&] { return NodeState(victim) == v1::NODE_STATE_NOT_READY; }, 60s));
  // Until its tasks have been started elsewhere (after T + grace + margin), then 1 s more.
  const std::string moved = where.begin()->first;
  EXPECT_TRUE(WaitFor(
      [&] {
        const v1::Job j = Job(job);
        for (const v1::Task& t : j.tasks()) {
          if (t.id() == moved) return t.attempt() >= 1 && t.state() == v1::TASK_STATE_RUNNING;
        }
        return false;
      },
      120s))
      << Job(job).DebugString();
  agents_[victim]->Signal(SIGCONT);
  EXPECT_TRUE(WaitFor([&] { return NodeState(victim) == v1::NODE_STATE_READY; }, 60s))
      << "the partitioned node did not come back";
  ExpectNoDoubleRunAndNoRerun(job);
  EXPECT_EQ(NodeState(victim), v1::NODE_STATE_READY);
}

// gpupoold is killed for longer than the heartbeat timeout. Short tasks exit 0 during the
// outage (their agents keep the reports); long ones are stopped by their agents when the lease
// lapses. After the restart nothing that finished runs again, the stopped ones are requeued,
// and every node is READY.
TEST_F(HaE2eTest, DaemonDownLongerThanTheHeartbeatTimeout) {
  const std::string short_job = Submit(4, 10);  // ~2 s: finish during the outage
  const std::string long_job = Submit(4, 60);   // ~12 s: outlive the lease
  WaitAllRunning(short_job);
  WaitAllRunning(long_job);
  daemon_->Kill9();
  // Down for 8 s (> T = 3 s), counted by the side-effect file: the short tasks end meanwhile.
  const auto down_since = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor(
      [&] {
        int ended = 0;
        for (const auto& [task, by_pid] : Executions(short_job)) {
          for (const auto& [pid, e] : by_pid) ended += e.ended ? 1 : 0;
        }
        return ended >= 4 && std::chrono::steady_clock::now() - down_since >= 8s;
      },
      120s));
  ASSERT_TRUE(daemon_->Restart().ok());
  Connect();
  for (int i = 0; i < kAgents; ++i) {
    EXPECT_TRUE(WaitFor([&] { return NodeState(Node(i)) == v1::NODE_STATE_READY; }, 60s))
        << Node(i);
  }
  ExpectNoDoubleRunAndNoRerun(short_job);
  ExpectNoDoubleRunAndNoRerun(long_job);
  const v1::Job done = Job(short_job);
  for (const v1::Task& t : done.tasks()) EXPECT_EQ(t.attempt(), 0) << t.id();
}

// Issue 30: "stop placing on a silent node" (the heartbeat timeout T = 3 s) apart from "stop
// its work and run it elsewhere" (the node lease L = 60 s). Outages longer than T and shorter
// than L kill nothing.
constexpr char kRideOutConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 3000
  node_lease_ms: 60000
  stop_grace_period_ms: 1000
  node_lease_stop_grace_ms: 1000
  node_lease_margin_ms: 1000
)";

class RideOutE2eTest : public HaE2eTest {
 protected:
  const char* DaemonConfig() const override { return kRideOutConfig; }
  bool KeepTasksOnShutdown() const override { return true; }

  // Every task ran exactly once, start to end, on its first attempt: none was killed.
  void ExpectEachRanOnceOnItsFirstAttempt(const std::string& job, int tasks) {
    ExpectNoDoubleRunAndNoRerun(job);
    EXPECT_EQ(executions_, tasks) << "a task was killed and ran again";
    const v1::Job done = Job(job);
    for (const v1::Task& t : done.tasks()) EXPECT_EQ(t.attempt(), 0) << t.id();
  }
};

// gpupoold killed with -9 and down for 8 s (> T): before, every agent stopped every task at T
// and they all ran again; now the agents keep them under the lease and the restarted gpupoold
// re-adopts them.
TEST_F(RideOutE2eTest, DaemonKilledAndDownPastTheHeartbeatTimeoutKillsNoTask) {
  const std::string job = Submit(8, 60);  // ~12 s each: they outlive the outage
  WaitAllRunning(job);
  daemon_->Kill9();
  const auto down_since = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] { return std::chrono::steady_clock::now() - down_since >= 8s; }, 60s));
  ASSERT_TRUE(daemon_->Restart().ok());
  Connect();
  for (int i = 0; i < kAgents; ++i) {
    EXPECT_TRUE(WaitFor([&] { return NodeState(Node(i)) == v1::NODE_STATE_READY; }, 60s))
        << Node(i);
  }
  ExpectEachRanOnceOnItsFirstAttempt(job, 8);
}

// An agent silent past T (stopped with SIGSTOP, its tasks still running): its node is NOT_READY,
// so nothing new goes there, but its tasks are not requeued; continued, it registers again, the
// node is READY and every task finishes where it ran.
TEST_F(RideOutE2eTest, ANodeSilentPastTheHeartbeatTimeoutKeepsItsTasks) {
  const std::string job = Submit(8, 60);
  std::map<std::string, std::string> where = WaitAllRunning(job);
  const std::string victim = where.begin()->second;
  agents_[victim]->Signal(SIGSTOP);
  EXPECT_TRUE(WaitFor([&] { return NodeState(victim) == v1::NODE_STATE_NOT_READY; }, 60s));
  const v1::Job silent = Job(job);
  for (const v1::Task& t : silent.tasks()) {
    EXPECT_EQ(t.attempt(), 0) << t.id() << " was requeued while its node was only silent";
  }
  agents_[victim]->Signal(SIGCONT);
  EXPECT_TRUE(WaitFor([&] { return NodeState(victim) == v1::NODE_STATE_READY; }, 60s));
  ExpectEachRanOnceOnItsFirstAttempt(job, 8);
  const v1::Job done = Job(job);
  for (const v1::Task& t : done.tasks()) EXPECT_EQ(t.node(), where[t.id()]) << t.id();
}

// Issue 30: an agent restart kills no task. The agent is killed with -9 (a crash) while its
// tasks run, then started again: its lease keeper held the tasks, the new agent process joins
// the keeper, re-adopts them and lists them in its Register, and gpupoold sees no change — every
// task ran once, start to end, on its first attempt.
TEST_F(RideOutE2eTest, AnAgentKilledWithMinus9AndStartedAgainKeepsItsTasks) {
  const std::string job = Submit(8, 60);  // ~12 s each
  std::map<std::string, std::string> where = WaitAllRunning(job);
  const std::string victim = where.begin()->second;
  agents_[victim]->Signal(SIGKILL);
  agents_[victim]->Wait(10s);
  StartAgent(victim);
  ExpectEachRanOnceOnItsFirstAttempt(job, 8);
}

// The same through an orderly restart (SIGTERM, as systemd or an upgrade stops it): with
// stop_tasks_on_shutdown off (the default) the agent leaves its tasks to the keeper.
TEST_F(RideOutE2eTest, AnAgentStoppedWithSigtermAndStartedAgainKeepsItsTasks) {
  const std::string job = Submit(8, 60);
  std::map<std::string, std::string> where = WaitAllRunning(job);
  const std::string victim = where.begin()->second;
  agents_[victim]->Signal(SIGTERM);
  agents_[victim]->Wait(30s);
  StartAgent(victim);
  ExpectEachRanOnceOnItsFirstAttempt(job, 8);
}

}  // namespace
}  // namespace gpupool
