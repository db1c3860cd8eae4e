// The OCI runtime path with real parts: an image built here from busybox-static and a tiny
// static probe, pushed to a loopback docker-registry, pulled into the image store, and run by
// runc from the spec the agent writes, through the agent's shim.
//
// Shown: root in the container is an unprivileged uid on the host; the task sees none of the
// host's files and its writes land in its own upper dir, never in the shared image; a system
// call the default seccomp profile refuses fails (and succeeds with the filter off: it is the
// filter that refuses it); the memory limit OOM-kills the task and the OOM is reported; the
// cgroup limits are the ones asked for; with network `none` the task cannot connect to a
// loopback port on the host (and can with `host`: the listener is real); a plain command runs
// on the host's /usr and /etc read-only and sees nothing else. The spec tests check what is
// written for cgroup v2 and v1 without running anything.
//
// Needs root, runc and user namespaces; each missing piece skips with its reason.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "agent/image/image_store.h"
#include "agent/oci/container.h"
#include "agent/oci/launcher.h"
#include "agent/oci/rootfs.h"
#include "agent/oci/seccomp.h"
#include "agent/oci/spec.h"
#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/uids.h"
#include "base/run_tool.h"
#include "tests/agent/oci_registry.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent::oci {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool Contains(const json& list, const std::string& value) {
  for (const auto& v : list) {
    if (v == value) return true;
  }
  return false;
}

// ---- the spec, without running it ----

RuntimeSpecInput SampleInput(bool cgroup_v2) {
  RuntimeSpecInput in;
  in.args = {"/bin/sh", "-c", "true"};
  in.env = {"PATH=/bin"};
  in.rootfs = "/var/lib/gpupool/tasks/t1/rootfs";
  in.rootfs_readonly = false;
  in.host_uid = 300001;
  in.host_gid = 300001;
  in.memory_bytes = 512 << 20;
  in.cpu_milli = 2500;
  in.pids_max = 1024;
  in.cgroup_v2 = cgroup_v2;
  in.cgroups_path = "/gpupool/t1";
  in.devices = {DeviceNode{"/dev/nvidia0", 'c', 195, 0, 0666},
                DeviceNode{"/dev/nvidiactl", 'c', 195, 255, 0666}};
  in.driver_files = {"/usr/lib/x86_64-linux-gnu/libcuda.so.1"};
  in.interposer_library = "/usr/lib/gpupool/libgpupool_interposer.so";
  in.interposer_socket = "/run/gpupool/tasks/t1/interposer.sock";
  in.seccomp = json{{"defaultAction", "SCMP_ACT_ERRNO"}};
  return in;
}

