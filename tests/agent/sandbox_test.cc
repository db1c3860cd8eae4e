// The task sandbox through its one path (issue 25): plain commands through the TaskRunner, each
// in a container under the real runc with real cgroups and namespaces. A task cannot read the
// node token or another task's files, cannot exceed its memory (OOM-killed and reported), has no
// device node it was not granted (fake NVIDIA devices made with mknod, major 195), cannot see or
// signal another tenant's processes; its CPU time and peak memory come back; a sandbox that
// cannot be built fails the task with a reason; where the node cannot run containers, no task
// runs at all.
//
// Needs root (user namespaces, mounts, cgroups) and runc, skopeo and umoci; skips saying so.
#include "agent/sandbox/sandbox.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/capabilities.h"
#include "agent/images.h"
#include "agent/nvml_backend.h"
#include "agent/proto_convert.h"
#include "agent/task_runner.h"
#include "gpupool/v1/agent.pb.h"
#include "tests/agent/net_fixture.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent {
namespace {

using std::chrono::milliseconds;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
    data_dir_ = testing::TempDir("/tmp/gpupool-sbx-data-");
    // A directory of the host that plain commands see (sandbox.host_dirs), holding the node's
    // secrets: `sandbox.hide` must mask them there.
    etc_dir_ = testing::TempDir("/run/gpupool-sbx-etc-");
    chmod(etc_dir_.c_str(), 0755);  // like /etc: tasks may pass through
    std::ofstream(etc_dir_ + "/agent.yaml") << "token: s3cret-node-token\n";
    std::filesystem::create_directories(etc_dir_ + "/certs");
    std::ofstream(etc_dir_ + "/certs/node.key") << "PRIVATE-KEY-MATERIAL\n";
    // Device nodes live outside every task's view; a granted one is created in its container.
    dev_dir_ = testing::TempDir("/run/gpupool-sbx-dev-");
    chmod(dev_dir_.c_str(), 0755);
    MakeDevice("nvidia0", 195, 0);
    MakeDevice("nvidia1", 195, 1);
    MakeDevice("nvidiactl", 195, 255);

    options_.enabled = true;
    options_.cgroup_parent = "gpupool-test-" + std::to_string(getpid());
    options_.uid_pool_first = 61000;
    options_.uid_pool_count = 100;
    options_.hide_paths = {etc_dir_ + "/agent.yaml", etc_dir_ + "/certs"};
    options_.host_dirs = {"/usr", "/etc", "/opt", etc_dir_};
    Start();
  }

  void Start(std::shared_ptr<net::TaskNetworks> networks = nullptr) {
    runner_.reset();
    auto box = sandbox::Sandbox::Create(options_);
    ASSERT_TRUE(box.ok()) << box.status().ToString();
    ImageOptions io;
    io.shim = GPUPOOL_OCI_SHIM;
    auto containers = OpenContainers(io, *box, data_dir_, "", networks);
    ASSERT_TRUE(containers.ok()) << containers.status().ToString();
    TaskRunnerOptions o;
    o.data_dir = data_dir_;
    o.default_grace_ms = 300;
    o.sandbox = *box;
    o.containers = *containers;
    o.networks = std::move(networks);
    runner_ = std::make_unique<TaskRunner>(o);
    ended_.Attach(*runner_);
  }

  void TearDown() override {
    runner_.reset();
    std::error_code ec;
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_, ec);
    if (!etc_dir_.empty()) std::filesystem::remove_all(etc_dir_, ec);
    if (!dev_dir_.empty()) std::filesystem::remove_all(dev_dir_, ec);
    testing::RemoveCgroupParent(options_.cgroup_parent + "-containers");
  }

  void MakeDevice(const std::string& name, int maj, int min) {
    const std::string path = dev_dir_ + "/" + name;
    ASSERT_EQ(mknod(path.c_str(), S_IFCHR | 0666, makedev(maj, min)), 0) << path;
  }

  TaskSpec Spec(const std::string& id, const std::string& tenant, const std::string& script) {
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = id;
    s.job_id = "job-1";
    s.tenant = tenant;
    s.attempt = 1;
    s.argv = {"/bin/sh", "-c", script};
    return s;
  }

  TaskStatus Run(const TaskSpec& spec) {
    auto st = runner_->Start(spec);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (st.ok() && st->terminal()) return *st;  // failed to start: no listener call
    return WaitEnd(spec.task_id);
  }

  TaskStatus WaitEnd(const std::string& id) { return ended_.Wait(id); }

  std::string WorkDir(const std::string& id) { return data_dir_ + "/tasks/" + id + ".1/work"; }

  sandbox::SandboxOptions options_;
  std::string data_dir_, etc_dir_, dev_dir_;
  std::unique_ptr<TaskRunner> runner_;
  testing::EndedTasks ended_;
};

