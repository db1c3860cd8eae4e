// Image tasks through the TaskRunner, with real parts: a docker-registry on loopback, skopeo and
// umoci pulling into the node's image store, runc running the container through the agent's
// shim, the sandbox's uid pool. Root only (user namespaces, mounts, cgroups); skips saying why
// elsewhere.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/driver_files.h"
#include "agent/image/image_store.h"
#include "agent/image_cache_report.h"
#include "agent/image_metrics.h"
#include "agent/images.h"
#include "agent/oci/launcher.h"
#include "agent/oci/rootfs.h"
#include "agent/proto_convert.h"
#include "agent/task_runner.h"
#include "tests/agent/net_fixture.h"
#include "tests/agent/oci_registry.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/support/status_macros.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

class ImageTaskTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "image tasks need root (user namespaces, mounts, cgroups)";
      return;
    }
    registry_ = new ::gpupool::testing::LocalRegistry();
    Status st = registry_->Start();
    if (!st.ok()) {
      skip_ = "no local registry: " + st.message();
      return;
    }
    work_ = ::gpupool::testing::MakeScratchDir("/tmp/gpupool-imgtask-work-");
    ::gpupool::testing::TestLayer app;
    app.files["/etc/app-release"] = "gpupool app 1\n";
    // A static probe: a system call the default seccomp profile refuses, a memory hog.
    app.copy_from_host["/bin/oci_probe"] = GPUPOOL_OCI_PROBE;
    auto digest = ::gpupool::testing::BuildAndPush(*registry_, work_, "test/app", "1",
                                                   {::gpupool::testing::BusyboxLayer(), app});
    if (!digest.ok()) skip_ = "cannot build the test image: " + digest.status().message();
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
    std::error_code ec;
    if (!work_.empty()) fs::remove_all(work_, ec);
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    data_dir_ = ::gpupool::testing::MakeScratchDir("/tmp/gpupool-imgtask-data-");
    // 0700, as systemd's StateDirectory makes it: the agent must make the way to the task's
    // rootfs searchable for runc's user-namespaced init itself (images.h, OpenContainers).
    chmod(data_dir_.c_str(), 0700);
    sandbox::SandboxOptions so;
    so.enabled = true;
    so.cgroup_parent = "gpupool-imgtest-" + std::to_string(getpid());
    so.uid_pool_first = 62000;
    so.uid_pool_count = 100;
    // Plain commands see these of the host, read-only: the defaults and the probe's directory.
    so.host_dirs.push_back(fs::path(GPUPOOL_OCI_PROBE).parent_path().string());
    auto box = sandbox::Sandbox::Create(so);
    ASSERT_TRUE(box.ok()) << box.status().ToString();
    box_ = *box;
    sandbox_options_ = so;
    cgroup_parent_ = so.cgroup_parent;
    StartRunner();
  }

  void StartRunner(std::shared_ptr<net::TaskNetworks> networks = nullptr,
                   std::function<void(const TaskStartTiming&)> on_start = nullptr) {
    runner_.reset();
    ImageOptions io;
    io.tls_verify = false;  // the loopback registry speaks plain HTTP
    io.shim = GPUPOOL_OCI_SHIM;
    io.datasets = datasets_;
    auto containers = OpenContainers(io, box_, data_dir_, "", networks);
    ASSERT_TRUE(containers.ok()) << containers.status().ToString();
    containers_ = *containers;
    TaskRunnerOptions o;
    o.data_dir = data_dir_;
    o.default_grace_ms = 300;
    o.sandbox = box_;
    o.containers = containers_;
    o.networks = std::move(networks);
    o.on_start = std::move(on_start);
    runner_ = std::make_unique<TaskRunner>(o);
    ended_.Attach(*runner_);
  }

  // The agent restarts: its runner leaves the running tasks, and nothing of its memory (the uid
  // map, the image store's pins) survives into the new sandbox, store and runner.
  void RestartAgent(std::shared_ptr<net::TaskNetworks> networks = nullptr) {
    runner_->Leave();
    runner_.reset();
    containers_.reset();
    auto box = sandbox::Sandbox::Create(sandbox_options_);
    ASSERT_TRUE(box.ok()) << box.status().ToString();
    box_ = *box;
    StartRunner(std::move(networks));
  }

  void TearDown() override {
    runner_.reset();
    containers_.reset();
    std::error_code ec;
    if (!data_dir_.empty()) fs::remove_all(data_dir_, ec);
    testing::RemoveCgroupParent(cgroup_parent_);
    testing::RemoveCgroupParent(cgroup_parent_ + "-containers");
  }

  TaskSpec Spec(const std::string& id, const std::string& image, const std::string& script) {
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = id;
    s.job_id = "job-1";
    s.tenant = "acme/ml/alice";
    s.attempt = 1;
    s.image = image;
    if (!script.empty()) s.argv = {"/bin/sh", "-c", script};
    s.memory_mib = 64;
    return s;
  }
  std::string Ref(const std::string& repo_tag) { return registry_->host() + "/" + repo_tag; }
  // Starts `spec` (a task that exits 6 after ≈ 3 s), restarts the agent while it runs, and checks
  // the new runner re-adopts its container and reports its end.
  void ReadoptsAcrossARestart(const TaskSpec& spec);

  static ::gpupool::testing::LocalRegistry* registry_;
  static std::string work_, skip_;
  std::string data_dir_, cgroup_parent_;
  std::shared_ptr<sandbox::Sandbox> box_;
  sandbox::SandboxOptions sandbox_options_;
  std::shared_ptr<oci::ContainerFactory> containers_;
  std::map<std::string, std::string> datasets_;  // the node's `images.datasets`
  std::unique_ptr<TaskRunner> runner_;
  testing::EndedTasks ended_;
};

