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
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/agent/sandbox_fixture.h"
#include "tests/e2e/mig_e2e_fixture.h"

namespace gpupool {
namespace {

using api::testing::HttpResult;
using api::testing::http::verb;
namespace fs = std::filesystem;

class MigNvmlE2eTest : public testing::MigE2eFixture {
 protected:
  void SetUp() override {
    if (std::string why = agent::testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
    // Under /run: the tasks' containers do not see the host's copy of the device directory.
    const std::string dir = "/run/gpupool-mig-nvml-" + std::to_string(getpid());
    fs::remove_all(dir);
    fs::create_directories(dir + "/nvml");
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    nvml_ = dir + "/nvml";
    std::ofstream(nvml_ + "/gpus") << "GPU-h100-0 0 1 NVIDIA H100 80GB HBM3\n";
    std::ofstream(nvml_ + "/char_devices") << "238\n";
    ::setenv("GPUPOOL_FAKE_NVML_DIR", nvml_.c_str(), 1);  // the agent inherits it
    cgroup_parent_ = "gpupool-mig-nvml-e2e-" + std::to_string(getpid());
    StartAll(dir);
  }

  void Configure(testing::AgentProcessOptions* o) override {
    o->extra_args = {"--backend", "nvml"};
    o->extra_config = "nvml:\n  library: " + std::string(GPUPOOL_FAKE_NVML_MIG) +
                      "\n  dev_dir: " + nvml_ + "/dev\n  proc_dir: " + nvml_ +
                      "/proc\nsandbox:\n  enabled: true\n  cgroup_parent: " + cgroup_parent_ +
                      "\n  uid_pool: {first: 62000, count: 100}\n";
  }

  void Cleanup() override {
    agent::testing::RemoveCgroupParent(cgroup_parent_);
    ::unsetenv("GPUPOOL_FAKE_NVML_DIR");
  }

  // A job whose task, in its container, counts the MIG capability files it can open (they reach
  // the driver: ENXIO, as nothing backs them) and checks the GPU's node: exit 0 when it is
  // exactly its instance's two, 3 otherwise; it then sleeps `hold` seconds.
  std::string SubmitChecking(const std::string& profile, int hold) {
    const std::string caps = nvml_ + "/dev/nvidia-caps";
    return Submit(profile, "n=0; for f in " + caps +
                               "/*; do if cat $f 2>&1 | grep -q 'No such device or address'; "
                               "then n=$((n+1)); fi; echo $f; done; echo opened=$n; cat " +
                               nvml_ +
                               "/dev/nvidia0 2>&1 | grep -q 'No such device or address' || exit 4; "
                               "[ $n -eq 2 ] || exit 3; sleep " +
                               std::to_string(hold));
  }
  // The GPU instances the fake driver holds: their capability directories.
  std::set<std::string> DriverInstances() {
    std::set<std::string> out;
    const std::string mig = nvml_ + "/proc/capabilities/gpu0/mig";
    if (!fs::exists(mig)) return out;
    for (const auto& e : fs::directory_iterator(mig)) out.insert(e.path().filename().string());
    return out;
  }

  std::string nvml_, cgroup_parent_;
};

TEST_F(MigNvmlE2eTest, InstancesAreCreatedForTasksSeenOnlyByThemAndDestroyedOnTheNextLayout) {
  EXPECT_EQ(Gpu().layout(), "");  // MIG mode, no instance yet
  EXPECT_TRUE(DriverInstances().empty());
  const std::string a = SubmitChecking("3g.40gb", 5);
  const std::string b = SubmitChecking("3g.40gb", 5);
  ASSERT_TRUE(testing::WaitFor([&] { return Ended(a) && Ended(b); }, std::chrono::seconds(120),
                               std::chrono::milliseconds(200)))
      << NodeJson();
  EXPECT_EQ(Job(a).state(), v1::JOB_STATE_SUCCEEDED) << Job(a).DebugString();
  EXPECT_EQ(Job(b).state(), v1::JOB_STATE_SUCCEEDED) << Job(b).DebugString();
  EXPECT_EQ(Gpu().layout(), "3g.40gb@0+3g.40gb@4");
  EXPECT_EQ(Gpu().set_by(), "scheduler");
  EXPECT_EQ(DriverInstances().size(), 2u);
  const std::set<std::string> before = DriverInstances();

  // The tasks have ended: an admin's layout replaces the instances in the driver.
  HttpResult r = SetLayout(kAdmin, "7g.80gb@0");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(testing::WaitFor([&] { return Applied(); }, std::chrono::seconds(30),
                               std::chrono::milliseconds(100)));
  EXPECT_EQ(Gpu().layout(), "7g.80gb@0");
  const std::set<std::string> after = DriverInstances();
  EXPECT_EQ(after.size(), 1u);
  for (const std::string& gi : before) EXPECT_FALSE(after.contains(gi)) << gi << " survived";
  const std::string c = SubmitChecking("7g.80gb", 0);
  ASSERT_TRUE(testing::WaitFor([&] { return Ended(c); }, std::chrono::seconds(60),
                               std::chrono::milliseconds(200)));
  EXPECT_EQ(Job(c).state(), v1::JOB_STATE_SUCCEEDED) << Job(c).DebugString();
}

TEST_F(MigNvmlE2eTest, ADaemonRestartMidRelayoutLeavesTheDriverOnTheStoredLayout) {
  StopAgent();
  ASSERT_EQ(SetLayout(kAdmin, "4g.40gb@0+2g.20gb@4+1g.10gb@6").status, 200);
  EXPECT_EQ(Gpu().state(), "applying");
  ASSERT_EQ(daemon_->Stop(), 0);
  ASSERT_TRUE(daemon_->Restart().ok());
  StartAgent();
  ASSERT_TRUE(testing::WaitFor([&] { return Applied(); }, std::chrono::seconds(30),
                               std::chrono::milliseconds(100)))
      << NodeJson();
  EXPECT_EQ(Gpu().layout(), "4g.40gb@0+2g.20gb@4+1g.10gb@6");
  EXPECT_EQ(DriverInstances().size(), 3u);
  // And the journal the agent kept while it re-partitioned is gone: the GPU is whole.
  EXPECT_FALSE(fs::exists(dir_ + "/node-m/mig") && !fs::is_empty(dir_ + "/node-m/mig"));
}

}  // namespace
}  // namespace gpupool