// Root in its user namespace, a uid of the pool on the node (its work directory's owner while it
// runs), no supplementary groups, the work directory its cwd and $HOME.
TEST_F(SandboxTest, RunsAsAnUnprivilegedUidInItsOwnWorkDir) {
  TaskStatus st = Run(Spec("who", "acme",
                           "id -u; id -G; pwd; echo $HOME; stat -c '%a %u' .; "
                           "cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //'"));
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded) << st.reason << st.output_tail;
  std::istringstream out(st.output_tail);
  std::string uid, groups, pwd, home, mode, map;
  std::getline(out, uid);
  std::getline(out, groups);
  std::getline(out, pwd);
  std::getline(out, home);
  std::getline(out, mode);
  std::getline(out, map);
  EXPECT_EQ(uid, "0");
  EXPECT_EQ(groups, "0");  // no supplementary groups, nothing of the node's root
  EXPECT_EQ(pwd, WorkDir("who"));
  EXPECT_EQ(home, WorkDir("who"));
  EXPECT_EQ(mode, "700 0");
  // One id mapped: root inside is a pool uid outside, and nothing else of the node exists.
  std::istringstream ids(map);
  int64_t inside = -1, outside = -1, count = -1;
  ids >> inside >> outside >> count;
  EXPECT_EQ(inside, 0) << map;
  EXPECT_GE(outside, 61000) << map;
  EXPECT_LT(outside, 61100) << map;
  EXPECT_EQ(count, 1) << map;
  // After the task, its directory is locked: a later holder of the uid cannot get in.
  struct stat s {};
  ASSERT_EQ(stat(WorkDir("who").c_str(), &s), 0);
  EXPECT_EQ(s.st_uid, 0u);
  EXPECT_TRUE(st.usage.measured);
}

TEST_F(SandboxTest, CannotReadTheNodeTokenCertificatesStateOrAnotherTasksFiles) {
  // Tenant A leaves a secret in its work dir and in /tmp, and keeps running.
  ASSERT_TRUE(runner_
                  ->Start(Spec("a", "tenant-a",
                               "echo tenant-a-secret > secret; echo tmp-secret-a > /tmp/a; "
                               "exec sleep 30"))
                  .ok());
  ASSERT_TRUE(
      gpupool::testing::WaitFor([&] { return std::filesystem::exists(WorkDir("a") + "/secret"); }));
  const std::string script = "cat " + etc_dir_ +
                             "/agent.yaml; echo rc_token=$?; "  // the node token
                             "cat " +
                             etc_dir_ +
                             "/certs/node.key; echo rc_key=$?; "
                             "cat " +
                             WorkDir("a") +
                             "/secret; echo rc_other=$?; "
                             "cat /tmp/a; echo rc_tmp=$?; "
                             "cat " +
                             data_dir_ +
                             "/tasks/a.1/state; echo rc_state=$?; "
                             "echo seen=$(ls " +
                             data_dir_ + "/tasks | tr '\\n' ,)";
  TaskStatus st = Run(Spec("b", "tenant-b", script));
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded) << st.reason;
  const std::string& out = st.output_tail;
  EXPECT_EQ(out.find("s3cret-node-token"), std::string::npos) << out;
  EXPECT_EQ(out.find("PRIVATE-KEY"), std::string::npos) << out;
  EXPECT_EQ(out.find("tenant-a-secret"), std::string::npos) << out;
  EXPECT_EQ(out.find("tmp-secret-a"), std::string::npos) << out;
  EXPECT_EQ(out.find("pgid="), std::string::npos) << out;
  // The token file reads empty (the runtime binds /dev/null over a hidden file), a hidden
  // directory is empty, and nothing of the agent's data dir but the task's own path exists.
  EXPECT_NE(out.find("rc_token="), std::string::npos) << out;
  for (const char* rc : {"rc_key=1", "rc_other=1", "rc_tmp=1", "rc_state=1"}) {
    EXPECT_NE(out.find(rc), std::string::npos) << rc << " in\n" << out;
  }
  EXPECT_NE(out.find("seen=b.1,\n"), std::string::npos) << out;
  // The agent's own view is untouched: the token is still there.
  EXPECT_NE(ReadFile(etc_dir_ + "/agent.yaml").find("s3cret-node-token"), std::string::npos);
  runner_->Stop("a", 0, 0, "test over");
  WaitEnd("a");
}