::gpupool::testing::LocalRegistry* ImageTaskTest::registry_ = nullptr;
std::string ImageTaskTest::work_;
std::string ImageTaskTest::skip_;

TEST_F(ImageTaskTest, RunsAsRootInsideItsImageAndAsAnUnprivilegedUidOnTheHost) {
  // What the task sees: its uid, the image's files, none of the host's (the agent's data dir).
  const TaskSpec spec = Spec("t1", Ref("test/app:1"),
                             "id -u; cat /etc/app-release; test -e " + data_dir_ +
                                 " && echo SEES-HOST || echo NO-HOST; sleep 1");
  auto st = runner_->Start(spec);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->phase, TaskPhase::kPulling) << "Start() does not wait for the pull";
  const std::string state = data_dir_ + "/tasks/t1.1/state";
  // While it runs, the host sees the container's processes under the task's own uid.
  ASSERT_TRUE(
      ::gpupool::testing::WaitFor([&] { return ended_.Started("t1"); }, std::chrono::seconds(60)));
  const std::string uid = testing::StateValue(state, "uid");
  ASSERT_FALSE(uid.empty());
  EXPECT_GE(std::stol(uid), 62000);
  EXPECT_LT(std::stol(uid), 62100);
  const TaskStatus end = ended_.Wait("t1");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason << "\n" << end.output_tail;
  EXPECT_EQ(end.output_tail, "0\ngpupool app 1\nNO-HOST\n");
}

// One sandbox path (issue 25): where the node runs containers, a plain command runs in one too,
// under runc, on the host's directories read-only — root inside, an unprivileged uid outside, its
// own writable work directory, none of the agent's data, the default seccomp profile — and its
// usage is read from the container's cgroups.
TEST_F(ImageTaskTest, APlainCommandRunsUnderTheRuntimeOnTheHostsDirectoriesReadOnly) {
  TaskSpec spec = Spec("plain", "", "");
  const std::string work = data_dir_ + "/tasks/plain.1/work";
  spec.argv = {"/bin/sh", "-c",
               "id -u; pwd; echo $HOME; echo kept > note && cat note; "
               "touch /usr/gpupool-probe 2>/dev/null && echo WROTE-USR || echo READ-ONLY; "
               "test -e " +
                   data_dir_ + "/images && echo SEES-STORE || echo NO-STORE; " +
                   std::string(GPUPOOL_OCI_PROBE) + " move_pages; echo probe=$?; sleep 1"};
  auto st = runner_->Start(spec);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->phase, TaskPhase::kPulling) << "RUNNING only once the container's program runs";
  EXPECT_EQ(st->reason, "starting");
  ASSERT_TRUE(::gpupool::testing::WaitFor([&] { return ended_.Started("plain"); },
                                          std::chrono::seconds(60)));
  const std::string uid = testing::StateValue(data_dir_ + "/tasks/plain.1/state", "uid");
  ASSERT_FALSE(uid.empty());
  EXPECT_GE(std::stol(uid), 62000);
  EXPECT_LT(std::stol(uid), 62100);
  const TaskStatus end = ended_.Wait("plain");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason << "\n" << end.output_tail;
  const std::string lines = "0\n" + work + "\n" + work + "\nkept\nREAD-ONLY\nNO-STORE\n";
  EXPECT_EQ(end.output_tail.substr(0, lines.size()), lines) << end.output_tail;
  EXPECT_NE(end.output_tail.find("errno 1 "), std::string::npos) << end.output_tail;
  EXPECT_NE(end.output_tail.find("probe=1"), std::string::npos) << end.output_tail;
  EXPECT_FALSE(fs::exists("/usr/gpupool-probe"));
  // What it used, from the container's own cgroups (the shim's result), as a sandboxed task's.
  EXPECT_TRUE(end.usage.measured);
  EXPECT_GT(end.usage.peak_memory_bytes, 0);
  EXPECT_GT(end.usage.cpu_usec, 0);
}

