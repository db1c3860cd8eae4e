// Issue 27 end to end on the fake NVML: a real gpupoold and a real gpupool-agent with `backend:
// nvml` on tests/agent/fake_nvml_mig.cc (a libnvidia-ml that models MIG management, its driver
// state in a directory, its device files character devices with the driver's numbers), the
// sandbox on. One H100 in MIG mode with no instance yet, in a pool with the idle policy.
//  - Two 3g.40gb jobs: the scheduler lays the GPU out for them, the agent creates the GPU and
//    compute instances through NVML, and each task, in its container, can open its instance's
//    two capability files and the GPU's node — and no other instance's.
//  - Once they have ended, an admin's 7g.80gb layout destroys those instances (their capability
//    files go with them) and a 7g.80gb task runs on the new one.
//  - A daemon restart in the middle of a re-layout: the layout is stored while the agent is away,
//    gpupoold restarts, the agent comes back and is asked again; the driver ends with exactly the
//    stored layout.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/api/http_client.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/token_daemon.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using api::testing::HttpResult;
using api::testing::http::verb;
using testing::ChildProcess;
using testing::DaemonProcess;
namespace fs = std::filesystem;

constexpr char kAdmin[] = "admin-token-mignvml-0123456789";
constexpr char kAcme[] = "acme-token-mignvml-0123456789";

class MigNvmlE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = agent::testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
    // Under /run: the tasks' containers do not see the host's copy of the device directory.
    dir_ = "/run/gpupool-mig-nvml-" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/nvml");
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    nvml_ = dir_ + "/nvml";
    std::ofstream(nvml_ + "/gpus") << "GPU-h100-0 0 1 NVIDIA H100 80GB HBM3\n";
    std::ofstream(nvml_ + "/char_devices") << "238\n";
    ::setenv("GPUPOOL_FAKE_NVML_DIR", nvml_.c_str(), 1);  // the agent inherits it
    auto d = testing::StartDaemonWithTokens(
        dir_, {{kAdmin, "ops", true}, {kAcme, "acme", false}},
        "scheduler:\n  heartbeat_interval_ms: 200\n  heartbeat_timeout_ms: 30000\n"
        "  node_lease_ms: 30000\n  stop_grace_period_ms: 1000\n");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/pools",
                   R"({"pool": {"name": "mig", "sharingMode": "SHARING_MODE_EXCLUSIVE",
                                "migRelayout": "MIG_RELAYOUT_IDLE"}})")
                  .status,
              200);
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/tenants", R"({"tenant": {"path": "acme"}})").status,
              200);
    StartAgent();
  }

  void StartAgent() {
    testing::AgentProcessOptions o;
    o.dir = dir_;
    o.node = "node-n";
    o.scheduler = daemon_->grpc_address();
    o.pool = "mig";
    o.extra_args = {"--backend", "nvml"};
    cgroup_parent_ = "gpupool-mig-nvml-e2e-" + std::to_string(getpid());
    o.extra_config = "nvml:\n  library: " + std::string(GPUPOOL_FAKE_NVML_MIG) +
                     "\n  dev_dir: " + nvml_ + "/dev\n  proc_dir: " + nvml_ +
                     "/proc\nsandbox:\n  enabled: true\n  cgroup_parent: " + cgroup_parent_ +
                     "\n  uid_pool: {first: 62000, count: 100}\n";
    auto child = testing::StartAgentProcess(o);
    ASSERT_TRUE(child.ok());
    agent_ = std::move(child).value();
    ASSERT_TRUE(testing::WaitFor(
        [&] { return Node().state() == v1::NODE_STATE_READY && Node().mig_gpus_size() == 1; },
        std::chrono::seconds(120), std::chrono::milliseconds(100)))
        << "the agent did not register; its log: " << dir_ << "/node-n.log";
  }

  void StopAgent() {
    agent_->Signal(SIGKILL);
    agent_->Wait(std::chrono::seconds(10));
    agent_.reset();
  }

  void TearDown() override {
    if (agent_) {
      agent_->Signal(SIGTERM);
      agent_->Wait(std::chrono::seconds(10));
    }
    daemon_.reset();
    agent::testing::RemoveCgroupParent(cgroup_parent_);
    ::unsetenv("GPUPOOL_FAKE_NVML_DIR");
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }

  HttpResult Rest(const std::string& token, verb v, const std::string& target,
                  const std::string& body = "") {
    return testing::RestAs(*daemon_, token, v, target, body);
  }
  v1::Node Node() {
    HttpResult r = Rest(kAdmin, verb::get, "/v1/nodes/node-n");
    return r.status == 200 ? testing::ParseJson<v1::Node>(r.body) : v1::Node();
  }
  v1::MigGpu Gpu() {
    v1::Node n = Node();
    return n.mig_gpus_size() == 1 ? n.mig_gpus(0) : v1::MigGpu();
  }
  HttpResult SetLayout(const std::string& layout) {
    return Rest(kAdmin, verb::post, "/v1/nodes/node-n/gpus/GPU-h100-0:set-mig-layout",
                R"({"layout": ")" + layout + R"("})");
  }

  // A job whose task, in its container, counts the MIG capability files it can open (they reach
  // the driver: ENXIO, as nothing backs them) and checks the GPU's node: exit 0 when it is
  // exactly its instance's two, 3 otherwise; it then sleeps `hold` seconds.
  std::string Submit(const std::string& profile, int hold) {
    const std::string caps = nvml_ + "/dev/nvidia-caps";
    const std::string script = "n=0; for f in " + caps +
                               "/*; do if cat $f 2>&1 | grep -q 'No such device or address'; "
                               "then n=$((n+1)); fi; echo $f; done; echo opened=$n; cat " +
                               nvml_ +
                               "/dev/nvidia0 2>&1 | grep -q 'No such device or address' || exit 4; "
                               "[ $n -eq 2 ] || exit 3; "
                               "sleep " +
                               std::to_string(hold);
    const HttpResult r =
        Rest(kAcme, verb::post, "/v1/jobs",
             R"({"spec": {"tenant": "acme", "pool": "mig", "taskCount": 1, "template": )"
             R"({"command": ["/bin/sh", "-c", ")" +
                 script + R"("], "resources": {"mig": {"profile": ")" + profile + R"("}}}}})");
    EXPECT_EQ(r.status, 200) << r.body;
    return testing::ParseJson<v1::SubmitJobResponse>(r.body).job_id();
  }
  v1::Job Job(const std::string& id) {
    return testing::ParseJson<v1::Job>(Rest(kAdmin, verb::get, "/v1/jobs/" + id).body);
  }
  bool Ended(const std::string& id) {
    const v1::JobState s = Job(id).state();
    return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
           s == v1::JOB_STATE_CANCELLED;
  }
  // The GPU instances the fake driver holds: their capability directories.
  std::set<std::string> DriverInstances() {
    std::set<std::string> out;
    const std::string mig = nvml_ + "/proc/capabilities/gpu0/mig";
    if (!fs::exists(mig)) return out;
    for (const auto& e : fs::directory_iterator(mig)) out.insert(e.path().filename().string());
    return out;
  }

  std::string dir_, nvml_, cgroup_parent_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<ChildProcess> agent_;
};