TEST(RuntimeSpecTest, CgroupV2SpecCarriesTheLimitsDevicesAndConfinement) {
  auto spec = BuildRuntimeSpec(SampleInput(/*cgroup_v2=*/true));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const json& linux = (*spec)["linux"];
  const json& res = linux["resources"];
  // 512 MiB, no swap beyond it; 2.5 CPUs = 250 ms per 100 ms period; pids.
  EXPECT_EQ(res["memory"]["limit"], 536870912);
  EXPECT_EQ(res["memory"]["swap"], 536870912);
  EXPECT_EQ(res["cpu"]["quota"], 250000);
  EXPECT_EQ(res["cpu"]["period"], 100000);
  EXPECT_EQ(res["pids"]["limit"], 1024);
  EXPECT_EQ(res["unified"]["memory.oom.group"], "1");
  EXPECT_EQ(linux["cgroupsPath"], "/gpupool/t1");
  // Devices: deny all, then exactly the two granted nodes.
  ASSERT_EQ(res["devices"].size(), 3u);
  EXPECT_EQ(res["devices"][0], (json{{"allow", false}, {"access", "rwm"}}));
  EXPECT_EQ(res["devices"][1]["major"], 195);
  EXPECT_EQ(res["devices"][1]["minor"], 0);
  EXPECT_EQ(res["devices"][2]["minor"], 255);
  ASSERT_EQ(linux["devices"].size(), 2u);
  EXPECT_EQ(linux["devices"][0]["path"], "/dev/nvidia0");
  // Root in the container is uid 300001 on the host.
  EXPECT_EQ(linux["uidMappings"][0], (json{{"containerID", 0}, {"hostID", 300001}, {"size", 1}}));
  EXPECT_EQ(linux["gidMappings"][0]["hostID"], 300001);
  json ns_types = json::array();
  for (const auto& ns : linux["namespaces"]) {
    ns_types.push_back(ns["type"]);
    if (ns["type"] == "network") {
      EXPECT_FALSE(ns.contains("path")) << "network none: a new one";
    }
  }
  for (const char* t : {"user", "network", "pid", "mount", "ipc", "uts", "cgroup"}) {
    EXPECT_TRUE(Contains(ns_types, t)) << t;
  }
  EXPECT_EQ(linux["seccomp"]["defaultAction"], "SCMP_ACT_ERRNO");
  const json& proc = (*spec)["process"];
  EXPECT_EQ(proc["noNewPrivileges"], true);
  EXPECT_EQ(proc["user"]["uid"], 0);
  EXPECT_FALSE(Contains(proc["capabilities"]["bounding"], "CAP_SYS_ADMIN"));
  EXPECT_FALSE(Contains(proc["capabilities"]["bounding"], "CAP_NET_RAW"));
  EXPECT_TRUE(Contains(proc["capabilities"]["bounding"], "CAP_CHOWN"));
  EXPECT_TRUE(proc["capabilities"]["ambient"].empty());
  EXPECT_TRUE(Contains(proc["env"], "LD_PRELOAD=/usr/lib/gpupool/libgpupool_interposer.so"));
  EXPECT_TRUE(Contains(proc["env"], "GPUPOOL_LEDGER_SOCKET=/run/gpupool/tasks/t1/interposer.sock"));
  // The bound driver's directory is where the task's CUDA looks for libcuda.so.1.
  EXPECT_TRUE(Contains(proc["env"], "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu"));
  // The driver library, the interposer and its ledger's socket directory (which the task must
  // not be able to replace): read-only binds at the same path.
  int ro_binds = 0;
  for (const auto& m : (*spec)["mounts"]) {
    if (m["destination"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.1" ||
        m["destination"] == "/usr/lib/gpupool/libgpupool_interposer.so" ||
        m["destination"] == "/run/gpupool/tasks/t1") {
      EXPECT_EQ(m["type"], "bind");
      EXPECT_TRUE(Contains(m["options"], "ro"));
      ++ro_binds;
    }
  }
  EXPECT_EQ(ro_binds, 3);
}

// The driver's directories go after an image's own LD_LIBRARY_PATH, once each; a binary adds none.
TEST(RuntimeSpecTest, TheDriversDirectoriesFollowTheImagesLibraryPath) {
  RuntimeSpecInput in = SampleInput(/*cgroup_v2=*/true);
  in.interposer_library.clear();
  in.env = {"PATH=/bin", "LD_LIBRARY_PATH=/opt/lib"};
  in.driver_files = {"/drv/lib/libcuda.so.1", "/drv/lib/libnvidia-ml.so.1", "/drv/bin/nvidia-smi"};
  auto spec = BuildRuntimeSpec(in);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ((*spec)["process"]["env"], (json{"PATH=/bin", "LD_LIBRARY_PATH=/opt/lib:/drv/lib"}));
}

// A dataset volume is read-only with every mount below it ("rro"): runc 1.1 makes a bind
// read-only at its top only with "ro". A scratch volume is writable, and the other read-only
// binds (driver files, the interposer) do not need Linux 5.12.
TEST(RuntimeSpecTest, ADatasetIsReadOnlyWithEveryMountBelowIt) {
  RuntimeSpecInput in = SampleInput(true);
  in.mounts = {BindMount{"/srv/datasets/imagenet", "/data", true, true},
               BindMount{"/var/lib/gpupool/tasks/t1/volumes/0", "/scratch", false, false}};
  auto spec = BuildRuntimeSpec(in);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  int seen = 0;
  for (const auto& m : (*spec)["mounts"]) {
    if (m["destination"] == "/data") {
      EXPECT_TRUE(Contains(m["options"], "ro")) << m.dump();
      EXPECT_TRUE(Contains(m["options"], "rro")) << m.dump();
      ++seen;
    } else if (m["destination"] == "/scratch") {
      EXPECT_TRUE(Contains(m["options"], "rw")) << m.dump();
      EXPECT_FALSE(Contains(m["options"], "rro")) << m.dump();
      ++seen;
    } else {
      EXPECT_FALSE(Contains(m["options"], "rro")) << m.dump();
    }
  }
  EXPECT_EQ(seen, 2);
}

TEST(RuntimeSpecTest, CgroupV1SpecHasNoV2OnlyKeysAndBadInputIsRefused) {
  auto v1 = BuildRuntimeSpec(SampleInput(false));
  ASSERT_TRUE(v1.ok());
  EXPECT_FALSE((*v1)["linux"]["resources"].contains("unified"));

  RuntimeSpecInput root = SampleInput(false);
  root.host_uid = 0;
  auto refused = BuildRuntimeSpec(root);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("host_uid"), std::string::npos);
  RuntimeSpecInput isolated = SampleInput(false);
  isolated.network = Network::kIsolated;
  EXPECT_NE(BuildRuntimeSpec(isolated).status().message().find("netns_path"), std::string::npos);
  isolated.netns_path = "/run/netns/t1";
  auto with_ns = BuildRuntimeSpec(isolated);
  ASSERT_TRUE(with_ns.ok());
  bool found = false;
  for (const auto& ns : (*with_ns)["linux"]["namespaces"]) {
    if (ns["type"] == "network") found = ns.value("path", "") == "/run/netns/t1";
  }
  EXPECT_TRUE(found);
  RuntimeSpecInput host = SampleInput(false);
  host.network = Network::kHost;
  auto host_spec = BuildRuntimeSpec(host);
  ASSERT_TRUE(host_spec.ok());
  for (const auto& ns : (*host_spec)["linux"]["namespaces"]) EXPECT_NE(ns["type"], "network");
}

ImageTaskOverrides Task(std::vector<std::string> args, std::vector<std::string> entrypoint = {},
                        std::string working_dir = "", std::vector<std::string> env = {}) {
  ImageTaskOverrides t;
  t.args = std::move(args);
  t.entrypoint = std::move(entrypoint);
  t.working_dir = std::move(working_dir);
  t.env = std::move(env);
  return t;
}