TEST_F(SandboxTest, ExceedingItsMemoryIsAnOomKillReportedAsSuch) {
  TaskSpec spec =
      Spec("hog", "acme", "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}");
  spec.memory_mib = 32;
  TaskStatus st = Run(spec);
  EXPECT_EQ(st.phase, TaskPhase::kFailed);
  EXPECT_TRUE(st.oom) << st.reason << "\n" << st.output_tail;
  EXPECT_GE(st.usage.oom_kills, 1);
  EXPECT_NE(st.reason.find("out of memory"), std::string::npos) << st.reason;
  EXPECT_NE(st.reason.find("32 MiB"), std::string::npos) << st.reason;
  EXPECT_EQ(st.output_tail.find("survived"), std::string::npos);
  EXPECT_LE(st.usage.peak_memory_bytes, 33 * 1024 * 1024);
  EXPECT_GT(st.usage.peak_memory_bytes, 1 * 1024 * 1024);
}

TEST_F(SandboxTest, OpensOnlyTheDeviceFilesItWasGranted) {
  TaskSpec spec = Spec("dev", "acme",
                       "exec 2>&1; dev=" + dev_dir_ +
                           "; cat $dev/nvidia1; echo; cat $dev/nvidia0; echo; "
                           "cat $dev/nvidiactl; echo; echo ok > /dev/null && echo null-ok");
  spec.device_files = {dev_dir_ + "/nvidia0", dev_dir_ + "/nvidiactl"};
  TaskStatus st = Run(spec);
  const std::string& out = st.output_tail;
  // Not granted: no such node in its container. Granted: the open reaches the (absent) driver,
  // which answers ENXIO — the runtime's device rules let it through.
  EXPECT_NE(out.find("nvidia1: No such file or directory"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidia0: No such device or address"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidiactl: No such device or address"), std::string::npos) << out;
  EXPECT_NE(out.find("null-ok"), std::string::npos) << out;
}

