// Device health end to end (issue 10): a fatal XID injected into a real gpupool-agent's simulated
// backend fails the device's task (requeued: the job has a retry), takes the device out of
// service in gpupoold — stored in PostgreSQL, so it stays out across an agent restart that
// forgets the fault and a gpupoold restart — until an admin clears it with
// `gpupoolctl nodes clear-device`; the requeued task then runs there again.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::ChildProcess;
using testing::DaemonProcess;
using namespace std::chrono_literals;

constexpr char kDaemonConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 3000
  node_lease_ms: 3000  # L = T: this test's scenarios predate the long lease
  stop_grace_period_ms: 1000
)";

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout = 60s) {
  return ::gpupool::testing::WaitFor(done, timeout, std::chrono::milliseconds(50));
}

class DeviceHealthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-health");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml") << kDaemonConfig;
    auto d = DaemonProcess::Start(
        {.data_dir = "", .extra_args = {"--config", dir_ + "/gpupoold.yaml"}, .secure = false});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Connect();
    Status created = daemon_->CreatePool("gpu");
    ASSERT_TRUE(created.ok()) << created.ToString();
  }

  void TearDown() override {
    agent_.reset();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  void Connect() {
    auto channel = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
    pools_ = v1::PoolService::NewStub(channel);
    nodes_ = v1::NodeService::NewStub(channel);
    if (!agent_) agent_ = std::make_unique<testing::SingleAgent>(dir_, "gpu");
    agent_->Connect(daemon_->grpc_address());
  }

  void StartAgent() { ASSERT_TRUE(agent_->Start().ok()); }
  void StopAgent() { agent_->Stop(); }
  v1::Node Node() { return agent_->Node(); }
  v1::Task Task(const std::string& job_id) { return agent_->Task(job_id); }

  std::string Submit(const std::string& script, int retries) {
    testing::ShellJob job;
    job.script = script;
    job.retries = retries;
    return agent_->Submit(job);
  }

  void InjectEvent(const std::string& line) {
    std::ofstream(dir_ + "/node-a/sim-events", std::ios::app) << line << "\n";
  }

  // Runs gpupoolctl against the daemon; returns its exit code and fills `out`.
  int Ctl(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {testing::BinaryPath("gpupoolctl"), "--server",
                                     daemon_->grpc_address()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto ctl = ChildProcess::Spawn(argv, dir_ + "/ctl.log");
    if (!ctl.ok()) return -1;
    const int status = (*ctl)->Wait(60s);
    std::ifstream in(dir_ + "/ctl.log");
    out->assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::SingleAgent> agent_;  // node-a
  std::unique_ptr<v1::PoolService::Stub> pools_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
};

constexpr char kGpu[] = "GPU-sim-node-a-0";

TEST_F(DeviceHealthE2eTest, FatalXidFailsTheTaskAndKeepsTheDeviceOutUntilAnAdminClearsIt) {
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; }))
      << daemon_->LogTail(30);
  // The node says what it can enforce: XID events are watched.
  bool xid_capability = false;
  const v1::Node registered = Node();
  for (const v1::NodeCapability& c : registered.capabilities()) {
    if (c.name() == "xid_events") xid_capability = c.enforced();
  }
  EXPECT_TRUE(xid_capability) << registered.DebugString();

  const std::string job = Submit("sleep 120", /*retries=*/2);
  ASSERT_TRUE(WaitFor([&] { return Task(job).state() == v1::TASK_STATE_RUNNING; }))
      << Task(job).DebugString();

  // A non-fatal XID (13, an application's graphics engine exception) changes nothing.
  InjectEvent("xid " + std::string(kGpu) + " 13");
  // The fatal one: the GPU fell off the bus.
  InjectEvent("xid " + std::string(kGpu) + " 79");
  ASSERT_TRUE(WaitFor([&] {
    const v1::Node n = Node();
    return n.devices_size() == 1 && !n.devices(0).healthy() &&
           n.devices(0).fault().find("XID 79") != std::string::npos;
  })) << Node().DebugString();
  EXPECT_EQ(Node().devices(0).fault(), "XID 79 (GPU has fallen off the bus)");
  // The task was failed by the agent and requeued (it has retries); it cannot be placed while
  // the node's only GPU is out of service.
  ASSERT_TRUE(WaitFor([&] {
    const v1::Task t = Task(job);
    return t.attempt() == 1 && t.state() == v1::TASK_STATE_PENDING;
  })) << Task(job).DebugString();

  // gpupoolctl nodes get shows the fault; REST too.
  std::string out;
  ASSERT_EQ(Ctl({"nodes", "get", "node-a"}, &out), 0) << out;
  EXPECT_NE(out.find("XID 79 (GPU has fallen off the bus)"), std::string::npos) << out;
  EXPECT_NE(out.find("xid_events"), std::string::npos) << out;
  api::testing::HttpResult r = api::testing::HttpCall(
      daemon_->http_port(), boost::beast::http::verb::get, "/v1/nodes/node-a");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("GPU has fallen off the bus"), std::string::npos) << r.body;

  // An agent restart forgets the event; gpupoold does not.
  StopAgent();
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; }));
  // Several heartbeats of the fresh agent (which reports the device healthy) go by.
  const int64_t before = Node().last_heartbeat_time().seconds();
  ASSERT_TRUE(WaitFor([&] { return Node().last_heartbeat_time().seconds() >= before + 1; }));
  EXPECT_FALSE(Node().devices(0).healthy()) << Node().DebugString();
  EXPECT_EQ(Task(job).state(), v1::TASK_STATE_PENDING) << Task(job).DebugString();

  // Nor does a gpupoold restart: the fault is in PostgreSQL.
  ASSERT_EQ(daemon_->Stop(), 0) << daemon_->LogTail(30);
  Status restarted = daemon_->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  Connect();
  ASSERT_TRUE(WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; }))
      << daemon_->LogTail(30);
  EXPECT_FALSE(Node().devices(0).healthy()) << Node().DebugString();
  EXPECT_EQ(Node().devices(0).fault(), "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(Task(job).state(), v1::TASK_STATE_PENDING) << Task(job).DebugString();

  // Clearing a device that has no fault, or on an unknown node, says so.
  ASSERT_NE(Ctl({"nodes", "clear-device", "node-a", "GPU-nope"}, &out), 0);
  EXPECT_NE(out.find("has no fault to clear"), std::string::npos) << out;
  ASSERT_NE(Ctl({"nodes", "clear-device", "node-z", kGpu}, &out), 0);
  EXPECT_NE(out.find("node-z"), std::string::npos) << out;

  // The admin clears it: the device is back and the requeued task runs there.
  ASSERT_EQ(Ctl({"nodes", "clear-device", "node-a", kGpu}, &out), 0) << out;
  EXPECT_NE(out.find("fault cleared"), std::string::npos) << out;
  EXPECT_TRUE(Node().devices(0).healthy()) << Node().DebugString();
  EXPECT_EQ(Node().devices(0).fault(), "");
  ASSERT_TRUE(WaitFor([&] {
    const v1::Task t = Task(job);
    return t.attempt() == 1 && t.state() == v1::TASK_STATE_RUNNING;
  })) << Task(job).DebugString();
}

