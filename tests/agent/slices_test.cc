// The agent holds a task to its slice (issue 24): TaskRunner with SliceLedgers starts each task
// that shares a GPU with the real CUDA interposer preloaded and the task's ledger running in the
// agent, over the fake CUDA driver (tests/fakes/cuda). A CUDA program (the interposer tests'
// probe) gets its grant to the byte and not one byte more; cuMemGetInfo shows the slice; a whole
// GPU gets no interposer; a missing library is refused by name. Sandboxed (root, in a container
// under runc: the one sandbox path), the ledger's socket directory is bound read-only into the
// task, which can neither move nor replace it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/images.h"
#include "agent/interposer/ledger/ledger_client.h"
#include "agent/sandbox/cgroup.h"
#include "agent/slices/slice_ledgers.h"
#include "agent/task_runner.h"
#include "tests/agent/fake_gpu.h"
#include "tests/agent/sandbox_fixture.h"

namespace gpupool::agent {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

class SliceTest : public ::testing::Test {
 protected:
  void Start(bool sandboxed, bool watchdog = false) {
    data_dir_ = testing::TempDir("/tmp/gpupool-slice-data-");
    state_dir_ = testing::TempDir("/run/gpupool-slice-state-");
    ASSERT_TRUE(testing::MakeFakeGpu(state_dir_));
    slice_options_.library = GPUPOOL_INTERPOSER_LIB;
    if (watchdog) {
      // The fake NVML reads the fake driver's truth, found through the agent's environment.
      setenv("GPUPOOL_FAKE_CUDA_STATE", state_dir_.c_str(), 1);
      slice_options_.watchdog_nvml = GPUPOOL_FAKE_NVML_LIB;
      slice_options_.watchdog_interval_ms = 100;
    }
    options_.data_dir = data_dir_;
    options_.default_grace_ms = 300;
    if (sandboxed) {
      sandbox_options_.enabled = true;
      sandbox_options_.cgroup_parent = "gpupool-slice-test-" + std::to_string(getpid());
      sandbox_options_.uid_pool_first = 62000;
      sandbox_options_.uid_pool_count = 50;
      // The probe and the fake driver, from the build tree, read-only.
      sandbox_options_.host_dirs = {"/usr", "/etc",
                                    std::filesystem::path(GPUPOOL_PROBE).parent_path().string(),
                                    GPUPOOL_FAKE_CUDA_DIR};
      cgroup_parent_ = sandbox_options_.cgroup_parent;
    }
    NewRunner();
  }

  // A runner as a freshly started agent builds it: its own ledgers (and sandbox).
  void NewRunner() {
    auto slices = SliceLedgers::Create(slice_options_);
    ASSERT_TRUE(slices.ok()) << slices.status().ToString();
    options_.slices = std::move(slices).value();
    if (sandbox_options_.enabled) {
      auto box = sandbox::Sandbox::Create(sandbox_options_);
      ASSERT_TRUE(box.ok()) << box.status().ToString();
      options_.sandbox = *box;
      ImageOptions io;
      io.shim = GPUPOOL_OCI_SHIM;
      io.simulated_gpu_state = state_dir_;  // the fake GPU's memory, as its device node would be
      auto containers = OpenContainers(io, *box, data_dir_, "");
      ASSERT_TRUE(containers.ok()) << containers.status().ToString();
      options_.containers = *containers;
    }
    runner_ = std::make_unique<TaskRunner>(options_);
    ended_.Attach(*runner_);
  }

  // The agent restarts: the runner leaves its tasks running and goes, its ledgers with it; the
  // next one re-adopts what it left.
  TaskRunner::Recovery Restart() {
    runner_->Leave();
    runner_.reset();
    options_.slices.reset();
    options_.sandbox.reset();
    options_.containers.reset();
    NewRunner();
    return runner_->Recover("node-a");
  }