// The NVML backend (fake libnvidia-ml with the driver's device numbering) lists the files a task
// granted one GPU needs, and the sandbox lets it open exactly those: its /dev/nvidia<minor>,
// nvidiactl and nvidia-uvm, and not the other GPU. Before, the NVML backend listed no device
// file at all, so every sandboxed GPU task got EPERM on a real node (issue 24).
TEST_F(SandboxTest, OnTheNvmlBackendATaskOpensItsGpuAndTheControlFilesOnly) {
  const std::string dev = dev_dir_;
  std::filesystem::remove(dev + "/nvidia1");
  MakeDevice("nvidia3", 195, 3);  // fake NVML's GPU 0 has minor 3, GPU 1 minor 0
  MakeDevice("nvidia-uvm", 234, 0);
  auto nvml = NvmlBackend::Open(
      Catalog::Builtin(), GPUPOOL_FAKE_NVML,
      {.dev_dir = dev, .proc_dir = etc_dir_ + "/proc", .driver_dirs = {}, .bin_dirs = {}});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  Result<Inventory> inv = (*nvml)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  v1::StartTask start;
  start.set_task_id("nvml");
  start.set_job_id("job-1");
  start.set_tenant("acme");
  start.set_attempt(1);
  for (const char* a : {"/bin/sh", "-c",
                        "exec 2>&1; cd $DEV; for f in nvidia0 nvidiactl nvidia-uvm nvidia3; do "
                        "cat $f; echo; done"}) {
    start.add_argv(a);
  }
  (*start.mutable_env())["DEV"] = dev;
  start.add_devices()->set_uuid("GPU-fake-1");  // minor 0
  TaskSpec spec = FromProto(start, "node-a", *inv);
  EXPECT_EQ(spec.device_files,
            (std::vector<std::string>{dev + "/nvidia0", dev + "/nvidiactl", dev + "/nvidia-uvm"}));
  TaskStatus st = Run(spec);
  const std::string& out = st.output_tail;
  // Granted: the open reaches the (absent) driver, ENXIO. Not granted: not in its container.
  EXPECT_NE(out.find("nvidia0: No such device or address"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidiactl: No such device or address"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidia-uvm: No such device or address"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidia3: No such file or directory"), std::string::npos) << out;
}

TEST_F(SandboxTest, CannotSeeOrSignalAnotherTenantsProcesses) {
  ASSERT_TRUE(runner_->Start(Spec("a", "tenant-a", "exec sleep 30")).ok());
  ASSERT_TRUE(gpupool::testing::WaitFor([&] { return ended_.Started("a"); }));
  const std::optional<TaskStatus> a = runner_->Get("a");
  ASSERT_TRUE(a.has_value());
  ASSERT_GT(a->pid, 0);
  const std::string pid = std::to_string(a->pid);
  const std::string script = "ls /proc | grep -c '^[0-9]'; kill -TERM " + pid +
                             "; echo rc_kill=$?; kill -TERM -" + pid +
                             "; echo rc_killpg=$?; cat /proc/" + pid +
                             "/environ; echo rc_env=$?; kill -9 1; echo rc_init=$?";
  TaskStatus b = Run(Spec("b", "tenant-b", script));
  const std::string& out = b.output_tail;
  std::istringstream in(out);
  int visible = 0;
  in >> visible;
  EXPECT_GE(visible, 1) << out;
  EXPECT_LE(visible, 4) << out;  // its init, sh, ls, grep — nobody else
  EXPECT_NE(out.find("rc_kill=1"), std::string::npos) << out;
  EXPECT_NE(out.find("rc_killpg=1"), std::string::npos) << out;
  EXPECT_NE(out.find("rc_env=1"), std::string::npos) << out;
  EXPECT_EQ(out.find("GPUPOOL_TASK_ID=a"), std::string::npos) << out;
  // Tenant A still runs.
  auto still = runner_->Get("a");
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(still->phase, TaskPhase::kRunning);
  // And a stop still ends it: SIGTERM, then SIGKILL after the grace (its init, `sleep`, has no
  // handler, so the kernel ignores the SIGTERM for a namespace's init).
  runner_->Stop("a", 0, 300, "test over");
  TaskStatus end = WaitEnd("a");
  EXPECT_EQ(end.phase, TaskPhase::kCancelled);
}

TEST_F(SandboxTest, ReportsCpuTimeAndPeakMemoryAndAppliesTheCpuQuota) {
  TaskSpec spec = Spec("burn", "acme",
                       "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null; "
                       "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done");
  spec.cpu_milli = 500;
  spec.memory_mib = 256;
  TaskStatus st = Run(spec);
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded) << st.reason << st.output_tail;
  EXPECT_TRUE(st.usage.measured);
  EXPECT_GT(st.usage.cpu_usec, 10'000);  // a 300k-iteration shell loop takes well over 10 ms
  EXPECT_GT(st.usage.peak_memory_bytes, 0);
  EXPECT_EQ(st.usage.oom_kills, 0);
  EXPECT_FALSE(st.oom);
  if (sandbox::CgroupLayout::Detect().v1.count(sandbox::Controller::kCpu)) {
    EXPECT_NE(st.output_tail.find("50000"), std::string::npos) << st.output_tail;  // 0.5 CPU
  }
}

// Issue 30: a sandboxed task outlives an agent restart. The runner leaves its container running;
// a new sandbox and runner on the same data dir (a restarted agent) re-adopt it with its uid
// reserved again (a task started meanwhile gets another) and report how it ended, with the usage
// its shim read from its cgroups.
TEST_F(SandboxTest, ARestartedRunnerReadoptsASandboxedTaskWithItsUid) {
  TaskSpec spec = Spec(
      "stay", "acme", "touch up; i=0; while [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; exit 5");
  spec.memory_mib = 128;
  auto st = runner_->Start(spec);
  ASSERT_TRUE(st.ok() && !st->terminal()) << st.status().ToString();
  ASSERT_TRUE(gpupool::testing::WaitFor(
      [&] { return std::filesystem::exists(WorkDir("stay") + "/up"); }, std::chrono::seconds(30)));
  const std::string uid = testing::StateValue(data_dir_ + "/tasks/stay.1/state", "uid");
  ASSERT_FALSE(uid.empty());
  runner_->Leave();
  Start();  // the restarted agent: a new sandbox and runner, the same data dir
  const TaskRunner::Recovery r = runner_->Recover("node-a");
  EXPECT_EQ(r.adopted, 1) << ReadFile(data_dir_ + "/tasks/stay.1/state");
  EXPECT_EQ(r.killed, 0);
  // The adopted task's uid is taken: a task started now runs as another.
  const TaskStatus other = Run(Spec("other", "acme", "true"));
  ASSERT_EQ(other.phase, TaskPhase::kSucceeded) << other.reason;
  EXPECT_NE(testing::StateValue(data_dir_ + "/tasks/other.1/state", "uid"), uid);
  const TaskStatus end = WaitEnd("stay");
  EXPECT_EQ(end.phase, TaskPhase::kFailed);
  EXPECT_EQ(end.exit_code, 5);
  EXPECT_TRUE(end.usage.measured);
  EXPECT_GT(end.usage.peak_memory_bytes, 0);
  EXPECT_EQ(runner_->options().sandbox->uids()->pool_in_use(), 0);
}

TEST_F(SandboxTest, AnUnknownUserFailsTheTaskInsteadOfRunningItUnconfined) {
  options_.tenant_users = {{"acme", "no-such-user-gpupool"}, {"num", "#0"}};
  Start();
  TaskStatus st = Run(Spec("x", "acme", "touch " + data_dir_ + "/ran"));
  EXPECT_EQ(st.phase, TaskPhase::kFailed);
  EXPECT_EQ(st.exit_code, 126);
  EXPECT_NE(st.reason.find("user 'no-such-user-gpupool' for tenant 'acme' does not exist"),
            std::string::npos)
      << st.reason;
  EXPECT_FALSE(std::filesystem::exists(data_dir_ + "/ran"));
  TaskStatus root = Run(Spec("y", "num", "true"));
  EXPECT_EQ(root.phase, TaskPhase::kFailed);
  EXPECT_NE(root.reason.find("not a uid > 0"), std::string::npos) << root.reason;
}

TEST_F(SandboxTest, AGrantedDeviceFileThatIsNotADeviceFailsTheTask) {
  TaskSpec spec = Spec("x", "acme", "true");
  spec.device_files = {etc_dir_ + "/agent.yaml"};
  TaskStatus st = Run(spec);
  EXPECT_EQ(st.phase, TaskPhase::kFailed);
  EXPECT_NE(st.reason.find("agent.yaml: not a device file"), std::string::npos) << st.reason;
}

TEST_F(SandboxTest, AProgramThatDoesNotExistIsExit127AndItsUidIsReturned) {
  TaskStatus st = Run(Spec("x", "acme", "true"));
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded);
  TaskSpec spec = Spec("y", "acme", "");
  spec.argv = {"no-such-program-gpupool"};
  TaskStatus missing = Run(spec);
  EXPECT_EQ(missing.phase, TaskPhase::kFailed);
  EXPECT_EQ(missing.exit_code, 127) << missing.reason;
  EXPECT_NE(missing.reason.find("no-such-program-gpupool"), std::string::npos) << missing.reason;
}

// One sandbox path (issue 25): where the node cannot run containers (runc missing here), the
// sandbox has nothing to confine a task with, so no task runs — it fails at once saying why —
// and registration says nothing is enforced, so no pool that requires the sandbox sends work.
TEST(SandboxWithoutTheRuntimeTest, NoTaskRunsAndRegistrationSaysWhy) {
  if (geteuid() != 0) GTEST_SKIP() << "the sandbox needs root";
  const std::string data_dir = testing::TempDir("/tmp/gpupool-sbx-noruntime-");
  sandbox::SandboxOptions so;
  so.enabled = true;
  so.uid_pool_first = 61500;
  so.uid_pool_count = 10;
  auto box = sandbox::Sandbox::Create(so);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  TaskRunnerOptions o;
  o.data_dir = data_dir;
  o.sandbox = *box;
  o.containers_off =
      "images: 'runc' was not found (scripts/install-deps installs runc, skopeo "
      "and umoci)";
  {
    TaskRunner runner(o);
    TaskSpec spec;
    spec.owner = "node-a";
    spec.task_id = "t";
    spec.tenant = "acme";
    spec.attempt = 1;
    spec.argv = {"/bin/sh", "-c", "touch " + data_dir + "/ran"};
    auto st = runner.Start(spec);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->phase, TaskPhase::kFailed);
    EXPECT_EQ(st->exit_code, 126);
    EXPECT_EQ(st->reason,
              "sandbox: tasks run confined by the OCI runtime, which this node cannot use (" +
                  o.containers_off + ")");
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_FALSE(std::filesystem::exists(data_dir + "/ran"));
  }
  std::map<std::string, std::pair<bool, std::string>> caps;
  for (const sandbox::Capability& c : NodeCapabilities(o, nullptr)) {
    caps[c.name] = {c.enforced, c.detail};
  }
  EXPECT_FALSE(caps["sandbox"].first);
  EXPECT_NE(caps["sandbox"].second.find("'runc' was not found"), std::string::npos)
      << caps["sandbox"].second;
  for (const char* name : {"memory", "cpu", "pids", "devices", "uid", "namespaces", "network"}) {
    EXPECT_FALSE(caps[name].first) << name;
  }
  std::error_code ec;
  std::filesystem::remove_all(data_dir, ec);
}

