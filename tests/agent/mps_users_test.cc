// MPS serves one user per server (issue 24): sandboxed fractional tasks through the TaskRunner,
// the MpsManager running the fake control daemon (tests/agent/fake_mps_control.sh) and every task
// a CUDA program on the fake driver, whose cuInit joins the daemon's server the way
// nvidia-cuda-mps-control(1) describes — a client of another uid waits until the running server's
// clients are gone (tests/fakes/cuda/fake_mps.cc). With a daemon per tenant and a tenant's MPS
// clients sharing its uid, two tenants' tasks and a second task of one of them run at once, each
// with its own limits; on a daemon shared by two tenants (different uids) the second waits, as a
// real one would — why the agent forces a daemon per tenant under the sandbox. Every task runs in
// its container under runc (the one sandbox path), its CUDA reaching the daemon through the pipe
// directory bound into it. Root, runc, skopeo and umoci only.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/images.h"
#include "agent/mps/mps_manager.h"
#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/sandbox.h"
#include "agent/sandbox/uids.h"
#include "agent/task_runner.h"
#include "tests/agent/fake_gpu.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class MpsUsersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
    data_dir_ = testing::TempDir("/tmp/gpupool-mpsusers-data-");
    // Under /run, not /tmp: a sandboxed task's private /tmp would hide them.
    run_dir_ = testing::TempDir("/run/gpupool-mpsusers-");
    chmod(run_dir_.c_str(), 0755);
    state_dir_ = run_dir_ + "/cuda";
    std::filesystem::create_directories(state_dir_);
    ASSERT_TRUE(testing::MakeFakeGpu(state_dir_));
  }

  void Start(bool per_tenant) {
    MpsOptions mo;
    mo.enabled = true;
    mo.control = GPUPOOL_FAKE_MPS;
    mo.dir = run_dir_ + "/mps";
    mo.per_tenant = per_tenant;
    sandbox::SandboxOptions so;
    so.enabled = true;
    so.cgroup_parent = "gpupool-mpsusers-" + std::to_string(getpid());
    so.uid_pool_first = 63500;
    so.uid_pool_count = 50;
    // The probe and the fake driver, from the build tree, read-only.
    so.host_dirs = {"/usr", "/etc", std::filesystem::path(GPUPOOL_PROBE).parent_path().string(),
                    GPUPOOL_FAKE_CUDA_DIR};
    auto box = sandbox::Sandbox::Create(so);
    ASSERT_TRUE(box.ok()) << box.status().ToString();
    cgroup_parent_ = so.cgroup_parent;
    ImageOptions io;
    io.shim = GPUPOOL_OCI_SHIM;
    io.simulated_gpu_state = state_dir_;  // the fake GPU's memory, as its device node would be
    auto containers = OpenContainers(io, *box, data_dir_, "");
    ASSERT_TRUE(containers.ok()) << containers.status().ToString();
    TaskRunnerOptions o;
    o.data_dir = data_dir_;
    o.default_grace_ms = 300;
    o.sandbox = *box;
    o.containers = *containers;
    o.mps = std::make_shared<MpsManager>(mo);
    runner_ = std::make_unique<TaskRunner>(o);
    ended_.Attach(*runner_);
  }

  void TearDown() override {
    runner_.reset();
    std::error_code ec;
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_, ec);
    if (!run_dir_.empty()) std::filesystem::remove_all(run_dir_, ec);
    testing::RemoveCgroupParent(cgroup_parent_ + "-containers");
  }

  // A CUDA program holding 1 MiB of the fake GPU for `hold_s` seconds, on `pct` % of its threads.
  TaskSpec Spec(const std::string& id, const std::string& tenant, int32_t pct, int hold_s) {
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = id;
    s.job_id = "job-" + id;
    s.tenant = tenant;
    s.attempt = 1;
    s.argv = {"/bin/sh", "-c",
              "sleep " + std::to_string(hold_s) + " | " + GPUPOOL_PROBE + " alloc plain " +
                  std::to_string(kMiB)};
    testing::OnFakeGpu(&s, state_dir_, GPUPOOL_FAKE_CUDA_DIR, 16, 1'000 * pct, pct);
    return s;
  }
  std::string DaemonLog(const std::string& key) {
    return ReadFile(run_dir_ + "/mps/" + key + "/pipe/fake-mps.log");
  }

  std::string data_dir_, run_dir_, state_dir_, cgroup_parent_;
  std::unique_ptr<TaskRunner> runner_;
  testing::EndedTasks ended_;
};