TEST(RuntimeSpecTest, ImageConfigGivesArgsEnvAndWorkingDir) {
  std::string config = R"({"config":{"Entrypoint":["/bin/app"],"Cmd":["--serve"],
      "Env":["PATH=/opt/bin","MODE=image"],"WorkingDir":"/srv"}})";
  RuntimeSpecInput in;
  ASSERT_TRUE(ApplyImageConfig(config, Task({}, {}, "", {"MODE=task", "EXTRA=1"}), &in).ok());
  EXPECT_EQ(in.args, (std::vector<std::string>{"/bin/app", "--serve"}));
  EXPECT_EQ(in.env, (std::vector<std::string>{"PATH=/opt/bin", "MODE=task", "EXTRA=1"}));
  EXPECT_EQ(in.cwd, "/srv");
  ASSERT_TRUE(ApplyImageConfig(config, Task({"--once"}), &in).ok());
  EXPECT_EQ(in.args, (std::vector<std::string>{"/bin/app", "--once"}));
  // The task's entrypoint replaces the image's and drops its Cmd; its args still follow.
  ASSERT_TRUE(ApplyImageConfig(config, Task({}, {"/bin/sh", "-c"}), &in).ok());
  EXPECT_EQ(in.args, (std::vector<std::string>{"/bin/sh", "-c"}));
  ASSERT_TRUE(ApplyImageConfig(config, Task({"id -u"}, {"/bin/sh", "-c"}), &in).ok());
  EXPECT_EQ(in.args, (std::vector<std::string>{"/bin/sh", "-c", "id -u"}));
  ASSERT_TRUE(ApplyImageConfig(config, Task({}, {}, "/data"), &in).ok());
  EXPECT_EQ(in.cwd, "/data");
  EXPECT_EQ(ApplyImageConfig(R"({"config":{}})", {}, &in).code(), StatusCode::kInvalidArgument);
  // A tenant's malformed config is refused or ignored field by field, never thrown.
  EXPECT_EQ(ApplyImageConfig("[1,2]", {}, &in).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      ApplyImageConfig(R"({"config":{"Cmd":["/x"],"Env":"A=1","WorkingDir":5}})", {}, &in).ok());
  EXPECT_EQ(in.cwd, "/");
  EXPECT_EQ(ApplyImageConfig(R"({"config":"nope"})", Task({"/x"}), &in).code(),
            StatusCode::kInvalidArgument);
}

TEST(SeccompProfileTest, ConditionsAreResolvedForTheTask) {
  std::string profile = R"({
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
    "archMap": [{"architecture": "SCMP_ARCH_X86_64",
                 "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
                {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}],
    "syscalls": [
      {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
      {"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64"]}},
      {"names": ["set_tls"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["arm64"]}},
      {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
      {"names": ["bpf"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
       "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
      {"names": ["newcall"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "9.0"}},
      {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
       "args": [{"index": 0, "value": 8, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]}]})";
  auto out = ConvertSeccompProfile(profile, SeccompTarget{"amd64", "6.1.0", {"CAP_CHOWN"}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["defaultErrnoRet"], 38);
  EXPECT_EQ((*out)["architectures"], (json{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"}));
  std::vector<std::string> kept;
  for (const auto& r : (*out)["syscalls"]) {
    kept.push_back(r["names"][0].get<std::string>() + "/" + r["action"].get<std::string>());
  }
  EXPECT_EQ(kept, (std::vector<std::string>{"read/SCMP_ACT_ALLOW", "arch_prctl/SCMP_ACT_ALLOW",
                                            "bpf/SCMP_ACT_ERRNO", "personality/SCMP_ACT_ALLOW"}));
  EXPECT_EQ((*out)["syscalls"][3]["args"][0]["value"], 8);
  auto admin = ConvertSeccompProfile(profile, SeccompTarget{"arm64", "9.1", {"CAP_SYS_ADMIN"}});
  ASSERT_TRUE(admin.ok());
  kept.clear();
  for (const auto& r : (*admin)["syscalls"]) kept.push_back(r["names"][0]);
  EXPECT_EQ(kept, (std::vector<std::string>{"read", "set_tls", "bpf", "newcall", "personality"}));
  EXPECT_EQ((*admin)["architectures"], (json{"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"}));
  auto malformed = ConvertSeccompProfile(
      R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"action":"SCMP_ACT_ALLOW","names":7}]})",
      SeccompTarget{"amd64", "6.1.0", {}});
  EXPECT_EQ(malformed.status().code(), StatusCode::kInvalidArgument);
}

TEST(SeccompProfileTest, DebiansDefaultProfileConverts) {
  auto out =
      LoadSeccompProfile(kDefaultSeccompProfile, SeccompTarget::ThisNode(DefaultCapabilities()));
  if (out.status().code() == StatusCode::kNotFound) GTEST_SKIP() << out.status().message();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  bool refuses_move_pages = false, allows_read = false, allows_bpf = false;
  for (const auto& r : (*out)["syscalls"]) {
    bool errno_rule = r["action"] == "SCMP_ACT_ERRNO";
    refuses_move_pages = refuses_move_pages || (errno_rule && Contains(r["names"], "move_pages"));
    allows_read = allows_read || (!errno_rule && Contains(r["names"], "read"));
    allows_bpf = allows_bpf || (!errno_rule && Contains(r["names"], "bpf"));
  }
  EXPECT_TRUE(refuses_move_pages);
  EXPECT_TRUE(allows_read);
  EXPECT_FALSE(allows_bpf) << "bpf needs CAP_SYS_ADMIN, which tasks do not get";
}

// ---- running it ----

// At start the agent unmounts the task root file systems a crashed agent left (overlays, and
// mounts bound inside them), deepest first, names with spaces included, and nothing outside.
TEST(UnmountAllUnderTest, UnmountsEveryMountPointBelowTheTasksDirAndNothingElse) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting needs root";
  const std::string dir = ::gpupool::testing::MakeScratchDir("/tmp/gpupool-unmount-");
  const std::string outside = dir + "/elsewhere";
  std::vector<std::string> points = {dir + "/tasks/a.1/rootfs", dir + "/tasks/a.1/rootfs/data",
                                     dir + "/tasks/b c.1/rootfs"};
  for (const std::string& p : points) {
    std::filesystem::create_directories(p);
    ASSERT_EQ(mount("tmpfs", p.c_str(), "tmpfs", 0, "size=1m"), 0) << p << ": " << strerror(errno);
  }
  std::filesystem::create_directories(outside);
  ASSERT_EQ(mount("tmpfs", outside.c_str(), "tmpfs", 0, "size=1m"), 0);
  auto mounted = [](const std::string& p) {
    std::ifstream in("/proc/self/mountinfo");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string escaped;
    for (char c : p) escaped += c == ' ' ? std::string("\\040") : std::string(1, c);
    return text.find(" " + escaped + " ") != std::string::npos;
  };
  ASSERT_TRUE(mounted(points[2]));
  auto n = oci::UnmountAllUnder(dir + "/tasks");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3);
  for (const std::string& p : points) EXPECT_FALSE(mounted(p)) << p;
  EXPECT_TRUE(mounted(outside));
  umount2(outside.c_str(), MNT_DETACH);
  EXPECT_FALSE(oci::UnmountAllUnder("/").ok());
  std::filesystem::remove_all(dir);
}

class OciRuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "needs root (runc, overlay mounts, cgroups)";
      return;
    }
    auto runc = RunTool({.argv = {"runc", "--version"},
                         .env = {},
                         .pass_fd = -1,
                         .timeout_ms = 10'000,
                         .stdout_fd = -1});
    if (!runc.ok() || !runc->ok()) {
      skip_ = "runc is not installed (scripts/install-deps installs it)";
      return;
    }
    std::string max_userns = testing::ReadWholeFile("/proc/sys/user/max_user_namespaces");
    if (max_userns.empty() || std::stol(max_userns) == 0) {
      skip_ = "this kernel allows no user namespaces (user.max_user_namespaces = 0)";
      return;
    }
    registry_ = new testing::LocalRegistry();
    Status st = registry_->Start();
    if (!st.ok()) {
      skip_ = "no local registry: " + st.message();
      return;
    }
    work_ = testing::MakeScratchDir("/tmp/gpupool-ociwork-");
    testing::TestLayer probe;
    probe.copy_from_host["/bin/oci_probe"] = GPUPOOL_OCI_PROBE;
    probe.files["/etc/image-release"] = "gpupool test image\n";
    auto digest = testing::BuildAndPush(*registry_, work_, "test/runtime", "1",
                                        {testing::BusyboxLayer(), probe});
    if (!digest.ok()) {
      skip_ = "cannot build the test image: " + digest.status().message();
      return;
    }
    image::ImageStoreOptions o;
    o.root = testing::MakeScratchDir("/tmp/gpupool-ocistore-");
    o.tls_verify = false;
    auto store = image::ImageStore::Open(o);
    if (!store.ok()) {
      skip_ = store.status().ToString();
      return;
    }
    store_ = new std::shared_ptr<image::ImageStore>(*store);
    auto lease = (*store_)->Pull(registry_->host() + "/test/runtime:1", {});
    if (!lease.ok()) {
      skip_ = "pull failed: " + lease.status().ToString();
      return;
    }
    lease_ = new image::ImageLease(std::move(*lease));
  }
  static void TearDownTestSuite() {
    delete lease_;
    if (store_) {
      std::error_code ec;
      std::string root = (*store_)->options().root;
      delete store_;
      fs::remove_all(root, ec);
    }
    delete registry_;
    std::error_code ec;
    if (!work_.empty()) fs::remove_all(work_, ec);
    // runc removes each container's group; the parent the tests named is theirs to remove.
    rmdir("/sys/fs/cgroup/gpupool-test");
    for (const auto& hierarchy : fs::directory_iterator("/sys/fs/cgroup", ec)) {
      rmdir((hierarchy.path().string() + "/gpupool-test").c_str());
    }
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    tasks_ = testing::MakeScratchDir("/tmp/gpupool-ocitasks-");
    chmod(tasks_.c_str(), 0711);
    launcher_options_ = LauncherOptions{"runc", tasks_ + "/runc-state", GPUPOOL_OCI_SHIM};
    launcher_ = std::make_unique<Launcher>(launcher_options_);
    layout_ = sandbox::CgroupLayout::Detect();
  }
  void TearDown() override {
    for (auto& t : started_) {
      if (t.container) t.container->Release();
    }
    started_.clear();
    std::error_code ec;
    if (!tasks_.empty()) fs::remove_all(tasks_, ec);
  }

  struct Task {
    std::string id, dir;
    TaskRootfs rootfs;
    sandbox::TaskIdentity identity;
    RuntimeSpecInput input;
    std::shared_ptr<PreparedContainer> container;
  };

  // A task of the test image (or a plain command when `host_root`), prepared by the agent's
  // ContainerFactory: image held, uid taken, rootfs mounted, bundle written.
  using Adjust = std::function<void(ContainerRequest&, ContainerFactoryOptions&)>;
  Task Prepare(const std::string& name, std::vector<std::string> args, Adjust adjust = nullptr,
               bool host_root = false) {
    Task t;
    t.id = "gpupool-test-" + name + "-" + std::to_string(getpid());
    t.dir = tasks_ + "/" + name;
    fs::create_directories(t.dir);
    ContainerFactoryOptions o;
    o.store = *store_;
    o.uids = uids_;
    o.launcher = launcher_options_;
    o.cgroup_parent = "/gpupool-test";
    o.cgroup_v2 = layout_.OnV2(sandbox::Controller::kMemory);
    ContainerRequest r;
    r.id = t.id;
    r.tenant = "tenant-" + name;
    r.task_dir = t.dir;
    r.image = host_root ? "" : registry_->host() + "/test/runtime:1";
    r.args = args;
    r.pids_max = 256;
    if (adjust) adjust(r, o);
    auto prepared = ContainerFactory(o).Prepare(r);
    EXPECT_TRUE(prepared.ok()) << prepared.status().ToString();
    if (!prepared.ok()) return t;
    t.container = std::move(*prepared);
    t.identity = t.container->identity();
    t.rootfs = t.container->rootfs();
    t.input = t.container->spec_input();
    started_.push_back(t);
    return t;
  }

  // Runs to the end; the log (stdout+stderr) into *log.
  ContainerExit Run(const Task& t, std::string* log) {
    std::string path = t.dir + "/output.log";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    auto exit = launcher_->Run(t.dir, t.id, fd);
    close(fd);
    *log = testing::ReadWholeFile(path);
    EXPECT_TRUE(exit.ok()) << exit.status().ToString();
    return exit.ok() ? *exit : ContainerExit{};
  }

  // Starts `t` in the background and waits until its log shows `marker`: its shim's pid, or -1
  // (with a test failure) when it did not start or never printed it.
  pid_t StartUntil(const Task& t, const std::string& marker) {
    const std::string path = t.dir + "/output.log";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    auto shim = launcher_->Start(t.dir, t.id, fd);
    close(fd);
    EXPECT_TRUE(shim.ok()) << shim.status().ToString();
    if (!shim.ok()) return -1;
    const bool printed = testing::WaitFor(
        [&] { return testing::ReadWholeFile(path).find(marker) != std::string::npos; },
        std::chrono::seconds(20));
    EXPECT_TRUE(printed) << testing::ReadWholeFile(path);
    return printed ? *shim : -1;
  }

  static std::string skip_;
  static testing::LocalRegistry* registry_;
  static std::string work_;
  static std::shared_ptr<image::ImageStore>* store_;
  static image::ImageLease* lease_;

  std::string tasks_;
  std::unique_ptr<Launcher> launcher_;
  sandbox::CgroupLayout layout_;
  std::shared_ptr<sandbox::UidMap> uids_ =
      std::make_shared<sandbox::UidMap>(std::map<std::string, std::string>{}, 300000, 1000);
  LauncherOptions launcher_options_;
  std::vector<Task> started_;
};