TEST(CgroupLayoutTest, ReadsV1AndV2MountsFromMountinfo) {
  const std::string mountinfo =
      "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
      "31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "32 25 0:28 / /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n"
      "33 25 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
  sandbox::CgroupLayout hybrid = sandbox::CgroupLayout::FromMountinfo(mountinfo, "");
  EXPECT_EQ(hybrid.v1.at(sandbox::Controller::kMemory), "/sys/fs/cgroup/memory");
  EXPECT_EQ(hybrid.v1.at(sandbox::Controller::kCpuacct), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_FALSE(hybrid.Has(sandbox::Controller::kPids));
  EXPECT_TRUE(hybrid.v2.empty());  // the unified tree holds no controllers here

  const std::string pure = "40 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  sandbox::CgroupLayout v2 =
      sandbox::CgroupLayout::FromMountinfo(pure, "cpuset cpu io memory pids\n");
  EXPECT_EQ(v2.v2, "/sys/fs/cgroup");
  EXPECT_TRUE(v2.OnV2(sandbox::Controller::kMemory));
  EXPECT_TRUE(v2.OnV2(sandbox::Controller::kPids));
  EXPECT_EQ(v2.Describe(), "v2: cpu cpuacct memory pids");
}

}  // namespace
}  // namespace gpupool::agent