// An uncorrectable ECC error faults the device too; a fault after an admin's clear takes it out
// again; a task with no retries left fails, naming the device and the error.
TEST_F(DeviceHealthE2eTest, AFaultAfterAClearTakesTheDeviceOutAgainAndUsesUpRetries) {
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; }));
  const std::string job = Submit("sleep 120", /*retries=*/1);
  ASSERT_TRUE(WaitFor([&] { return Task(job).state() == v1::TASK_STATE_RUNNING; }));
  InjectEvent("ecc " + std::string(kGpu) + " uncorrected");
  ASSERT_TRUE(WaitFor([&] {
    const v1::Task t = Task(job);
    return t.attempt() == 1 && t.state() == v1::TASK_STATE_PENDING;
  })) << Task(job).DebugString();
  EXPECT_EQ(Node().devices(0).fault(), "uncorrectable (double-bit) ECC error");

  grpc::ClientContext ctx;
  v1::ClearDeviceFaultRequest clear;
  clear.set_node("node-a");
  clear.set_device(kGpu);
  v1::Node cleared;
  ASSERT_TRUE(nodes_->ClearDeviceFault(&ctx, clear, &cleared).ok());
  EXPECT_TRUE(cleared.devices(0).healthy()) << cleared.DebugString();
  ASSERT_TRUE(WaitFor([&] { return Task(job).state() == v1::TASK_STATE_RUNNING; }))
      << Task(job).DebugString();

  InjectEvent("xid " + std::string(kGpu) + " 95");
  ASSERT_TRUE(WaitFor([&] { return Task(job).state() == v1::TASK_STATE_FAILED; }))
      << Task(job).DebugString();
  const std::string reason = Task(job).reason();
  EXPECT_NE(reason.find("XID 95 (uncontained ECC error)"), std::string::npos) << reason;
  EXPECT_NE(reason.find(kGpu), std::string::npos) << reason;
  EXPECT_NE(reason.find("out of retries"), std::string::npos) << reason;
  ASSERT_TRUE(WaitFor([&] { return !Node().devices(0).healthy(); }));
  EXPECT_EQ(Node().devices(0).fault(), "XID 95 (uncontained ECC error)");
}

}  // namespace
}  // namespace gpupool