// A host directory that holds the agent's data dir (its node key, other tasks' directories) would
// show it to every plain command: the node refuses to run containers so configured, saying why.
TEST_F(ImageTaskTest, AHostDirHoldingTheAgentsDataIsRefused) {
  sandbox::SandboxOptions so = sandbox_options_;
  so.host_dirs = {"/usr", fs::path(data_dir_).parent_path().string()};
  auto box = sandbox::Sandbox::Create(so);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  ImageOptions io;
  io.tls_verify = false;
  io.shim = GPUPOOL_OCI_SHIM;
  auto containers = OpenContainers(io, *box, data_dir_, "");
  ASSERT_FALSE(containers.ok());
  EXPECT_EQ(containers.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(containers.status().message().find(
                "sandbox.host_dirs: " + fs::path(data_dir_).parent_path().string() +
                " holds the agent's data dir"),
            std::string::npos)
      << containers.status().message();
}

// A plain command under the runtime keeps the sandbox's limits: no memory asked, the sandbox's
// default_memory_mib holds it, and the kernel's OOM kill is reported with that figure.
TEST_F(ImageTaskTest, APlainCommandWithoutAMemoryRequestGetsTheSandboxsDefault) {
  runner_.reset();
  containers_.reset();
  sandbox_options_.default_memory_mib = 32;
  auto box = sandbox::Sandbox::Create(sandbox_options_);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  box_ = *box;
  StartRunner();
  TaskSpec spec = Spec("plainhog", "", "");
  spec.argv = {GPUPOOL_OCI_PROBE, "hog", "512"};
  spec.memory_mib = 0;
  ASSERT_TRUE(runner_->Start(spec).ok());
  const TaskStatus end = ended_.Wait("plainhog");
  EXPECT_EQ(end.phase, TaskPhase::kFailed);
  EXPECT_TRUE(end.oom) << end.reason;
  EXPECT_NE(end.reason.find("out of memory"), std::string::npos) << end.reason;
  EXPECT_NE(end.reason.find("32 MiB"), std::string::npos) << end.reason;
}

// Past its memory limit the kernel kills the container's program; the task fails saying it was
// out of memory, from the container cgroup's own count (the shim's result), not a guess.
TEST_F(ImageTaskTest, TheMemoryLimitOomKillsTheTaskWithTheReason) {
  TaskSpec spec = Spec("hog", Ref("test/app:1"), "");
  spec.argv = {"/bin/oci_probe", "hog", "512"};
  spec.memory_mib = 32;
  ASSERT_TRUE(runner_->Start(spec).ok());
  const TaskStatus end = ended_.Wait("hog");
  EXPECT_EQ(end.phase, TaskPhase::kFailed);
  EXPECT_TRUE(end.oom) << end.reason;
  EXPECT_GE(end.usage.oom_kills, 1);
  EXPECT_NE(end.reason.find("out of memory"), std::string::npos) << end.reason;
  EXPECT_NE(end.reason.find("32 MiB"), std::string::npos) << end.reason;
  EXPECT_EQ(end.output_tail.find("allocated"), std::string::npos) << end.output_tail;
}

// An image carries no driver (issue 25): a GPU task from one gets the node's driver files
// (FindDriverFiles, as the NVML backend reports them) bound read-only at their own paths, and their
// directory on LD_LIBRARY_PATH so CUDA's dlopen("libcuda.so.1") finds them; a plain command sees
// them where they lie on the host and gets no binds.
TEST_F(ImageTaskTest, AGpuTaskFromAnImageGetsTheNodesDriverReadOnly) {
  const std::string driver = testing::TempDir("/tmp/gpupool-driver-");
  std::ofstream(driver + "/libcuda.so.555.42") << "the node's driver\n";
  fs::create_symlink("libcuda.so.555.42", driver + "/libcuda.so.1");
  TaskSpec spec = Spec("drv", Ref("test/app:1"),
                       "cat " + driver + "/libcuda.so.1; (echo x >> " + driver +
                           "/libcuda.so.1) 2>/dev/null && echo WRITABLE || echo READ-ONLY; "
                           "echo \"$LD_LIBRARY_PATH\"");
  spec.driver_files = FindDriverFiles({driver}, {});
  ASSERT_EQ(spec.driver_files.size(), 2u);
  ASSERT_TRUE(runner_->Start(spec).ok());
  const TaskStatus end = ended_.Wait("drv");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason << "\n" << end.output_tail;
  EXPECT_EQ(end.output_tail, "the node's driver\nREAD-ONLY\n" + driver + "\n");
  std::error_code ec;
  fs::remove_all(driver, ec);
}

// The runtime's default seccomp profile holds in an image task: move_pages, which the kernel
// allows any process for itself, is refused (EPERM).
TEST_F(ImageTaskTest, ASystemCallTheDefaultProfileRefusesFails) {
  TaskSpec spec = Spec("seccomp", Ref("test/app:1"), "");
  spec.argv = {"/bin/oci_probe", "move_pages"};
  ASSERT_TRUE(runner_->Start(spec).ok());
  const TaskStatus end = ended_.Wait("seccomp");
  EXPECT_EQ(end.phase, TaskPhase::kFailed);
  EXPECT_EQ(end.exit_code, 1);
  EXPECT_NE(end.output_tail.find("errno 1 "), std::string::npos) << end.output_tail;
}

TEST_F(ImageTaskTest, TwentyTasksOfOneNewImagePullEachLayerOnce) {
  ::gpupool::testing::TestLayer many;
  many.files["/etc/many"] = "many\n";
  auto pushed = ::gpupool::testing::BuildAndPush(*registry_, work_, "test/many", "1",
                                                 {::gpupool::testing::BusyboxLayer(), many});
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  // From here on: the registry served the busybox layer to an earlier test's store already.
  const size_t log_from = registry_->LogBytes();
  constexpr int kTasks = 20;
  for (int i = 0; i < kTasks; ++i) {
    auto st = runner_->Start(Spec("m" + std::to_string(i), Ref("test/many:1"), "cat /etc/many"));
    ASSERT_TRUE(st.ok()) << st.status().ToString();
  }
  for (int i = 0; i < kTasks; ++i) {
    const TaskStatus end = ended_.Wait("m" + std::to_string(i));
    EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.task_id << ": " << end.reason;
    EXPECT_EQ(end.output_tail, "many\n") << end.task_id;
  }
  // Every blob of the image (config and layers) was fetched from the registry exactly once.
  auto lease = containers_->options().store->Pull(Ref("test/many:1"), {});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  std::vector<image::BlobRef> blobs = lease->image().layers;
  blobs.push_back(lease->image().config);
  ASSERT_EQ(blobs.size(), 3u);
  for (const image::BlobRef& b : blobs) {
    EXPECT_EQ(registry_->BlobGets(b.digest, log_from), 1) << b.digest;
  }
}

// A cold pull reports PULLING with the bytes it fetches, growing to the total, before RUNNING;
// a warm start (every blob in the store) reports none.
TEST_F(ImageTaskTest, APullReportsItsBytesUntilTheContainerStarts) {
  ::gpupool::testing::TestLayer big;
  std::string noise(4 << 20, '\0');  // random: the layer's blob stays 4 MiB once compressed
  std::mt19937_64 rng(42);
  for (char& c : noise) c = static_cast<char>(rng());
  big.files["/etc/big"] = std::move(noise);
  auto pushed = ::gpupool::testing::BuildAndPush(*registry_, work_, "test/pulled", "1",
                                                 {::gpupool::testing::BusyboxLayer(), big});
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  auto st = runner_->Start(Spec("p1", Ref("test/pulled:1"), "true"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->phase, TaskPhase::kPulling);
  const TaskStatus end = ended_.Wait("p1");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason;
  const std::vector<TaskStatus> pulls = ended_.Pulls("p1");
  ASSERT_FALSE(pulls.empty());
  int64_t last = 0;
  for (const TaskStatus& p : pulls) {
    EXPECT_EQ(p.attempt, 1);
    EXPECT_EQ(p.pull_image, Ref("test/pulled:1"));
    EXPECT_GT(p.pull_bytes_total, 4 << 20);  // at least the new layer
    EXPECT_GE(p.pull_bytes_done, last);
    EXPECT_LE(p.pull_bytes_done, p.pull_bytes_total);
    last = p.pull_bytes_done;
  }
  EXPECT_EQ(pulls.back().pull_bytes_done, pulls.back().pull_bytes_total);  // the last: all of it
  EXPECT_TRUE(ended_.Started("p1"));

  auto again = runner_->Start(Spec("p2", Ref("test/pulled:1"), "true"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ended_.Wait("p2").phase, TaskPhase::kSucceeded);
  EXPECT_TRUE(ended_.Pulls("p2").empty());
}

// Issue 30: a container outlives an agent restart. The runner leaves it running; a new runner
// with a new image store and container factory on the same data dir (a restarted agent)
// re-adopts it — its uid reserved again, its image held without a registry, its root file system
// spared by the start-up clean-up — and reports how it ended from the shim's result file; then
// everything it held is released.
void ImageTaskTest::ReadoptsAcrossARestart(const TaskSpec& spec) {
  const std::string& id = spec.task_id;
  ASSERT_TRUE(runner_->Start(spec).ok());
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        const std::optional<TaskStatus> st = runner_->Get(id);
        return st && st->phase == TaskPhase::kRunning;
      },
      std::chrono::seconds(60)));
  ASSERT_NO_FATAL_FAILURE(RestartAgent());
  const TaskRunner::Recovery r = runner_->Recover("node-a");
  EXPECT_EQ(r.adopted, 1);
  EXPECT_EQ(r.killed, 0);
  ASSERT_EQ(r.kept_containers.size(), 1u);
  ASSERT_EQ(r.kept_dirs.size(), 1u);
  // What the agent's start-up clean-up does next leaves the adopted container alone.
  auto deleted = oci::Launcher(containers_->options().launcher).DeleteAll("", r.kept_containers);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 0);
  auto unmounted = oci::UnmountAllUnder(data_dir_ + "/tasks", r.kept_dirs);
  ASSERT_TRUE(unmounted.ok()) << unmounted.status().ToString();
  EXPECT_EQ(*unmounted, 0);
  EXPECT_EQ(box_->uids()->pool_in_use(), 1);
  const TaskStatus end = ended_.Wait(id);
  EXPECT_EQ(end.phase, TaskPhase::kFailed) << end.reason << end.output_tail;
  EXPECT_EQ(end.exit_code, 6);
  EXPECT_EQ(box_->uids()->pool_in_use(), 0);
}