namespace gpupool::agent {
namespace {

// bash's /dev/tcp: "reached" when a TCP connection to address:port was accepted.
std::string ProbeScript(const std::string& address, int port) {
  return "if timeout 3 bash -c 'echo > /dev/tcp/" + address + "/" + std::to_string(port) +
         "' 2>/dev/null; then echo reached; else echo refused; fi";
}

// The interfaces a task sees, one name per line (from /proc/net/dev).
const char kInterfaces[] = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort; ";

TEST_F(SandboxTest, ByDefaultATaskHasOnlyItsOwnLoopbackAndCannotReachTheNode) {
  testing::Listener node("");
  const std::string address = testing::NodeAddress(net::Cidr{0, 32});
  ASSERT_FALSE(address.empty());
  TaskSpec spec =
      Spec("nonet", "acme", std::string(kInterfaces) + ProbeScript(address, node.port()));
  TaskStatus st = Run(spec);
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded) << st.reason << st.output_tail;
  EXPECT_EQ(st.output_tail, "lo\nrefused\n");
  // Control: a pool that asked for the node's network (an admin's choice) reaches it.
  TaskSpec host = Spec("hostnet", "acme", ProbeScript(address, node.port()));
  host.network = net::NetworkMode::kHost;
  st = Run(host);
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded) << st.reason << st.output_tail;
  EXPECT_EQ(st.output_tail, "reached\n");
}