TEST_F(MpsUsersTest, TwoTenantsAndASecondTaskOfOneRunAtOnceEachWithItsOwnLimits) {
  Start(/*per_tenant=*/true);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [id, tenant, pct] : {std::tuple{"a1", "acme", 30}, std::tuple{"a2", "acme", 20},
                                        std::tuple{"g1", "globex", 50}}) {
    auto st = runner_->Start(Spec(id, tenant, pct, 3));
    ASSERT_TRUE(st.ok()) << st.status().ToString();
  }
  for (const char* id : {"a1", "a2", "g1"}) {
    const TaskStatus end = ended_.Wait(id);
    EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << id << ": " << end.reason << end.output_tail;
    EXPECT_NE(end.output_tail.find("rc=0"), std::string::npos) << id << ": " << end.output_tail;
  }
  // All three held the GPU together: one after another would take 9 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(7500));
  const std::string acme = DaemonLog(testing::FakeGpuUuid() + ".acme"),
                    globex = DaemonLog(testing::FakeGpuUuid() + ".globex");
  EXPECT_EQ(Count(acme, "queued"), 0) << acme;
  EXPECT_EQ(Count(globex, "queued"), 0) << globex;
  // acme's two clients: one server, so one uid, each with its own percentage.
  EXPECT_EQ(Count(acme, "client pid="), 2) << acme;
  EXPECT_NE(acme.find("active_thread_percentage=30 pinned_mem_limit=0=16M"), std::string::npos)
      << acme;
  EXPECT_NE(acme.find("active_thread_percentage=20 pinned_mem_limit=0=16M"), std::string::npos)
      << acme;
  const size_t at = acme.find(" uid=");
  ASSERT_NE(at, std::string::npos);
  const std::string acme_uid = acme.substr(at, acme.find(' ', at + 1) - at);
  EXPECT_EQ(Count(acme, acme_uid + " "), 2) << acme;
  EXPECT_NE(globex.find("active_thread_percentage=50"), std::string::npos) << globex;
  EXPECT_EQ(globex.find(acme_uid + " "), std::string::npos) << "tenants never share a uid";
}

// The rule the fake follows, on a daemon two tenants share: the second tenant's client waits for
// the first's server to be done — the serialization a shared daemon would impose on tenants that
// run as different uids.
TEST_F(MpsUsersTest, OnADaemonSharedByTwoUsersTheSecondWaitsForTheFirst) {
  Start(/*per_tenant=*/false);
  ASSERT_TRUE(runner_->Start(Spec("first", "acme", 30, 2)).ok());
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] { return DaemonLog(testing::FakeGpuUuid()).find("client pid=") != std::string::npos; },
      std::chrono::seconds(20)));
  ASSERT_TRUE(runner_->Start(Spec("second", "globex", 30, 0)).ok());
  const TaskStatus first = ended_.Wait("first");
  const TaskStatus second = ended_.Wait("second");
  EXPECT_EQ(first.phase, TaskPhase::kSucceeded) << first.output_tail;
  EXPECT_EQ(second.phase, TaskPhase::kSucceeded) << second.output_tail;
  const std::string log = DaemonLog(testing::FakeGpuUuid());
  const size_t queued = log.find("queued");
  ASSERT_NE(queued, std::string::npos) << log;
  EXPECT_LT(queued, log.rfind("client pid=")) << "served once the first uid's server was done";
}

}  // namespace
}  // namespace gpupool::agent

namespace gpupool::agent {
namespace {

// A tenant's shared uid: the same for all its holders, another tenant's differs, and it goes back
// to the pool with its last holder (and not before).
TEST(UidMapSharedTest, OneUidPerTenantHeldUntilItsLastHolderGoes) {
  sandbox::UidMap uids({}, 70000, 3);
  auto a1 = uids.AcquireShared("acme");
  auto a2 = uids.AcquireShared("acme");
  auto g1 = uids.AcquireShared("globex");
  ASSERT_TRUE(a1.ok() && a2.ok() && g1.ok());
  EXPECT_EQ(a1->uid, a2->uid);
  EXPECT_NE(a1->uid, g1->uid);
  EXPECT_EQ(uids.pool_in_use(), 2);
  auto own = uids.Acquire("acme");  // a task that is no MPS client keeps a uid of its own
  ASSERT_TRUE(own.ok());
  EXPECT_NE(own->uid, a1->uid);
  EXPECT_EQ(uids.pool_in_use(), 3);
  EXPECT_FALSE(uids.AcquireShared("initech").ok()) << "the pool is exhausted";
  uids.Release(*a1);
  EXPECT_EQ(uids.pool_in_use(), 3) << "acme's second holder still runs";
  uids.Release(*a2);
  EXPECT_EQ(uids.pool_in_use(), 2);
  auto again = uids.AcquireShared("acme");
  ASSERT_TRUE(again.ok());
  uids.Release(*again);
  uids.Release(*g1);
  uids.Release(*own);
  EXPECT_EQ(uids.pool_in_use(), 0);
}

}  // namespace
}  // namespace gpupool::agent
