// End to end with real processes: gpupoold on embedded PostgreSQL, gpupool-agent processes with
// the simulated GPU backend, tasks as real child processes, everything over loopback gRPC.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::DaemonProcess;

constexpr char kDaemonConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 20000
  node_lease_ms: 20000  # L = T: this test's scenarios predate the long lease
  stop_grace_period_ms: 1000
)";
// The node lease T (heartbeat_timeout_ms) is long: a daemon restart shorter than T re-adopts the
// running tasks, and the restart below must fit in it even on a loaded box (docs/ha.md). A dead
// node's tasks move after T + 2 s grace + 1 s margin.

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  return ::gpupool::testing::WaitFor(done, timeout, std::chrono::milliseconds(50));
}

class AgentE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml") << kDaemonConfig;
    auto d = DaemonProcess::Start({"", {"--config", dir_ + "/gpupoold.yaml"}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Connect();
    Status created = daemon_->CreatePool("gpu");
    ASSERT_TRUE(created.ok()) << created.ToString();
  }

  void TearDown() override {
    agents_.clear();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  void Connect() {
    auto channel = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel);
    pools_ = v1::PoolService::NewStub(channel);
    nodes_ = v1::NodeService::NewStub(channel);
  }

  // Starts an agent with `gpus` simulated H100s and waits until its node is READY.
  void StartAgent(const std::string& node, int gpus, std::vector<std::string> extra_args = {}) {
    testing::SingleAgent::Options o;
    o.dir = dir_;
    o.node = node;
    o.gpus = gpus;
    o.health_poll_ms = 0;
    o.extra_args = std::move(extra_args);
    auto agent = std::make_unique<testing::SingleAgent>(o);
    agent->Connect(*daemon_);
    ASSERT_TRUE(agent->StartAndWaitReady(std::chrono::seconds(30)))
        << "agent " << node << " did not register";
    agents_[node] = std::move(agent);
  }

  v1::NodeState NodeState(const std::string& node) {
    grpc::ClientContext ctx;
    v1::ListNodesResponse resp;
    if (!nodes_->ListNodes(&ctx, v1::ListNodesRequest{}, &resp).ok()) return {};
    for (const v1::Node& n : resp.nodes()) {
      if (n.name() == node) return n.state();
    }
    return {};
  }

  std::string Submit(const std::string& script, int gpus = 1, int retries = 0) {
    testing::ShellJob job;
    job.script = script;
    job.gpus = gpus;
    job.retries = retries;
    return testing::SubmitShellJob(*jobs_, job);
  }
  v1::Task Task(const std::string& job_id) { return testing::FirstTask(*jobs_, job_id); }

  bool WaitState(const std::string& job_id, v1::TaskState state, int seconds = 30) {
    return WaitFor([&] { return Task(job_id).state() == state; }, std::chrono::seconds(seconds));
  }

  std::string Logs(const std::string& task_id) { return testing::TaskLogs(*jobs_, task_id); }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::map<std::string, std::unique_ptr<testing::SingleAgent>> agents_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::PoolService::Stub> pools_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
};

TEST_F(AgentE2eTest, JobRunsWithItsGrantAndOutputIsRetrievable) {
  StartAgent("node-a", 2);
  std::string job = Submit("echo task=$GPUPOOL_TASK_ID devices=$CUDA_VISIBLE_DEVICES");
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_SUCCEEDED)) << Task(job).DebugString();
  v1::Task t = Task(job);
  EXPECT_EQ(t.node(), "node-a");
  ASSERT_EQ(t.allocations_size(), 1);
  std::string out = Logs(t.id());
  EXPECT_NE(out.find("task=" + t.id()), std::string::npos) << out;
  EXPECT_NE(out.find("devices=" + t.allocations(0).device_id()), std::string::npos) << out;
}

// The REST twins of GetTaskLogs and WatchJob on a real daemon: every call answers (the REST face
// once cancelled each stream as it registered it, so logs sent no bytes at all).
TEST_F(AgentE2eTest, RestLogsAndWatchAnswerOverARealSocket) {
  using api::testing::HttpCall;
  namespace http = boost::beast::http;
  StartAgent("node-a", 2);
  std::string job = Submit("echo hello-rest; sleep 30");
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_RUNNING)) << Task(job).DebugString();
  const std::string task = Task(job).id();
  ASSERT_TRUE(WaitFor([&] { return Logs(task).find("hello-rest") != std::string::npos; },
                      std::chrono::seconds(30)));
  std::string done = Submit("echo finished");
  ASSERT_TRUE(WaitState(done, v1::TASK_STATE_SUCCEEDED)) << Task(done).DebugString();
  for (int i = 0; i < 7; ++i) {
    // Running task, no follow: what it has written so far, then the stream ends.
    api::testing::HttpResult r =
        HttpCall(daemon_->http_port(), http::verb::get, "/v1/tasks/" + task + "/logs");
    EXPECT_EQ(r.status, 200) << r.body;
    // "hello-rest\n" in base64.
    EXPECT_NE(r.body.find("aGVsbG8tcmVzdAo="), std::string::npos) << r.body;
    // A finished job's watch: its current state, then the stream ends.
    r = HttpCall(daemon_->http_port(), http::verb::get, "/v1/jobs/" + done + ":watch");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"message\":\"current state\""), std::string::npos) << r.body;
  }
  // An error answers too: a task that does not exist.
  api::testing::HttpResult r =
      HttpCall(daemon_->http_port(), http::verb::get, "/v1/tasks/999.0/logs");
  EXPECT_EQ(r.status, 404) << r.body;
}