TEST_F(ImageTaskTest, ARestartedRunnerReadoptsARunningContainer) {
  ReadoptsAcrossARestart(Spec("keep", Ref("test/app:1"),
                              "i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; exit 6"));
}

// A plain command runs in a container too (one sandbox path), and is re-adopted the same way.
TEST_F(ImageTaskTest, ARestartedRunnerReadoptsAPlainCommandsContainer) {
  ReadoptsAcrossARestart(
      Spec("keepplain", "", "i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; exit 6"));
}

// The same for a container on an isolated network: its namespace is kept through the restart
// and taken again with its slot; the container still has its veth and routes when it ends.
TEST_F(ImageTaskTest, ARestartedRunnerReadoptsAnIsolatedContainerWithItsNetwork) {
  if (const std::string why = testing::CannotBuildNetworks(); !why.empty()) GTEST_SKIP() << why;
  const net::NetworkOptions no = testing::TestNetworkOptions("k", "10.218.0.0/24");
  auto opened = net::TaskNetworks::Open(no);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  StartRunner(std::move(opened).value());
  TaskSpec spec = Spec("net", Ref("test/app:1"),
                       "i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; "
                       "grep -c '^eth0' /proc/net/route; exit 8");
  spec.network = net::NetworkMode::kIsolated;
  ASSERT_TRUE(runner_->Start(spec).ok());
  ASSERT_TRUE(
      ::gpupool::testing::WaitFor([&] { return ended_.Started("net"); }, std::chrono::seconds(60)));
  auto reopened = net::TaskNetworks::Open(no, /*remove_leftovers=*/false);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  std::shared_ptr<net::TaskNetworks> networks = std::move(reopened).value();
  ASSERT_NO_FATAL_FAILURE(RestartAgent(networks));
  const TaskRunner::Recovery r = runner_->Recover("node-a");
  EXPECT_EQ(r.adopted, 1);
  EXPECT_EQ(r.killed, 0);
  ASSERT_EQ(r.kept_network_slots.size(), 1u);
  networks->RemoveLeftovers(r.kept_network_slots);
  EXPECT_EQ(networks->in_use(), 1);
  const TaskStatus end = ended_.Wait("net");
  EXPECT_EQ(end.phase, TaskPhase::kFailed) << end.reason << end.output_tail;
  EXPECT_EQ(end.exit_code, 8);
  EXPECT_EQ(end.output_tail, "2\n");  // its veth survived the restart: the /30 and the default
  EXPECT_EQ(networks->in_use(), 0);
  runner_.reset();
  networks->Uninstall();
}