std::string OciRuntimeTest::skip_;
testing::LocalRegistry* OciRuntimeTest::registry_ = nullptr;
std::string OciRuntimeTest::work_;
std::shared_ptr<image::ImageStore>* OciRuntimeTest::store_ = nullptr;
image::ImageLease* OciRuntimeTest::lease_ = nullptr;

TEST_F(OciRuntimeTest, RootInsideIsAnUnprivilegedUidOnTheHost) {
  Task t = Prepare("uid", {"/bin/sh", "-c", "id -u; echo written > /by-task; sleep 30"});
  const pid_t shim = StartUntil(t, "0\n");
  ASSERT_GT(shim, 0);
  auto init = launcher_->InitPid(t.id);
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  // The host's view of the same process: the task's pool uid, not 0.
  std::string status = testing::ReadWholeFile("/proc/" + std::to_string(*init) + "/status");
  std::string uid_line = status.substr(status.find("Uid:"));
  uid_line = uid_line.substr(0, uid_line.find('\n'));
  std::string want = std::to_string(t.identity.uid);
  EXPECT_EQ(uid_line, "Uid:\t" + want + "\t" + want + "\t" + want + "\t" + want);
  EXPECT_GE(t.identity.uid, 300000u);
  ASSERT_TRUE(launcher_->Stop(t.id, 200).ok());
  auto exit = launcher_->Wait(shim, t.dir);
  ASSERT_TRUE(exit.ok()) << exit.status().ToString();
  EXPECT_EQ(exit->signal, SIGKILL) << exit->reason;  // sh as init ignores SIGTERM
  EXPECT_FALSE(exit->oom_killed());
  // Its write to "/" is in its own upper dir, owned by its uid; the shared image is untouched.
  EXPECT_TRUE(t.rootfs.overlay) << t.rootfs.detail;
  struct stat st {};
  ASSERT_EQ(stat((t.dir + "/upper/by-task").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, t.identity.uid);
  EXPECT_FALSE(fs::exists(lease_->image().rootfs + "/by-task"));
}

TEST_F(OciRuntimeTest, ExitCodeComesBack) {
  Task t = Prepare("exit", {"/bin/sh", "-c", "exit 7"});
  std::string log;
  ContainerExit exit = Run(t, &log);
  EXPECT_EQ(exit.exit_code, 7) << exit.reason << log;
  EXPECT_EQ(exit.reason, "exit 7");
  EXPECT_EQ(exit.shim_exit_code(), 7);
}

TEST_F(OciRuntimeTest, SeesNoneOfTheHostsFiles) {
  std::string secret = tasks_ + "/host-secret";
  std::ofstream(secret) << "do not read";
  Task t = Prepare("files", {"/bin/sh", "-c",
                             "ls /; test -e " + secret +
                                 " && echo SECRET-VISIBLE; "
                                 "test -e /etc/passwd && echo PASSWD-VISIBLE; "
                                 "test -e /usr/bin && echo USR-VISIBLE; "
                                 "test -e " +
                                 (*store_)->options().root +
                                 " && echo STORE-VISIBLE; "
                                 "cat /etc/image-release"});
  std::string log;
  ContainerExit exit = Run(t, &log);
  EXPECT_EQ(exit.exit_code, 0) << exit.reason << log;
  EXPECT_NE(log.find("gpupool test image"), std::string::npos) << log;
  for (const char* leak : {"SECRET-VISIBLE", "PASSWD-VISIBLE", "USR-VISIBLE", "STORE-VISIBLE"}) {
    EXPECT_EQ(log.find(leak), std::string::npos) << leak << " in:\n" << log;
  }
  // "/" holds the image's directories and the runtime's mount points, nothing of the host's.
  std::istringstream listing(log.substr(0, log.find("gpupool test image")));
  std::set<std::string> entries;
  for (std::string e; listing >> e;) entries.insert(e);
  EXPECT_EQ(entries, (std::set<std::string>{"bin", "dev", "etc", "proc", "sys", "tmp"})) << log;
}

TEST_F(OciRuntimeTest, DefaultSeccompProfileRefusesASyscall) {
  Task filtered = Prepare("seccomp", {"/bin/oci_probe", "move_pages"});
  std::string log;
  ContainerExit exit = Run(filtered, &log);
  EXPECT_EQ(exit.exit_code, 1) << exit.reason << log;
  EXPECT_NE(log.find("errno 1 "), std::string::npos) << log;  // EPERM, the profile's errnoRet

  // The same task without the filter: the kernel allows it, so the filter is what refused it.
  Task open = Prepare("noseccomp", {"/bin/oci_probe", "move_pages"},
                      [](ContainerRequest& in, ContainerFactoryOptions&) { in.seccomp = false; });
  exit = Run(open, &log);
  EXPECT_EQ(exit.exit_code, 0) << exit.reason << log;
  EXPECT_NE(log.find("ok"), std::string::npos) << log;
}

TEST_F(OciRuntimeTest, MemoryLimitOomKillsTheTaskAndSaysSo) {
  if (!layout_.Has(sandbox::Controller::kMemory)) {
    GTEST_SKIP() << "this host has no memory cgroup controller";
  }
  Task t =
      Prepare("oom", {"/bin/oci_probe", "hog", "512"},
              [](ContainerRequest& in, ContainerFactoryOptions&) { in.memory_bytes = 32 << 20; });
  std::string log;
  ContainerExit exit = Run(t, &log);
  EXPECT_EQ(exit.signal, SIGKILL) << exit.reason << log;
  EXPECT_GE(exit.oom_kills, 1) << exit.reason << log;
  EXPECT_TRUE(exit.oom_killed());
  EXPECT_NE(exit.reason.find("OOM"), std::string::npos) << exit.reason;
  EXPECT_EQ(log.find("allocated"), std::string::npos) << log;

  // Under the limit it completes and no OOM is reported.
  Task fits =
      Prepare("fits", {"/bin/oci_probe", "hog", "8"},
              [](ContainerRequest& in, ContainerFactoryOptions&) { in.memory_bytes = 64 << 20; });
  exit = Run(fits, &log);
  EXPECT_EQ(exit.exit_code, 0) << exit.reason << log;
  EXPECT_FALSE(exit.oom_killed());
}

TEST_F(OciRuntimeTest, CgroupLimitsAreTheOnesAskedFor) {
  Task t = Prepare("limits", {"/bin/sh", "-c", "echo up; sleep 30"},
                   [](ContainerRequest& in, ContainerFactoryOptions&) {
                     in.memory_bytes = 48 << 20;
                     in.cpu_milli = 500;
                     in.pids_max = 64;
                   });
  const pid_t shim = StartUntil(t, "up");
  ASSERT_GT(shim, 0);
  const std::string rel = t.input.cgroups_path;
  auto read = [&](sandbox::Controller c, const std::string& file) {
    std::string dir = layout_.OnV2(c) ? layout_.v2 : layout_.v1.count(c) ? layout_.v1.at(c) : "";
    std::string text = testing::ReadWholeFile(dir + rel + "/" + file);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  };
  if (layout_.OnV2(sandbox::Controller::kMemory)) {
    std::cout << "cgroup v2 host: checking memory.max, cpu.max, pids.max\n";
    EXPECT_EQ(read(sandbox::Controller::kMemory, "memory.max"), std::to_string(48 << 20));
    EXPECT_EQ(read(sandbox::Controller::kMemory, "memory.swap.max"), "0");
    EXPECT_EQ(read(sandbox::Controller::kMemory, "memory.oom.group"), "1");
    EXPECT_EQ(read(sandbox::Controller::kCpu, "cpu.max"), "50000 100000");
    EXPECT_EQ(read(sandbox::Controller::kPids, "pids.max"), "64");
  } else {
    std::cout << "cgroup v1 host (" << layout_.Describe()
              << "): the v2 spec is checked by RuntimeSpecTest.CgroupV2Spec…\n";
    EXPECT_EQ(read(sandbox::Controller::kMemory, "memory.limit_in_bytes"),
              std::to_string(48 << 20));
    EXPECT_EQ(read(sandbox::Controller::kMemory, "memory.memsw.limit_in_bytes"),
              std::to_string(48 << 20));
    EXPECT_EQ(read(sandbox::Controller::kCpu, "cpu.cfs_quota_us"), "50000");
    EXPECT_EQ(read(sandbox::Controller::kCpu, "cpu.cfs_period_us"), "100000");
    EXPECT_EQ(read(sandbox::Controller::kPids, "pids.max"), "64");
  }
  ASSERT_TRUE(launcher_->Stop(t.id, 100).ok());
  auto exit = launcher_->Wait(shim, t.dir);
  ASSERT_TRUE(exit.ok());
}

TEST_F(OciRuntimeTest, NetworkNoneCannotReachTheHostsLoopback) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string port = std::to_string(ntohs(addr.sin_port));
  // Accepts and closes whatever connects, so a connected client ends.
  std::atomic<bool> stop{false};
  std::atomic<int> accepted{0};
  std::thread acceptor([&] {
    while (!stop) {
      pollfd p{listener, POLLIN, 0};
      if (poll(&p, 1, 50) == 1) {
        int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          ++accepted;
          close(c);
        }
      }
    }
  });
  std::string cmd = "echo probe | nc -w 2 127.0.0.1 " + port + " && echo CONNECTED";

  Task none = Prepare("netnone", {"/bin/sh", "-c", cmd});
  std::string log;
  ContainerExit exit = Run(none, &log);
  EXPECT_EQ(log.find("CONNECTED"), std::string::npos) << log;
  EXPECT_NE(exit.exit_code, 0) << log;
  EXPECT_EQ(accepted, 0);

  // Control: the same command in the host's network namespace does connect.
  Task host =
      Prepare("nethost", {"/bin/sh", "-c", cmd},
              [](ContainerRequest& in, ContainerFactoryOptions&) { in.network = Network::kHost; });
  exit = Run(host, &log);
  EXPECT_NE(log.find("CONNECTED"), std::string::npos) << exit.reason << log;
  stop = true;
  acceptor.join();
  close(listener);
  EXPECT_EQ(accepted, 1) << "only the host-network task reached the listener";
}