TEST_F(SandboxTest, AnIsolatedTaskHasItsOwnAddressAndCannotReachTheNode) {
  if (const std::string why = testing::CannotBuildNetworks(); !why.empty()) GTEST_SKIP() << why;
  net::NetworkOptions no = testing::TestNetworkOptions("s", "10.215.0.0/24");
  no.dns = {"198.51.100.53"};
  auto nets = net::TaskNetworks::Open(no);
  ASSERT_TRUE(nets.ok()) << nets.status().ToString();
  std::shared_ptr<net::TaskNetworks> networks = std::move(nets).value();
  Start(networks);
  testing::Listener node("");
  const std::string address = testing::NodeAddress(net::Cidr{0, 32});
  TaskSpec spec = Spec("iso", "acme",
                       std::string(kInterfaces) + "grep -c '^eth0' /proc/net/route; " +
                           ProbeScript(address, node.port()) +
                           "; grep nameserver /etc/resolv.conf 2>/dev/null || echo none");
  spec.network = net::NetworkMode::kIsolated;
  TaskStatus st = Run(spec);
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded) << st.reason << st.output_tail;
  // Its veth and loopback, a route through the node (the /30 and the default), and the node's
  // own ports refused.
  // Its name server, bound over the node's /etc/resolv.conf where that is a regular file; a
  // symlink (systemd-resolved's) leads out of the container's view, and nothing is bound.
  const std::string resolver =
      std::filesystem::is_regular_file(std::filesystem::symlink_status("/etc/resolv.conf"))
          ? "nameserver 198.51.100.53\n"
          : "none\n";
  EXPECT_EQ(st.output_tail, "eth0\nlo\n2\nrefused\n" + resolver);
  // Its namespace went with it.
  EXPECT_EQ(networks->in_use(), 0);
  runner_.reset();
  networks->Uninstall();
}

// An isolated task outlives an agent restart with its network: the restarted agent opens its
// networks without removing the previous process's namespaces, re-adopts the task with its slot
// (a task started meanwhile gets another address), removes only the leftovers no task uses, and
// the task keeps its veth and routes; its namespace goes when it ends.
TEST_F(SandboxTest, ARestartedRunnerReadoptsAnIsolatedTaskWithItsNetwork) {
  if (const std::string why = testing::CannotBuildNetworks(); !why.empty()) GTEST_SKIP() << why;
  const net::NetworkOptions no = testing::TestNetworkOptions("r", "10.217.0.0/24");
  auto nets = net::TaskNetworks::Open(no);
  ASSERT_TRUE(nets.ok()) << nets.status().ToString();
  Start(std::move(nets).value());
  TaskSpec spec = Spec("iso", "acme",
                       "grep -c '^eth0' /proc/net/route > addr; "
                       "i=0; while [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; "
                       "grep -c '^eth0' /proc/net/route; exit 7");
  spec.network = net::NetworkMode::kIsolated;
  auto st = runner_->Start(spec);
  ASSERT_TRUE(st.ok() && !st->terminal()) << st.status().ToString();
  for (int i = 0; i < 3000 && ReadFile(WorkDir("iso") + "/addr").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  runner_->Leave();
  runner_.reset();
  // The restarted agent.
  auto reopened = net::TaskNetworks::Open(no, /*remove_leftovers=*/false);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  std::shared_ptr<net::TaskNetworks> networks = std::move(reopened).value();
  Start(networks);
  const TaskRunner::Recovery r = runner_->Recover("node-a");
  EXPECT_EQ(r.adopted, 1);
  EXPECT_EQ(r.killed, 0);
  ASSERT_EQ(r.kept_network_slots.size(), 1u);
  networks->RemoveLeftovers(r.kept_network_slots);
  EXPECT_EQ(networks->in_use(), 1);
  TaskSpec other = Spec("other", "acme", "grep -c '^eth0' /proc/net/route");
  other.network = net::NetworkMode::kIsolated;
  const TaskStatus second = Run(other);
  EXPECT_EQ(second.phase, TaskPhase::kSucceeded) << second.reason << second.output_tail;
  EXPECT_EQ(second.output_tail, "2\n");
  const TaskStatus end = WaitEnd("iso");
  EXPECT_EQ(end.phase, TaskPhase::kFailed) << end.reason << end.output_tail;
  EXPECT_EQ(end.exit_code, 7);
  // Its veth survived the restart: its two routes (the /30 and the default) are still there.
  EXPECT_EQ(end.output_tail, "2\n");
  EXPECT_EQ(networks->in_use(), 0);
  runner_.reset();
  networks->Uninstall();
}

TEST_F(SandboxTest, AnIsolatedTaskOnANodeWithoutIsolatedNetworksFailsInsteadOfRunningOpen) {
  TaskSpec spec = Spec("iso", "acme", "echo ran");
  spec.network = net::NetworkMode::kIsolated;
  TaskStatus st = Run(spec);
  EXPECT_EQ(st.phase, TaskPhase::kFailed);
  EXPECT_EQ(st.exit_code, 126);
  EXPECT_NE(st.reason.find("network: isolated: this node offers no isolated task networks"),
            std::string::npos)
      << st.reason;
  EXPECT_EQ(st.output_tail.find("ran"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::agent
