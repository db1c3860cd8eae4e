// VRAM scrub between tenants with real child processes and the simulated, file-backed device
// memory: tenant B cannot read what tenant A left on the device; the same tenant again is not
// scrubbed; a failed scrub keeps the device out of service and fails its next tasks with the
// reason; the CUDA scrubber says clearly when libcuda is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "agent/capabilities.h"
#include "agent/scrub/device_guard.h"
#include "agent/task_runner.h"

namespace gpupool::agent {
namespace {

constexpr const char* kGpu = "GPU-sim-node-a-0";

class ScrubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupool-scrub-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/dev");
    auto scrubber = std::make_unique<SimScrubber>(dir_ + "/dev", 4 << 20);
    sim_ = scrubber.get();
    ASSERT_TRUE(sim_->EnsureFile(kGpu).ok());
    guard_ = std::make_shared<DeviceGuard>(std::move(scrubber));
    TaskRunnerOptions o;
    o.data_dir = dir_;
    o.device_guard = guard_;
    runner_ = std::make_unique<TaskRunner>(o);
    runner_->SetListener("node-a", [this](const TaskStatus& st) {
      std::lock_guard lock(mu_);
      ended_[st.task_id] = st;
      cv_.notify_all();
    });
  }
  void TearDown() override {
    runner_.reset();
    std::filesystem::remove_all(dir_);
  }

  TaskStatus Run(const std::string& id, const std::string& tenant, const std::string& script) {
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = id;
    s.tenant = tenant;
    s.attempt = 1;
    s.argv = {"/bin/sh", "-c", script};
    s.devices = {{kGpu, 100'000, 1024, 0}};
    auto st = runner_->Start(s);
    EXPECT_TRUE(st.ok());
    if (st->terminal()) return *st;
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(60), [&] { return ended_.count(id); }));
    return ended_[id];
  }

  std::string Vram() { return sim_->PathOf(kGpu); }

  std::string dir_;
  SimScrubber* sim_ = nullptr;
  std::shared_ptr<DeviceGuard> guard_;
  std::unique_ptr<TaskRunner> runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, TaskStatus> ended_;
};

TEST_F(ScrubTest, TenantBCannotReadWhatTenantALeftOnTheDevice) {
  // Tenant A writes a secret into "device memory" at 1 MiB and leaves.
  TaskStatus a = Run(
      "a", "tenant-a",
      "printf TENANT-A-SECRET | dd of=" + Vram() + " bs=1 seek=1048576 conv=notrunc 2>/dev/null");
  ASSERT_EQ(a.phase, TaskPhase::kSucceeded) << a.output_tail;
  std::ifstream raw(Vram(), std::ios::binary);
  std::string before((std::istreambuf_iterator<char>(raw)), {});
  ASSERT_NE(before.find("TENANT-A-SECRET"), std::string::npos);  // it really was there
  // Tenant A was the first here in this agent process: whoever used the device before it (a
  // tenant of the previous agent process) is unknown, so it was scrubbed for A too.
  EXPECT_EQ(guard_->scrubs(), 1);
  ASSERT_TRUE(guard_->LastScrub(kGpu).has_value());
  EXPECT_EQ(guard_->LastScrub(kGpu)->from_tenants, DeviceGuard::kBeforeThisProcess);
  EXPECT_EQ(guard_->LastScrub(kGpu)->to_tenant, "tenant-a");

  // Tenant B gets the device: scrubbed first, and finds nothing but zeros.
  TaskStatus b =
      Run("b", "tenant-b", "tr -d '\\000' < " + Vram() + " | wc -c; grep -c TENANT-A " + Vram());
  ASSERT_EQ(b.phase, TaskPhase::kFailed);  // grep -c finds nothing: exit 1
  EXPECT_EQ(b.output_tail, "0\n0\n");
  EXPECT_EQ(guard_->scrubs(), 2);
  auto rec = guard_->LastScrub(kGpu);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->from_tenants, "tenant-a");
  EXPECT_EQ(rec->to_tenant, "tenant-b");
  EXPECT_EQ(rec->result.bytes, 4 << 20);

  // Tenant B again: nobody else used it since, no scrub.
  Run("b2", "tenant-b", "true");
  EXPECT_EQ(guard_->scrubs(), 2);
}

TEST_F(ScrubTest, AFailedScrubKeepsTheDeviceOutOfService) {
  Run("a", "tenant-a", "true");
  sim_->InjectFailure(kGpu);
  TaskStatus b = Run("b", "tenant-b", "echo ran");
  EXPECT_EQ(b.phase, TaskPhase::kFailed);
  EXPECT_EQ(b.exit_code, 126);
  EXPECT_EQ(b.output_tail.find("ran"), std::string::npos);
  EXPECT_NE(b.reason.find("device GPU-sim-node-a-0 is out of service: vram scrub failed"),
            std::string::npos)
      << b.reason;
  EXPECT_NE(b.reason.find("verify failed at offset 2097152"), std::string::npos) << b.reason;
  ASSERT_TRUE(guard_->OutOfService(kGpu).has_value());
  // Even the tenant who used it last cannot have it back: it stays out until an agent restart.
  TaskStatus a2 = Run("a2", "tenant-a", "echo ran");
  EXPECT_EQ(a2.phase, TaskPhase::kFailed);
  EXPECT_NE(a2.reason.find("out of service"), std::string::npos);
}

TEST_F(ScrubTest, CapabilitiesSayWhatIsEnforced) {
  TaskRunnerOptions o;
  o.device_guard = guard_;
  std::map<std::string, std::pair<bool, std::string>> caps;
  for (const auto& c : NodeCapabilities(o)) caps[c.name] = {c.enforced, c.detail};
  EXPECT_TRUE(caps["vram_scrub"].first);
  EXPECT_FALSE(caps["sandbox"].first);
  EXPECT_FALSE(caps["mps"].first);
  EXPECT_NE(caps["mps"].second.find("no MPS control daemon"), std::string::npos);
  EXPECT_FALSE(caps["xid_events"].first);
  o.device_guard.reset();
  for (const auto& c : NodeCapabilities(o)) caps[c.name] = {c.enforced, c.detail};
  EXPECT_FALSE(caps["vram_scrub"].first);
}

TEST(CudaScrubberTest, SaysWhenLibcudaIsAbsent) {
  auto s = OpenCudaScrubber();
  if (s.ok()) GTEST_SKIP() << "libcuda.so.1 is present on this host";
  EXPECT_NE(s.status().message().find("libcuda.so.1"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace gpupool::agent