  void TearDown() override {
    runner_.reset();
    options_ = {};
    std::error_code ec;
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_, ec);
    if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_, ec);
    testing::RemoveCgroupParent(cgroup_parent_ + "-containers");
  }

  // A task holding `vram_mib` of the 64 MiB device (a slice when below 64) running `argv`.
  TaskSpec Spec(const std::string& id, int64_t vram_mib, std::vector<std::string> argv) {
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = id;
    s.job_id = "job-1";
    s.tenant = "acme";
    s.attempt = 1;
    s.argv = std::move(argv);
    testing::OnFakeGpu(&s, state_dir_, GPUPOOL_FAKE_CUDA_DIR, vram_mib,
                       vram_mib < 64 ? 50'000 : 100'000, vram_mib < 64 ? 50 : 100);
    return s;
  }

  TaskStatus Run(const TaskSpec& spec) {
    auto st = runner_->Start(spec);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) return {};
    if (st->terminal()) return *st;
    return ended_.Wait(spec.task_id, std::chrono::seconds(60));
  }

  void ReadoptAcrossARestart();

  std::vector<std::string> Probe(std::vector<std::string> args) {
    args.insert(args.begin(), GPUPOOL_PROBE);
    return args;
  }

  std::string data_dir_, state_dir_, cgroup_parent_;
  SliceOptions slice_options_;
  sandbox::SandboxOptions sandbox_options_;
  TaskRunnerOptions options_;
  std::unique_ptr<TaskRunner> runner_;
  testing::EndedTasks ended_;
};

TEST_F(SliceTest, ASliceGetsItsGrantToTheByteAndNotOneByteMore) {
  Start(/*sandboxed=*/false);
  const std::string grant = std::to_string(32 * kMiB);
  TaskStatus fits = Run(Spec("fits", 32, Probe({"alloc", "plain", grant})));
  EXPECT_EQ(fits.phase, TaskPhase::kSucceeded) << fits.output_tail;
  EXPECT_NE(fits.output_tail.find("rc=0"), std::string::npos) << fits.output_tail;
  TaskStatus over = Run(Spec("over", 32, Probe({"alloc", "plain", std::to_string(32 * kMiB + 1)})));
  EXPECT_NE(over.output_tail.find("rc=2"), std::string::npos)  // CUDA_ERROR_OUT_OF_MEMORY
      << over.output_tail;
  TaskStatus info = Run(Spec("info", 32, Probe({"info"})));
  EXPECT_NE(info.output_tail.find("total=" + grant), std::string::npos) << info.output_tail;
  // The ledgers are gone with their tasks.
  EXPECT_FALSE(std::filesystem::exists(data_dir_ + "/tasks/fits.1/ledger"));
}

TEST_F(SliceTest, AWholeGpuRunsWithoutTheInterposer) {
  Start(/*sandboxed=*/false);
  TaskStatus st = Run(Spec("whole", 64, {"/bin/sh", "-c", "echo preload=[$LD_PRELOAD]"}));
  EXPECT_NE(st.output_tail.find("preload=[]"), std::string::npos) << st.output_tail;
  TaskStatus slice = Run(Spec("slice", 16, {"/bin/sh", "-c", "echo preload=[$LD_PRELOAD]"}));
  EXPECT_NE(slice.output_tail.find(std::string("preload=[") + GPUPOOL_INTERPOSER_LIB + "]"),
            std::string::npos)
      << slice.output_tail;
}