TEST_F(OciRuntimeTest, PlainCommandRunsOnTheHostRootReadOnly) {
  // A host directory the task is given read-only, holding a file the agent hides (its node
  // token, say) beside one it may read. Not under /tmp: the task's /tmp is its own.
  std::string agent_etc = testing::MakeScratchDir("/run/gpupool-ocitest-etc-");
  std::ofstream(agent_etc + "/agent.yaml") << "token: s3cret-node-token\n";
  std::ofstream(agent_etc + "/public.txt") << "readable\n";
  chmod(agent_etc.c_str(), 0755);
  chmod((agent_etc + "/agent.yaml").c_str(), 0644);
  chmod((agent_etc + "/public.txt").c_str(), 0644);
  Task t = Prepare(
      "plain",
      {"/bin/sh", "-c",
       "cat /etc/debian_version >/dev/null && echo ETC-READABLE; "
       "touch /usr/gpupool-write-test 2>/dev/null && echo USR-WRITABLE; "
       "for d in /root /home /var /srv /work; do test -e $d && echo VISIBLE:$d; done; "
       // Of the agent's task directories only the way to its own work dir (its cwd) exists.
       "echo TASKS:$(ls -A " +
           tasks_ + ") OWN:$(ls -A " + tasks_ +
           "/plain) CWD:$(pwd); "
           "cat " +
           agent_etc + "/public.txt " + agent_etc +
           "/agent.yaml; "
           "touch /tmp/ok && echo TMP-WRITABLE"},
      [&](ContainerRequest& in, ContainerFactoryOptions& o) {
        in.volumes.push_back(BindMount{agent_etc, agent_etc, true});
        o.hide_paths.push_back(agent_etc + "/agent.yaml");
      },
      /*host_root=*/true);
  std::string log;
  ContainerExit exit = Run(t, &log);
  std::error_code ec;
  fs::remove_all(agent_etc, ec);
  EXPECT_EQ(exit.exit_code, 0) << exit.reason << log;
  EXPECT_NE(log.find("ETC-READABLE"), std::string::npos) << log;
  EXPECT_NE(log.find("TMP-WRITABLE"), std::string::npos) << log;
  EXPECT_EQ(log.find("USR-WRITABLE"), std::string::npos) << log;
  EXPECT_EQ(log.find("VISIBLE:"), std::string::npos) << log;
  EXPECT_NE(log.find("TASKS:plain OWN:work CWD:" + tasks_ + "/plain/work\n"), std::string::npos)
      << log;
  EXPECT_NE(log.find("readable"), std::string::npos) << log;
  EXPECT_EQ(log.find("s3cret-node-token"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists("/usr/gpupool-write-test"));
}

}  // namespace
}  // namespace gpupool::agent::oci