TEST_F(MigNvmlE2eTest, InstancesAreCreatedForTasksSeenOnlyByThemAndDestroyedOnTheNextLayout) {
  EXPECT_EQ(Gpu().layout(), "");  // MIG mode, no instance yet
  EXPECT_TRUE(DriverInstances().empty());
  const std::string a = Submit("3g.40gb", 5);
  const std::string b = Submit("3g.40gb", 5);
  ASSERT_TRUE(testing::WaitFor([&] { return Ended(a) && Ended(b); }, std::chrono::seconds(120),
                               std::chrono::milliseconds(200)))
      << Rest(kAdmin, verb::get, "/v1/nodes/node-n").body;
  EXPECT_EQ(Job(a).state(), v1::JOB_STATE_SUCCEEDED) << Job(a).DebugString();
  EXPECT_EQ(Job(b).state(), v1::JOB_STATE_SUCCEEDED) << Job(b).DebugString();
  EXPECT_EQ(Gpu().layout(), "3g.40gb@0+3g.40gb@4");
  EXPECT_EQ(Gpu().set_by(), "scheduler");
  EXPECT_EQ(DriverInstances().size(), 2u);
  const std::set<std::string> before = DriverInstances();

  // The tasks have ended: an admin's layout replaces the instances in the driver.
  HttpResult r = SetLayout("7g.80gb@0");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(testing::WaitFor([&] { return Gpu().state() == "applied"; }, std::chrono::seconds(30),
                               std::chrono::milliseconds(100)));
  EXPECT_EQ(Gpu().layout(), "7g.80gb@0");
  const std::set<std::string> after = DriverInstances();
  EXPECT_EQ(after.size(), 1u);
  for (const std::string& gi : before) EXPECT_FALSE(after.contains(gi)) << gi << " survived";
  const std::string c = Submit("7g.80gb", 0);
  ASSERT_TRUE(testing::WaitFor([&] { return Ended(c); }, std::chrono::seconds(60),
                               std::chrono::milliseconds(200)));
  EXPECT_EQ(Job(c).state(), v1::JOB_STATE_SUCCEEDED) << Job(c).DebugString();
}

TEST_F(MigNvmlE2eTest, ADaemonRestartMidRelayoutLeavesTheDriverOnTheStoredLayout) {
  StopAgent();
  ASSERT_EQ(SetLayout("4g.40gb@0+2g.20gb@4+1g.10gb@6").status, 200);
  EXPECT_EQ(Gpu().state(), "applying");
  ASSERT_EQ(daemon_->Stop(), 0);
  ASSERT_TRUE(daemon_->Restart().ok());
  StartAgent();
  ASSERT_TRUE(testing::WaitFor([&] { return Gpu().state() == "applied"; }, std::chrono::seconds(30),
                               std::chrono::milliseconds(100)))
      << Rest(kAdmin, verb::get, "/v1/nodes/node-n").body;
  EXPECT_EQ(Gpu().layout(), "4g.40gb@0+2g.20gb@4+1g.10gb@6");
  EXPECT_EQ(DriverInstances().size(), 3u);
  // And the journal the agent kept while it re-partitioned is gone: the GPU is whole.
  EXPECT_FALSE(fs::exists(dir_ + "/node-n/mig") && !fs::is_empty(dir_ + "/node-n/mig"));
}

}  // namespace
}  // namespace gpupool