// The agent's watchdog (issue 24): a process of a slice that allocates around the interposer (a
// child with LD_PRELOAD unset) is killed within a second, and its task fails saying why — not as
// a device fault (the task's own doing, never requeued as the node's). An honest slice beside it
// is left alone.
TEST_F(SliceTest, TheWatchdogKillsAProcessAroundTheInterposerAndFailsItsTask) {
  Start(/*sandboxed=*/false, /*watchdog=*/true);
  const std::string twice = std::to_string(32 * kMiB);  // twice the 16 MiB grant
  const std::string probe = GPUPOOL_PROBE;
  auto honest = runner_->Start(
      Spec("honest", 16,
           {"/bin/sh", "-c", "sleep 3 | " + probe + " alloc plain " + std::to_string(8 * kMiB)}));
  ASSERT_TRUE(honest.ok()) << honest.status().ToString();
  const auto start = std::chrono::steady_clock::now();
  TaskStatus bypass = Run(
      Spec("bypass", 16,
           {"/bin/sh", "-c", "sleep 30 | env -u LD_PRELOAD " + probe + " alloc plain " + twice}));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(bypass.phase, TaskPhase::kFailed);
  EXPECT_NE(bypass.reason.find("gpu slice watchdog"), std::string::npos) << bypass.reason;
  EXPECT_NE(bypass.reason.find("bypassed the interposer"), std::string::npos) << bypass.reason;
  EXPECT_FALSE(bypass.device_fault);
  EXPECT_LT(took, std::chrono::seconds(5)) << "not the 30 s the task would have run";
  TaskStatus ok = ended_.Wait("honest", std::chrono::seconds(60));
  EXPECT_EQ(ok.phase, TaskPhase::kSucceeded) << ok.reason << "\n" << ok.output_tail;
  const auto caps = runner_->options().slices->Capabilities();
  EXPECT_TRUE(std::any_of(caps.begin(), caps.end(), [](const sandbox::Capability& c) {
    return c.name == "bypass_watchdog" && c.enforced;
  }));
}