namespace gpupool::agent::oci {
namespace {

TEST_F(OciRuntimeTest, OnlyTheGrantedDeviceIsThere) {
  // Two fake GPUs (NVIDIA's major 195, no driver behind them on this host): one granted.
  std::string gpu0 = "/dev/gpupool-test-gpu0-" + std::to_string(getpid());
  std::string gpu1 = "/dev/gpupool-test-gpu1-" + std::to_string(getpid());
  ASSERT_EQ(mknod(gpu0.c_str(), S_IFCHR | 0666, makedev(195, 0)), 0) << strerror(errno);
  ASSERT_EQ(mknod(gpu1.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0) << strerror(errno);
  auto granted = DeviceNodeFor(gpu0);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  Task t =
      Prepare("devices",
              {"/bin/sh", "-c",
               "cat " + gpu0 + " 2>&1; test -e " + gpu1 + " && echo GPU1-VISIBLE; ls /dev"},
              [&](ContainerRequest& in, ContainerFactoryOptions&) { in.device_files = {gpu0}; });
  std::string log;
  ContainerExit exit = Run(t, &log);
  unlink(gpu0.c_str());
  unlink(gpu1.c_str());
  // The granted node opens as far as the kernel goes (no driver: ENXIO), so the device cgroup
  // and the mounts let it through; the other one is not there at all.
  EXPECT_NE(log.find("No such device or address"), std::string::npos) << log;
  EXPECT_EQ(log.find("Operation not permitted"), std::string::npos) << log;
  EXPECT_EQ(log.find("GPU1-VISIBLE"), std::string::npos) << log;
  EXPECT_NE(log.find(gpu0.substr(5)), std::string::npos) << log;
  EXPECT_EQ(exit.exit_code, 0) << exit.reason;
}

TEST_F(OciRuntimeTest, AFailedPrepareNamesItsStepAndKeepsNothing) {
  ContainerFactoryOptions o;
  o.store = *store_;
  o.uids = uids_;
  o.launcher = launcher_options_;
  o.cgroup_parent = "/gpupool-test";
  ContainerRequest r;
  r.id = "gpupool-test-nothing-" + std::to_string(getpid());
  r.tenant = "tenant-nothing";
  r.task_dir = tasks_ + "/nothing";
  fs::create_directories(r.task_dir);
  r.image = registry_->host() + "/test/does-not-exist:1";
  auto missing = ContainerFactory(o).Prepare(r);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_EQ(missing.status().message().rfind("image: ", 0), 0u) << missing.status().message();

  r.image = registry_->host() + "/test/runtime:1";
  r.device_files = {tasks_ + "/not-a-device"};
  std::ofstream(r.device_files[0]) << "plain file";
  auto bad_device = ContainerFactory(o).Prepare(r);
  EXPECT_EQ(bad_device.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_device.status().message().find("not a device file"), std::string::npos)
      << bad_device.status().message();
  // Undone: the uid is back, the overlay unmounted.
  EXPECT_EQ(uids_->pool_in_use(), 0);
  std::string mounts = testing::ReadWholeFile("/proc/self/mountinfo");
  EXPECT_EQ(mounts.find(r.task_dir + "/rootfs"), std::string::npos);
}

TEST_F(OciRuntimeTest, ContainerDiesWithItsShim) {
  Task t = Prepare("orphan", {"/bin/sh", "-c", "echo up; sleep 60"});
  const pid_t shim = StartUntil(t, "up");
  ASSERT_GT(shim, 0);
  auto init = launcher_->InitPid(t.id);
  ASSERT_TRUE(init.ok());
  // The task runner's stop escalation: SIGKILL to the shim's process group.
  kill(-shim, SIGKILL);
  auto lost = launcher_->Wait(shim, t.dir);
  EXPECT_EQ(lost.status().code(), StatusCode::kAborted) << lost.status().ToString();
  // The watchdog deleted the container: its init is gone, runc no longer knows it.
  EXPECT_TRUE(testing::WaitFor(
      [&] { return launcher_->InitPid(t.id).status().code() == StatusCode::kNotFound; }));
  std::string stat = testing::ReadWholeFile("/proc/" + std::to_string(*init) + "/stat");
  EXPECT_TRUE(stat.empty() || stat.find(") Z ") != std::string::npos) << stat;
}

TEST_F(OciRuntimeTest, DeleteAllClearsContainersNoShimRuns) {
  Task t = Prepare("stray", {"/bin/sh", "-c", "sleep 60"});
  // Created but never started, and no shim: what a crash right after `runc create` leaves.
  // (stdio to /dev/null: the container would inherit runc's and hold them open)
  auto created = RunTool({.argv = {"sh", "-c",
                                   "exec runc --root " + tasks_ +
                                       "/runc-state create "
                                       "--bundle " +
                                       t.dir + " " + t.id + " >/dev/null 2>&1"},
                          .env = {},
                          .pass_fd = -1,
                          .timeout_ms = 30'000,
                          .stdout_fd = -1});
  ASSERT_TRUE(created.ok() && created->ok()) << (created.ok() ? created->Describe() : "");
  ASSERT_TRUE(launcher_->InitPid(t.id).ok());
  auto deleted = launcher_->DeleteAll("gpupool-test-stray-");
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(launcher_->InitPid(t.id).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpupool::agent::oci