// Both /metrics endpoints pass `promtool check metrics` (Prometheus's own linter), and the
// agent's device series carry the running task and its tenant.
TEST_F(AgentE2eTest, MetricsOfDaemonAndAgentPassPromtool) {
  using api::testing::HttpCall;
  namespace http = boost::beast::http;
  const std::string promtool = GPUPOOL_PROMTOOL;
  ASSERT_FALSE(promtool.empty() || promtool.ends_with("NOTFOUND"))
      << "promtool not found: scripts/install-deps installs it (Debian package prometheus)";
  const int agent_port = testing::FreePort();
  StartAgent("node-a", 2, {"--metrics-listen", "127.0.0.1:" + std::to_string(agent_port)});
  std::string job = Submit("sleep 30");
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_RUNNING)) << Task(job).DebugString();
  const std::string task = Task(job).id();
  std::string agent_text;
  ASSERT_TRUE(WaitFor(
      [&] {
        agent_text = HttpCall(agent_port, http::verb::get, "/metrics").body;
        return agent_text.find("task=\"" + task + "\"") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << agent_text;
  EXPECT_NE(agent_text.find("tenant=\"acme/e2e/tester\""), std::string::npos) << agent_text;
  EXPECT_NE(agent_text.find("DCGM_FI_DEV_GPU_UTIL{"), std::string::npos) << agent_text;
  EXPECT_NE(agent_text.find("DCGM_FI_DEV_FB_USED{"), std::string::npos) << agent_text;
  const std::string daemon_text = HttpCall(daemon_->http_port(), http::verb::get, "/metrics").body;
  EXPECT_NE(daemon_text.find("gpupool_queue_depth_tasks"), std::string::npos) << daemon_text;
  for (const auto& [name, text] : {std::pair{"agent", agent_text}, {"gpupoold", daemon_text}}) {
    const std::string in = dir_ + "/" + name + ".metrics";
    const std::string out = in + ".promtool";
    std::ofstream(in) << text;
    const int rc =
        std::system((promtool + " check metrics < " + in + " > " + out + " 2>&1").c_str());
    std::ifstream f(out);
    const std::string report((std::istreambuf_iterator<char>(f)), {});
    EXPECT_EQ(rc, 0) << name << ": promtool check metrics:\n" << report;
  }
}

TEST_F(AgentE2eTest, ExitCodePropagates) {
  StartAgent("node-a", 1);
  std::string job = Submit("echo failing; exit 7");
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_FAILED)) << Task(job).DebugString();
  EXPECT_EQ(Task(job).exit_code(), 7);
}

TEST_F(AgentE2eTest, CancelKillsTheWholeProcessGroup) {
  StartAgent("node-a", 1);
  std::string pidfile = dir_ + "/grandchild.pid";
  std::string job = Submit("sleep 300 & echo $! > " + pidfile + "; wait");
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_RUNNING));
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(pidfile); }, std::chrono::seconds(10)));
  pid_t grandchild = 0;
  std::ifstream(pidfile) >> grandchild;
  ASSERT_GT(grandchild, 0);
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_job_id(job);
  v1::Job out;
  ASSERT_TRUE(jobs_->CancelJob(&ctx, req, &out).ok());
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_CANCELLED)) << Task(job).DebugString();
  // The sleep was a grandchild in the task's process group: it must be gone too.
  EXPECT_TRUE(WaitFor([&] { return ::kill(grandchild, 0) != 0; }, std::chrono::seconds(5)));
}

TEST_F(AgentE2eTest, AgentKilledTasksRequeueOntoAnotherNode) {
  StartAgent("node-a", 1);
  std::string pidfile = dir_ + "/task.pid";
  std::string job = Submit("echo $$ > " + pidfile + "; exec sleep 300", 1, /*retries=*/2);
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_RUNNING));
  StartAgent("node-b", 1);
  // The node dies: its agent and the task with it.
  agents_["node-a"]->Kill();
  pid_t task_pid = 0;
  std::ifstream(pidfile) >> task_pid;
  if (task_pid > 0) ::kill(-task_pid, SIGKILL);
  agents_.erase("node-a");
  ASSERT_TRUE(WaitFor([&] { return NodeState("node-a") == v1::NODE_STATE_NOT_READY; },
                      std::chrono::seconds(90)));
  ASSERT_TRUE(WaitFor(
      [&] {
        v1::Task t = Task(job);
        return t.node() == "node-b" && t.state() == v1::TASK_STATE_RUNNING;
      },
      std::chrono::seconds(90)))
      << Task(job).DebugString();
  EXPECT_EQ(Task(job).attempt(), 1);
}

TEST_F(AgentE2eTest, DaemonKill9RunningTasksAreReadoptedNotRunTwice) {
  StartAgent("node-a", 1);
  std::string runs = dir_ + "/runs";
  std::string job = Submit("echo run >> " + runs + "; sleep 6");
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_RUNNING));
  daemon_->Kill9();
  Status st = daemon_->Restart();
  ASSERT_TRUE(st.ok()) << st.ToString();
  Connect();
  ASSERT_TRUE(WaitState(job, v1::TASK_STATE_SUCCEEDED, 60)) << Task(job).DebugString();
  std::ifstream in(runs);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 1) << "the task ran " << lines << " times";
  EXPECT_EQ(Task(job).attempt(), 0);
}

}  // namespace
}  // namespace gpupool