// The spill a ledger metered before an agent restart is billed with what the next agent's
// ledger meters: the leaving agent writes it beside the ledger's directory (kept), and Start()
// for the same directory carries it on.
TEST(SliceLedgersTest, SpillMeteredBeforeARestartIsCarriedOn) {
  SliceOptions options;
  options.library = GPUPOOL_INTERPOSER_LIB;
  const std::string task_dir = testing::TempDir("/tmp/gpupool-slice-spill-");
  const std::string dir = task_dir + "/ledger";
  TaskSpec spec;
  spec.task_id = "t";
  spec.devices = {{"GPU-0", 0, /*vram_mib=*/96, /*thread_percentage=*/50, 0, /*device=*/64}};
  {
    auto slices = SliceLedgers::Create(options);
    ASSERT_TRUE(slices.ok()) << slices.status().ToString();
    auto env = (*slices)->Start("t.1", dir, spec);
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    ledger::LedgerClient c;
    ASSERT_TRUE(c.Connect((dir + "/ledger.sock").c_str()));
    ledger::Response r;
    ASSERT_TRUE(c.Call(ledger::Op::kReserve, ledger::Kind::kSpill, 32 * kMiB, &r));
    ASSERT_EQ(r.status, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  }  // the agent leaves: ledgers stop, directories and spill stay
  ASSERT_TRUE(std::filesystem::exists(dir));
  auto next = SliceLedgers::Create(options);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE((*next)->Start("t.1", dir, spec).ok());
  const int64_t mib_s = (*next)->Stop("t.1");
  EXPECT_GE(mib_s, 64) << "32 MiB spilled for 2 s before the restart";
  EXPECT_LT(mib_s, 96);
  EXPECT_FALSE(std::filesystem::exists(dir)) << "a task's end removes its ledger directory";
  EXPECT_FALSE(std::filesystem::exists(dir + ".spill"));
  std::filesystem::remove_all(task_dir);
}

// Starts the ledger of task `key` for a 50 % slice of `gpu` (a fair pool's when `fair`) and
// reports 30 ms of GPU time on it, from `start_ns` (0: no position); returns the wait the ledger
// asks for. At a 50 % cap with a full 20 ms bucket, 30 ms charged in full owe 10 ms: a 20 ms
// wait (10 ms where the slice may use the whole device); charged half, nothing.
uint64_t WaitAfter30ms(SliceLedgers& slices, const std::string& root, const std::string& key,
                       const std::string& gpu, bool fair, uint64_t start_ns) {
  TaskSpec t;
  t.devices = {{gpu, 0, /*vram_mib=*/16, /*thread_percentage=*/50, 0, /*device=*/64}};
  t.compute_fair = fair;
  const std::string dir = root + "/" + key;
  EXPECT_TRUE(slices.Start(key, dir, t).ok());
  ledger::LedgerClient c;
  EXPECT_TRUE(c.Connect((dir + "/ledger.sock").c_str()));
  ledger::Response r{};
  EXPECT_TRUE(c.Call(ledger::Op::kCompute, ledger::Kind::kNone, 30'000'000, &r,
                     ledger::kReconnectWaitMs, start_ns));
  return r.wait_ns;
}

// Two slices of one device are charged as they shared it: the second tenant's report of a span
// the first was busy over too costs it half, through the device's arbiter. A tenant of another
// device pays its span in full.
TEST(SliceLedgersTest, TenantsOfOneDeviceShareItsTimeSlicedMoments) {
  SliceOptions options;
  options.library = GPUPOOL_INTERPOSER_LIB;
  const std::string root = testing::TempDir("/tmp/gpupool-slice-arbiter-");
  auto slices = SliceLedgers::Create(options);
  ASSERT_TRUE(slices.ok()) << slices.status().ToString();
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t start = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
                         static_cast<uint64_t>(ts.tv_nsec) -
                         40'000'000;  // the same 30 ms for every tenant
  EXPECT_GE(WaitAfter30ms(**slices, root, "a", "GPU-0", false, start), 19'000'000u)
      << "alone so far: all of it";
  EXPECT_EQ(WaitAfter30ms(**slices, root, "b", "GPU-0", false, start), 0u)
      << "the same moments as a: half of them";
  EXPECT_GE(WaitAfter30ms(**slices, root, "c", "GPU-1", false, start), 19'000'000u)
      << "another device: all of it";
  for (const char* key : {"a", "b", "c"}) (*slices)->Stop(key);
  std::filesystem::remove_all(root);
}

// A pool that shares compute fairly (StartTask.compute_fair) gives its slices fair ledgers: a
// slice alone on its device bursts into the idle rest (its bucket refills at the whole device),
// where a strict one is held to its share.
TEST(SliceLedgersTest, AFairPoolsSliceBurstsIntoItsIdleDevice) {
  SliceOptions options;
  options.library = GPUPOOL_INTERPOSER_LIB;
  const std::string root = testing::TempDir("/tmp/gpupool-slice-fair-");
  auto slices = SliceLedgers::Create(options);
  ASSERT_TRUE(slices.ok()) << slices.status().ToString();
  const uint64_t strict = WaitAfter30ms(**slices, root, "strict", "GPU-0", false, 0);
  const uint64_t fair = WaitAfter30ms(**slices, root, "fair", "GPU-1", true, 0);
  EXPECT_GE(strict, 19'000'000u);
  EXPECT_LE(fair, 11'000'000u);
  EXPECT_GE(fair, 9'000'000u);
  for (const char* key : {"strict", "fair"}) (*slices)->Stop(key);
  std::filesystem::remove_all(root);
}

TEST(SliceLedgersTest, AMissingLibraryIsRefusedByName) {
  SliceOptions options;
  options.library = "/nonexistent/libgpupool-cuda.so";
  auto slices = SliceLedgers::Create(options);
  ASSERT_FALSE(slices.ok());
  EXPECT_NE(slices.status().message().find("'/nonexistent/libgpupool-cuda.so' does not exist"),
            std::string::npos)
      << slices.status().message();
  for (const sandbox::Capability& c : SliceLedgers::DisabledCapabilities("why")) {
    EXPECT_FALSE(c.enforced) << c.name;
  }
}

// Sandboxed: the task reaches its ledger through a socket whose directory is bound read-only into
// its container, which it can neither rename nor empty, so it cannot swap in a ledger of its own;
// the grant holds as unsandboxed.
TEST_F(SliceTest, SandboxedTheTaskCannotReplaceItsLedger) {
  if (const std::string why = testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
  Start(/*sandboxed=*/true);
  TaskStatus hostile = Run(Spec(
      "hostile", 32,
      {"/bin/sh", "-c",
       "exec 2>&1; d=$(dirname \"$GPUPOOL_LEDGER_SOCKET\"); mv \"$d\" \"$d.moved\" && echo MOVED; "
       "rm -f \"$GPUPOOL_LEDGER_SOCKET\" && echo UNLINKED; (: > \"$d/fake.sock\") && echo "
       "PLANTED; test -S \"$GPUPOOL_LEDGER_SOCKET\" && echo socket-ok"}));
  const std::string& out = hostile.output_tail;
  EXPECT_EQ(out.find("MOVED"), std::string::npos) << out;
  EXPECT_EQ(out.find("UNLINKED"), std::string::npos) << out;
  EXPECT_EQ(out.find("PLANTED"), std::string::npos) << out;
  EXPECT_NE(out.find("socket-ok"), std::string::npos) << out;
  TaskStatus over = Run(Spec("over", 32, Probe({"alloc", "plain", std::to_string(32 * kMiB + 1)})));
  EXPECT_NE(over.output_tail.find("rc=2"), std::string::npos) << over.output_tail;
  TaskStatus fits = Run(Spec("fits", 32, Probe({"alloc", "plain", std::to_string(32 * kMiB)})));
  EXPECT_NE(fits.output_tail.find("rc=0"), std::string::npos) << fits.output_tail;
}

// Issue 30 with issue 24: an agent restart keeps a slice task running and held to its grant.
// The task holds 20 of its 32 MiB when the agent leaves; the next agent re-adopts it with a new
// ledger in the same directory, where the task's process reclaims its 20 MiB: 10 MiB more fit,
// 3 MiB more do not, and the task succeeds, having run once.
void SliceTest::ReadoptAcrossARestart() {
  const std::string task_dir = data_dir_ + "/tasks/across.1";
  // The task's working directory: its task dir, or its container's work dir in it.
  const std::string go = (sandbox_options_.enabled ? task_dir + "/work" : task_dir) + "/go";
  auto started = runner_->Start(Spec("across", 32,
                                     Probe({"alloc-across", "go", std::to_string(20 * kMiB),
                                            std::to_string(10 * kMiB), std::to_string(3 * kMiB)})));
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_FALSE(started->terminal()) << started->reason;
  auto output = [&] {
    std::ifstream in(task_dir + "/output.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (int i = 0; i < 1000 && output().find("rc=0") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(output(), "rc=0\n");
  const std::optional<TaskStatus> running = runner_->Get("across");
  ASSERT_TRUE(running.has_value());

  const TaskRunner::Recovery r = Restart();
  EXPECT_EQ(r.adopted, 1);
  EXPECT_EQ(r.killed, 0);
  const std::optional<TaskStatus> adopted = runner_->Get("across");
  ASSERT_TRUE(adopted.has_value());
  EXPECT_EQ(adopted->pid, running->pid) << "the same process, not a second run";
  std::ofstream(go) << "go\n";
  TaskStatus end = ended_.Wait("across", std::chrono::seconds(60));
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded) << end.reason << end.output_tail;
  EXPECT_EQ(output(), "rc=0\nrc=0\nrc=2\n") << "20 MiB kept, 10 more fit, 3 more are refused";
}

TEST_F(SliceTest, ARestartedAgentReadoptsASliceTaskThatStaysHeldToItsGrant) {
  Start(/*sandboxed=*/false);
  ReadoptAcrossARestart();
}

TEST_F(SliceTest, SandboxedARestartedAgentReadoptsASliceTaskThroughItsMountedLedger) {
  if (const std::string why = testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
  Start(/*sandboxed=*/true);
  ReadoptAcrossARestart();
}

}  // namespace
}  // namespace gpupool::agent