// A stop while the image is still being pulled ends the task CANCELLED at once (its GPU free for
// the scheduler), not when the pull gives up: here a registry that is down, which the store tries
// four times with back-off (≈ 3.5 s). When the pull returns, the task stays as it ended.
TEST_F(ImageTaskTest, AStopWhilePullingEndsTheTaskAtOnce) {
  auto st = runner_->Start(Spec("slow", "127.0.0.1:1/test/nowhere:1", "true"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_EQ(st->phase, TaskPhase::kPulling);
  const auto asked = std::chrono::steady_clock::now();
  std::optional<TaskStatus> stopped = runner_->Stop("slow", 0, 5000, "cancelled by the tenant");
  ASSERT_TRUE(stopped.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(500));
  EXPECT_EQ(stopped->phase, TaskPhase::kCancelled);
  EXPECT_EQ(stopped->reason, "cancelled by the tenant");
  // The pull gives up later; nothing of it changes how the task ended.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  std::optional<TaskStatus> after = runner_->Stop("slow", 0, 0, "again");
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->phase, TaskPhase::kCancelled);
  EXPECT_EQ(after->reason, "cancelled by the tenant");
  // A new attempt of the same task starts as usual.
  TaskSpec again = Spec("slow", Ref("test/app:1"), "cat /etc/app-release");
  again.attempt = 2;
  ASSERT_TRUE(runner_->Start(again).ok());
  const TaskStatus end = ended_.Wait("slow");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason;
  EXPECT_EQ(end.attempt, 2);
}

TEST_F(ImageTaskTest, AnImageThatDoesNotExistFailsTheTaskNamingIt) {
  const TaskStatus end = [&] {
    auto st = runner_->Start(Spec("nope", Ref("test/nope:1"), "true"));
    EXPECT_TRUE(st.ok());
    return ended_.Wait("nope");
  }();
  EXPECT_EQ(end.phase, TaskPhase::kFailed);
  EXPECT_EQ(end.exit_code, 126);
  EXPECT_NE(end.reason.find("image"), std::string::npos) << end.reason;
  EXPECT_NE(end.reason.find("test/nope"), std::string::npos) << end.reason;
}

// A private image (issue 25): the scheduler's StartTask names the env entry that is the pull
// credential; the agent takes it out of the task's environment and pulls with it. The task runs
// and never sees it; a wrong one fails the task saying the registry refused, never echoing it.
TEST_F(ImageTaskTest, APrivateImageIsPulledWithTheJobsCredentialWhichTheTaskNeverSees) {
  // bcrypt (cost 4) of "s3cret" for the registry's htpasswd (as in image_store_test.cc).
  constexpr char kBcryptS3cret[] = "$2b$04$ax8.W/eQ7R/xmzfReiQmeumJMVzO..JZcrtiCzfUPrgKAaxILgP/q";
  ::gpupool::testing::LocalRegistry secured;
  ASSERT_OK(secured.Start("tenant-a", kBcryptS3cret));
  ::gpupool::testing::TestLayer marker;
  marker.files["/etc/private-release"] = "private 1\n";
  ASSERT_OK(::gpupool::testing::BuildAndPush(secured, work_, "private/app", "1",
                                             {::gpupool::testing::BusyboxLayer(), marker},
                                             {"/bin/sh"}, "tenant-a", "s3cret")
                .status());
  auto start = [&](const std::string& id, const std::string& credential) {
    v1::StartTask s;
    s.set_task_id(id);
    s.set_job_id("job-1");
    s.set_tenant("acme/ml/alice");
    s.set_attempt(1);
    s.set_image(secured.host() + "/private/app:1");
    for (const char* arg : {"/bin/sh", "-c", "cat /etc/private-release; env"}) s.add_argv(arg);
    (*s.mutable_env())["PULL"] = credential;
    (*s.mutable_env())["VISIBLE"] = "yes";
    s.set_registry_credential_env("PULL");
    s.set_memory_mib(64);
    TaskSpec spec = FromProto(s, "node-a", Inventory{});
    EXPECT_EQ(spec.env.count("PULL"), 0u) << "the credential stayed in the task's environment";
    EXPECT_TRUE(runner_->Start(spec).ok());
    return ended_.Wait(id);
  };
  const TaskStatus ok = start("priv", "tenant-a:s3cret");
  EXPECT_EQ(ok.phase, TaskPhase::kSucceeded) << ok.reason << "\n" << ok.output_tail;
  EXPECT_NE(ok.output_tail.find("private 1"), std::string::npos) << ok.output_tail;
  EXPECT_NE(ok.output_tail.find("VISIBLE=yes"), std::string::npos) << ok.output_tail;
  EXPECT_EQ(ok.output_tail.find("s3cret"), std::string::npos) << ok.output_tail;
  EXPECT_EQ(ok.output_tail.find("PULL="), std::string::npos) << ok.output_tail;

  const TaskStatus refused = start("priv-wrong", "tenant-a:guess-me");
  EXPECT_EQ(refused.phase, TaskPhase::kFailed);
  EXPECT_NE(refused.reason.find("refused the credential"), std::string::npos) << refused.reason;
  EXPECT_EQ(refused.reason.find("guess-me"), std::string::npos) << refused.reason;
}

TEST_F(ImageTaskTest, AnImageKeepsItsOwnCommandWhenTheTaskGivesNone) {
  // The test image's Cmd is /bin/sh with nothing on stdin: it exits 0 at once.
  const TaskStatus end = [&] {
    auto st = runner_->Start(Spec("own", Ref("test/app:1"), ""));
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return ended_.Wait("own");
  }();
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason << "\n" << end.output_tail;
}

// The template's entrypoint, working directory and volumes: a dataset of the node's, read-only,
// and a scratch directory the task owns, each at a path the image does not have.
TEST_F(ImageTaskTest, VolumesEntrypointAndWorkingDirAreTheTemplates) {
  const std::string corpus = data_dir_ + "-corpus";
  fs::create_directories(corpus);
  chmod(corpus.c_str(), 0755);
  std::ofstream(corpus + "/hello") << "hello from the dataset\n";
  // A writable mount inside the dataset (an operator's NFS export, say): the task must not be
  // able to write it through /data either.
  fs::create_directories(corpus + "/nested");
  ASSERT_EQ(mount("tmpfs", (corpus + "/nested").c_str(), "tmpfs", 0, "mode=0777"), 0)
      << std::strerror(errno);
  datasets_ = {{"corpus", corpus}};
  StartRunner();
  // As gpupoold sends it (StartTask), through the agent's conversion.
  v1::StartTask s;
  s.set_task_id("vol");
  s.set_job_id("job-1");
  s.set_tenant("acme/ml/alice");
  s.set_attempt(1);
  s.set_image(Ref("test/app:1"));
  s.add_entrypoint("/bin/sh");
  s.add_entrypoint("-c");
  s.add_argv(
      "pwd; cat /data/hello; echo mine > /scratch/f && cat /scratch/f; "
      "(echo x > /data/new) 2>/dev/null && echo DATA-WRITABLE || echo DATA-READ-ONLY; "
      "(echo x > /data/nested/new) 2>/dev/null && echo NESTED-WRITABLE || echo NESTED-READ-ONLY");
  s.set_working_dir("/scratch");
  v1::Volume* data = s.add_volumes();
  data->set_mount_path("/data");
  data->set_dataset("corpus");
  s.add_volumes()->set_mount_path("/scratch");
  s.set_memory_mib(64);
  ASSERT_TRUE(runner_->Start(FromProto(s, "node-a", Inventory{})).ok());
  const TaskStatus end = ended_.Wait("vol");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason << "\n" << end.output_tail;
  EXPECT_EQ(end.output_tail,
            "/scratch\nhello from the dataset\nmine\nDATA-READ-ONLY\nNESTED-READ-ONLY\n");
  EXPECT_FALSE(fs::exists(corpus + "/new"));
  EXPECT_FALSE(fs::exists(corpus + "/nested/new"));
  // The scratch directory is the task's, on the node, in its task directory.
  EXPECT_TRUE(fs::exists(data_dir_ + "/tasks/vol.1/volumes/0/f"));

  // A dataset this node does not offer fails the task naming the volume and what is offered.
  TaskSpec missing = Spec("novol", Ref("test/app:1"), "true");
  missing.volumes = {{"/data", "imagenet"}};
  ASSERT_TRUE(runner_->Start(missing).ok());
  const TaskStatus failed = ended_.Wait("novol");
  EXPECT_EQ(failed.phase, TaskPhase::kFailed);
  EXPECT_NE(failed.reason.find(
                "volume /data: dataset 'imagenet' is not offered by this node (datasets: corpus)"),
            std::string::npos)
      << failed.reason;
  // A path that would lead the node's root out of the task's root file system is refused on the
  // node too, whatever gpupoold sent.
  TaskSpec escape = Spec("escape", Ref("test/app:1"), "true");
  const std::string outside = "/tmp/gpupool-escape-" + std::to_string(getpid());
  const std::string up = "/../../../../../../../../../..";  // past the host's root, from rootfs
  escape.volumes = {{up + outside, ""}};
  ASSERT_TRUE(runner_->Start(escape).ok());
  const TaskStatus refused = ended_.Wait("escape");
  EXPECT_EQ(refused.phase, TaskPhase::kFailed);
  EXPECT_NE(
      refused.reason.find("volume " + up + outside + ": '" + up + outside + "' is not normalised"),
      std::string::npos)
      << refused.reason;
  EXPECT_FALSE(fs::exists(outside)) << "the node's root made a directory outside the task";
  umount2((corpus + "/nested").c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(corpus, ec);
}

// What the node reports for placement by cached layers: every image with its canonical
// references and layers, with Register always, in a heartbeat when it changed or a refresh is due.
TEST_F(ImageTaskTest, TheNodeReportsItsImagesForPlacement) {
  const std::shared_ptr<image::ImageStore>& store = containers_->options().store;
  ImageCacheReport report(store, 3);
  v1::ImageCache cache;
  ASSERT_TRUE(report.FillRegister(&cache));
  EXPECT_FALSE(report.FillHeartbeat(&cache));
  ASSERT_TRUE(runner_->Start(Spec("cached", Ref("test/app:1"), "true")).ok());
  EXPECT_EQ(ended_.Wait("cached").phase, TaskPhase::kSucceeded);
  ASSERT_TRUE(report.FillHeartbeat(&cache)) << "the store changed: the heartbeat carries it";
  const auto held = std::find_if(cache.images().begin(), cache.images().end(), [&](const auto& i) {
    return std::find(i.references().begin(), i.references().end(), Ref("test/app:1")) !=
           i.references().end();
  });
  ASSERT_NE(held, cache.images().end()) << cache.DebugString();
  EXPECT_EQ(held->layers_size(), 2);  // busybox and the app layer
  for (const auto& l : held->layers()) EXPECT_GT(l.size(), 0);
  EXPECT_FALSE(report.FillHeartbeat(&cache));
  EXPECT_FALSE(report.FillHeartbeat(&cache));
  EXPECT_TRUE(report.FillHeartbeat(&cache)) << "a refresh every 3 heartbeats";
  // A node without images reports none.
  ImageCacheReport none(nullptr, 1);
  EXPECT_FALSE(none.FillRegister(&cache));
  EXPECT_FALSE(none.FillHeartbeat(&cache));
}

TEST(ImageTaskWithoutContainersTest, FailsAtOnceSayingWhy) {
  const std::string dir = ::gpupool::testing::MakeScratchDir("/tmp/gpupool-imgtask-off-");
  TaskRunnerOptions o;
  o.data_dir = dir;
  o.containers_off = "images need the sandbox (sandbox.enabled: true)";
  {
    TaskRunner runner(o);
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = "t";
    s.attempt = 1;
    s.image = "registry.example/app:1";
    auto st = runner.Start(s);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->phase, TaskPhase::kFailed);
    EXPECT_EQ(st->exit_code, 126);
    EXPECT_EQ(st->reason, o.containers_off);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
TEST_F(ImageTaskTest, UnderIsolatedItCannotReachTheNodeOrAnotherTask) {
  if (const std::string why = testing::CannotBuildNetworks(); !why.empty()) GTEST_SKIP() << why;
  auto opened = net::TaskNetworks::Open(testing::TestNetworkOptions("i", "10.216.0.0/24"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<net::TaskNetworks> networks = std::move(opened).value();
  StartRunner(networks);
  testing::Listener node("");
  const std::string node_address = testing::NodeAddress(net::Cidr{0, 32});
  ASSERT_FALSE(node_address.empty());

  // Task b listens first, so it has the first /30 (10.216.0.2); task a gets the second.
  TaskSpec b = Spec("b", Ref("test/app:1"), "nc -l -p 8080 </dev/null");
  b.network = net::NetworkMode::kIsolated;
  ASSERT_TRUE(runner_->Start(b).ok());
  ASSERT_TRUE(
      ::gpupool::testing::WaitFor([&] { return ended_.Started("b"); }, std::chrono::seconds(60)));
  const std::string probe =
      "probe() { if nc -w 2 $1 $2 </dev/null >/dev/null 2>&1; then echo \"$1 reached\"; "
      "else echo \"$1 refused\"; fi; }; ip -4 -o addr show dev eth0 | awk '{print $4}'; ";
  TaskSpec a =
      Spec("a", Ref("test/app:1"),
           probe + "probe " + node_address + " " + std::to_string(node.port()) +
               "; probe 10.216.0.5 " + std::to_string(node.port()) + "; probe 10.216.0.2 8080");
  a.network = net::NetworkMode::kIsolated;
  ASSERT_TRUE(runner_->Start(a).ok());
  const TaskStatus st = ended_.Wait("a");
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded) << st.reason << st.output_tail;
  EXPECT_EQ(st.output_tail, "10.216.0.6/30\n" + node_address + " refused\n10.216.0.5 refused\n" +
                                "10.216.0.2 refused\n");
  // Control: task b did listen — the node itself may connect to it.
  EXPECT_EQ(testing::ConnectFrom("", "10.216.0.2", 8080), 0);
  EXPECT_EQ(ended_.Wait("b").phase, TaskPhase::kSucceeded);
  runner_.reset();
  containers_.reset();
  EXPECT_EQ(networks->in_use(), 0);
  networks->Uninstall();
}

TEST_F(ImageTaskTest, StartLatencyAndTheStoresPullsAreMeasured) {
  std::mutex mu;
  std::vector<TaskStartTiming> timings;
  StartRunner(nullptr, [&](const TaskStartTiming& t) {
    std::lock_guard lock(mu);
    timings.push_back(t);
  });
  // A fresh store: the first task pulls, the second finds the image there.
  for (const char* id : {"first", "second"}) {
    ASSERT_TRUE(runner_->Start(Spec(id, Ref("test/app:1"), "true")).ok());
    EXPECT_EQ(ended_.Wait(id).phase, TaskPhase::kSucceeded);
  }
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(timings.size(), 2u);
    EXPECT_TRUE(timings[0].image);
    EXPECT_FALSE(timings[0].cache_hit);
    EXPECT_TRUE(timings[1].cache_hit);
    EXPECT_GT(timings[0].seconds, 0);
    EXPECT_LT(timings[1].seconds, timings[0].seconds + 60);
  }
  // What /metrics shows of the store, read as a scrape would.
  std::map<std::string, double> value;
  for (const auto& f : ImageStoreCollector(containers_->options().store, "node-a").Collect()) {
    ASSERT_EQ(f.metric.size(), 1u);
    value[f.name] = f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value
                                                              : f.metric[0].gauge.value;
  }
  EXPECT_EQ(value["gpupool_agent_image_pulls_total"], 2);
  EXPECT_EQ(value["gpupool_agent_image_pull_cache_hits_total"], 1);
  EXPECT_GT(value["gpupool_agent_image_pull_bytes_total"], 0);
  EXPECT_EQ(value["gpupool_agent_image_store_images"], 1);
  // And the histogram a registry exports.
  prometheus::Registry registry;
  StartLatency latency(registry, "node-a");
  for (const TaskStartTiming& t : timings) latency.Observe(t);
  uint64_t image_starts = 0;
  for (const auto& f : registry.Collect()) {
    for (const auto& m : f.metric) image_starts += m.histogram.sample_count;
  }
  EXPECT_EQ(image_starts, 2u);
}

}  // namespace gpupool::agent
