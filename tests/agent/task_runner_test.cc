// TaskRunner with real child processes (/bin/sh -c): the grant environment, exit codes, signal
// death, stop of a process group (SIGTERM → grace → SIGKILL), max runtime, log capture,
// idempotency and reaping.
#include "agent/task_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "agent/proto_convert.h"

namespace gpupool::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string TempDir() {
  char tmpl[] = "/tmp/gpupool-agent-test-XXXXXX";
  return mkdtemp(tmpl);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A runner whose terminal statuses are collected for the test to wait on.
class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    TaskRunnerOptions o;
    o.data_dir = dir_;
    o.default_grace_ms = 300;
    runner_ = std::make_unique<TaskRunner>(o);
    runner_->SetListener("node-a", [this](const TaskStatus& st) {
      std::lock_guard lock(mu_);
      ended_[st.task_id] = st;
      ++ends_;
      cv_.notify_all();
    });
  }
  void TearDown() override {
    runner_.reset();
    std::filesystem::remove_all(dir_);
  }

  TaskSpec Spec(const std::string& id, const std::string& script) {
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = id;
    s.job_id = "job-1";
    s.tenant = "acme/ml";
    s.attempt = 1;
    s.argv = {"/bin/sh", "-c", script};
    return s;
  }

  TaskStatus WaitEnd(const std::string& id, milliseconds timeout = milliseconds(10'000)) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, timeout, [&] { return ended_.count(id) > 0; }))
        << "task " << id << " did not end";
    return ended_[id];
  }

  std::string dir_;
  std::unique_ptr<TaskRunner> runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, TaskStatus> ended_;
  int ends_ = 0;
};

// Worked example: two H100 (989.5 TFLOPS = 989500 milli-TFLOPS each).
//   device 0: a quarter → 247375 mTF, 20480 MiB, thread percentage 25
//   device 1: a half    → 494750 mTF, 40960 MiB, thread percentage 50
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is one value per process: max(25, 50) = 50.
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT uses ordinals within CUDA_VISIBLE_DEVICES: 0=20480M,1=40960M.
// GPUPOOL_TFLOPS = (247375 + 494750) / 1000 = 742.125; GPUPOOL_VRAM_MIB = 20480 + 40960 = 61440.
TaskSpec WorkedExample() {
  TaskSpec s;
  s.task_id = "t-42";
  s.job_id = "j-7";
  s.tenant = "acme/ml";
  s.attempt = 2;
  s.devices = {{"GPU-sim-n-0", 247'375, 20'480, 25}, {"GPU-sim-n-1", 494'750, 40'960, 50}};
  return s;
}

TEST(GrantEnvTest, WorkedExample) {
  const auto env = TaskRunner::GrantEnv(WorkedExample());
  const std::map<std::string, std::string> want = {
      {"CUDA_VISIBLE_DEVICES", "GPU-sim-n-0,GPU-sim-n-1"},
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=20480M,1=40960M"},
      {"GPUPOOL_TASK_ID", "t-42"},
      {"GPUPOOL_JOB_ID", "j-7"},
      {"GPUPOOL_TENANT", "acme/ml"},
      {"GPUPOOL_ATTEMPT", "2"},
      {"GPUPOOL_TFLOPS", "742.125"},
      {"GPUPOOL_VRAM_MIB", "61440"},
  };
  EXPECT_EQ(env, want);
}

TEST(GrantEnvTest, NoDevicesHidesAllGpus) {
  TaskSpec s;
  s.task_id = "t";
  const auto env = TaskRunner::GrantEnv(s);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), 0u);
  EXPECT_EQ(env.at("GPUPOOL_TFLOPS"), "0");
  EXPECT_EQ(env.at("GPUPOOL_VRAM_MIB"), "0");
}

// A StartTask that leaves thread_percentage 0 gets ceil(grant × 100 / device):
//   247375 × 100 / 989500 = 25 exactly → 25;  100000 × 100 / 989500 = 10.1 → 11;
//   a grant of 0 mTF (whole device) → 100; a MIG instance of 3g.40gb (424071 mTF) fully → 100.
TEST(GrantEnvTest, ThreadPercentageFromTflops) {
  Inventory inv;
  inv.devices = {{"GPU-0", "H100-SXM", 0, 81920, 989'500, "", "", true, 0, {}, 0},
                 {"MIG-0-0", "H100-SXM", 0, 40960, 424'071, "3g.40gb", "GPU-0", true, 0, {}, 0}};
  v1::StartTask st;
  st.set_task_id("t");
  auto add = [&](const std::string& uuid, int64_t milli) {
    auto* g = st.add_devices();
    g->set_uuid(uuid);
    g->set_milli_tflops(milli);
  };
  add("GPU-0", 247'375);
  add("GPU-0", 100'000);
  add("GPU-0", 0);
  add("MIG-0-0", 424'071);
  const TaskSpec spec = FromProto(st, "n", inv);
  ASSERT_EQ(spec.devices.size(), 4u);
  EXPECT_EQ(spec.devices[0].thread_percentage, 25);
  EXPECT_EQ(spec.devices[1].thread_percentage, 11);
  EXPECT_EQ(spec.devices[2].thread_percentage, 100);
  EXPECT_EQ(spec.devices[3].thread_percentage, 100);
}

// The node's driver files go with a GPU task (an image task binds them) and not with a CPU one.
TEST(GrantEnvTest, AGpuTaskCarriesTheNodesDriverFilesACpuTaskNone) {
  Inventory inv;
  inv.devices = {{"GPU-0", "H100-SXM", 0, 81920, 989'500, "", "", true, 0, {"/dev/nvidia0"}, 0}};
  inv.control_device_files = {"/dev/nvidiactl"};
  inv.driver_files = {"/usr/lib/x86_64-linux-gnu/libcuda.so.1"};
  v1::StartTask st;
  st.set_task_id("t");
  EXPECT_TRUE(FromProto(st, "n", inv).driver_files.empty());
  st.add_devices()->set_uuid("GPU-0");
  const TaskSpec gpu = FromProto(st, "n", inv);
  EXPECT_EQ(gpu.driver_files, inv.driver_files);
  EXPECT_EQ(gpu.device_files, (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidiactl"}));
}

TEST_F(RunnerTest, ChildSeesGrantEnvAndTaskEnvAndWorkingDir) {
  TaskSpec s = WorkedExample();
  s.owner = "node-a";
  s.argv = {"/bin/sh", "-c",
            "echo VIS=$CUDA_VISIBLE_DEVICES PCT=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE "
            "MEM=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT TF=$GPUPOOL_TFLOPS V=$GPUPOOL_VRAM_MIB "
            "T=$GPUPOOL_TASK_ID J=$GPUPOOL_JOB_ID TEN=$GPUPOOL_TENANT MINE=$MY_VAR; pwd"};
  // The task's env cannot override the grant.
  s.env = {{"MY_VAR", "hello"}, {"CUDA_VISIBLE_DEVICES", "all"}};
  ASSERT_TRUE(runner_->Start(s).ok());
  const TaskStatus st = WaitEnd("t-42");
  EXPECT_EQ(st.phase, TaskPhase::kSucceeded);
  EXPECT_EQ(st.output_tail,
            "VIS=GPU-sim-n-0,GPU-sim-n-1 PCT=50 MEM=0=20480M,1=40960M TF=742.125 V=61440 T=t-42 "
            "J=j-7 TEN=acme/ml MINE=hello\n" +
                std::filesystem::canonical(dir_).string() + "/tasks/t-42.2\n");
}

TEST_F(RunnerTest, ExitCodes) {
  ASSERT_TRUE(runner_->Start(Spec("ok", "exit 0")).ok());
  ASSERT_TRUE(runner_->Start(Spec("three", "exit 3")).ok());
  const TaskStatus ok = WaitEnd("ok");
  EXPECT_EQ(ok.phase, TaskPhase::kSucceeded);
  EXPECT_EQ(ok.exit_code, 0);
  const TaskStatus three = WaitEnd("three");
  EXPECT_EQ(three.phase, TaskPhase::kFailed);
  EXPECT_EQ(three.exit_code, 3);
  EXPECT_EQ(three.signal, 0);
  EXPECT_EQ(three.reason, "exit code 3");
  EXPECT_FALSE(three.oom);
}

TEST_F(RunnerTest, UnconfinedATaskWhosePoolAsksForNoNetworkFailsInsteadOfSharingTheNodes) {
  TaskSpec spec = Spec("nonet", "echo ran");
  spec.network = net::NetworkMode::kNone;
  auto started = runner_->Start(spec);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  const TaskStatus st = started->terminal() ? *started : WaitEnd("nonet");
  EXPECT_EQ(st.phase, TaskPhase::kFailed);
  EXPECT_EQ(st.exit_code, 126);
  EXPECT_EQ(st.reason, "network: none: needs the sandbox (sandbox.enabled is off on this node)");
  EXPECT_EQ(st.output_tail.find("ran"), std::string::npos);
  // A pool that names no network: an unconfined node runs it on its own network, as ever.
  ASSERT_TRUE(runner_->Start(Spec("plain", "echo ran")).ok());
  EXPECT_EQ(WaitEnd("plain").phase, TaskPhase::kSucceeded);
}

TEST(RunnerStartTimingTest, APlainTaskReportsItsStartLatency) {
  const std::string dir = TempDir();
  std::vector<TaskStartTiming> timings;
  std::mutex mu;
  TaskRunnerOptions o;
  o.data_dir = dir;
  o.on_start = [&](const TaskStartTiming& t) {
    std::lock_guard lock(mu);
    timings.push_back(t);
  };
  {
    TaskRunner runner(o);
    TaskSpec s;
    s.owner = "node-a";
    s.task_id = "t";
    s.attempt = 1;
    s.argv = {"/bin/true"};
    ASSERT_TRUE(runner.Start(s).ok());
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(timings.size(), 1u);
  EXPECT_FALSE(timings[0].image);
  EXPECT_GT(timings[0].seconds, 0);
  EXPECT_LT(timings[0].seconds, 5);
  std::filesystem::remove_all(dir);
}

TEST_F(RunnerTest, SignalDeath) {
  ASSERT_TRUE(runner_->Start(Spec("segv", "kill -SEGV $$")).ok());
  const TaskStatus st = WaitEnd("segv");
  EXPECT_EQ(st.phase, TaskPhase::kFailed);
  EXPECT_EQ(st.signal, SIGSEGV);
  EXPECT_EQ(st.reason, "killed by signal 11 (SIGSEGV)");
}

TEST_F(RunnerTest, UnexplainedSigkillIsFlaggedOom) {
  ASSERT_TRUE(runner_->Start(Spec("oom", "kill -KILL $$")).ok());
  const TaskStatus st = WaitEnd("oom");
  EXPECT_EQ(st.signal, SIGKILL);
  EXPECT_TRUE(st.oom);
}

TEST_F(RunnerTest, ExecFailureIsAFailedTask) {
  TaskSpec s = Spec("noexec", "");
  s.argv = {"/nonexistent/program"};
  auto st = runner_->Start(s);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->phase, TaskPhase::kFailed);
  EXPECT_EQ(st->exit_code, 127);
  EXPECT_EQ(st->reason, "exec '/nonexistent/program': No such file or directory");
}

TEST_F(RunnerTest, StopWithCooperativeProcessEndsWithinGrace) {
  ASSERT_TRUE(runner_->Start(Spec("sleeper", "exec sleep 30")).ok());
  const auto t0 = steady_clock::now();
  auto st = runner_->Stop("sleeper", 1, 5'000, "cancelled by user");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->phase, TaskPhase::kRunning);  // winding down
  const TaskStatus end = WaitEnd("sleeper");
  EXPECT_LT(steady_clock::now() - t0, milliseconds(4'000));  // did not need the SIGKILL
  EXPECT_EQ(end.phase, TaskPhase::kCancelled);
  EXPECT_EQ(end.signal, SIGTERM);
  EXPECT_EQ(end.reason, "cancelled by user");
}

bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  // Reparented to a PID 1 that does not reap: a zombie is dead too.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || line.substr(paren + 2, 1) == "Z";
}

TEST_F(RunnerTest, StopKillsGroupIncludingGrandchildThatIgnoresSigterm) {
  const std::string pidfile = dir_ + "/grandchild.pid";
  // The leader and its background grandchild both ignore SIGTERM.
  ASSERT_TRUE(runner_
                  ->Start(Spec("stubborn", "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > " +
                                               pidfile + "; while :; do sleep 0.05; done' & wait"))
                  .ok());
  for (int i = 0; i < 200 && !std::filesystem::exists(pidfile); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::this_thread::sleep_for(milliseconds(50));
  const pid_t grandchild = std::stoi(ReadFile(pidfile));
  ASSERT_FALSE(ProcessGone(grandchild));
  const auto t0 = steady_clock::now();
  ASSERT_TRUE(runner_->Stop("stubborn", 0, 300, "preempted").has_value());
  const TaskStatus end = WaitEnd("stubborn");
  EXPECT_GE(steady_clock::now() - t0, milliseconds(300));  // waited the grace period
  EXPECT_EQ(end.phase, TaskPhase::kCancelled);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_EQ(end.reason, "preempted");
  for (int i = 0; i < 100 && !ProcessGone(grandchild); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(ProcessGone(grandchild));
}

TEST_F(RunnerTest, LeftoverGroupMembersAreKilledWhenLeaderExits) {
  const std::string pidfile = dir_ + "/orphan.pid";
  ASSERT_TRUE(
      runner_->Start(Spec("leaky", "sh -c 'echo $$ > " + pidfile + "; exec sleep 30' & sleep 0.2"))
          .ok());
  const TaskStatus end = WaitEnd("leaky");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded);
  const pid_t orphan = std::stoi(ReadFile(pidfile));
  for (int i = 0; i < 100 && !ProcessGone(orphan); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(ProcessGone(orphan));
}

TEST_F(RunnerTest, MaxRuntimeExceeded) {
  TaskSpec s = Spec("slow", "exec sleep 30");
  s.max_runtime_ms = 200;
  ASSERT_TRUE(runner_->Start(s).ok());
  const TaskStatus end = WaitEnd("slow");
  EXPECT_EQ(end.phase, TaskPhase::kFailed);
  EXPECT_EQ(end.reason, "max runtime exceeded");
  EXPECT_EQ(end.signal, SIGTERM);
}

TEST_F(RunnerTest, LogCaptureTailAndSlices) {
  // 100 lines of 100 bytes = 10000 bytes, then a marker on stderr.
  ASSERT_TRUE(runner_
                  ->Start(Spec("chatty",
                               "i=0; while [ $i -lt 100 ]; do printf '%099d\\n' $i; i=$((i+1)); "
                               "done; echo done-on-stderr >&2"))
                  .ok());
  const TaskStatus end = WaitEnd("chatty");
  ASSERT_EQ(end.phase, TaskPhase::kSucceeded);
  EXPECT_EQ(end.output_tail.size(), 4096u);  // tail_bytes
  EXPECT_TRUE(end.output_tail.ends_with("done-on-stderr\n"));
  auto head = runner_->ReadLog("chatty", 0, 100);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->data, std::string(99, '0') + "\n");
  EXPECT_FALSE(head->eof);
  auto second = runner_->ReadLog("chatty", 100, 100);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->data, std::string(98, '0') + "1\n");
  auto last = runner_->ReadLog("chatty", -15, 1000);  // negative: from the end
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->data, "done-on-stderr\n");
  EXPECT_EQ(last->offset, 10'000);
  EXPECT_TRUE(last->eof);
  EXPECT_EQ(runner_->ReadLog("nope", 0, 10).status().code(), StatusCode::kNotFound);
}

TEST_F(RunnerTest, IdempotentStartAndStop) {
  const std::string counter = dir_ + "/runs";
  TaskSpec s = Spec("once", "echo run >> " + counter + "; sleep 0.3");
  auto first = runner_->Start(s);
  auto again = runner_->Start(s);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(again->phase, TaskPhase::kRunning);
  EXPECT_EQ(again->pid, first->pid);
  const TaskStatus end = WaitEnd("once");
  EXPECT_EQ(end.phase, TaskPhase::kSucceeded);
  // The same attempt after it ended: its final status, nothing started.
  auto after = runner_->Start(s);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->phase, TaskPhase::kSucceeded);
  // An older attempt is ignored too.
  TaskSpec old = s;
  old.attempt = 0;
  EXPECT_EQ(runner_->Start(old)->attempt, 1);
  EXPECT_EQ(ReadFile(counter), "run\n");
  // Stop of a finished task reports its final status; of an unknown task, nothing.
  auto stopped = runner_->Stop("once", 1, 100, "x");
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->phase, TaskPhase::kSucceeded);
  EXPECT_FALSE(runner_->Stop("unknown", 0, 100, "x").has_value());
  EXPECT_FALSE(runner_->Stop("once", 7, 100, "x").has_value());  // unknown attempt
  // A newer attempt runs again.
  TaskSpec next = s;
  next.attempt = 2;
  auto second = runner_->Start(next);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->phase, TaskPhase::kRunning);
  {
    std::unique_lock lock(mu_);
    ended_.erase("once");
  }
  EXPECT_EQ(WaitEnd("once").attempt, 2);
  EXPECT_EQ(ReadFile(counter), "run\nrun\n");
}

TEST_F(RunnerTest, RepeatedStopDoesNoHarm) {
  ASSERT_TRUE(runner_->Start(Spec("twice", "exec sleep 30")).ok());
  ASSERT_TRUE(runner_->Stop("twice", 0, 2'000, "first").has_value());
  ASSERT_TRUE(runner_->Stop("twice", 0, 2'000, "second").has_value());
  const TaskStatus end = WaitEnd("twice");
  EXPECT_EQ(end.phase, TaskPhase::kCancelled);
  EXPECT_EQ(end.reason, "first");
  std::this_thread::sleep_for(milliseconds(100));
  std::lock_guard lock(mu_);
  EXPECT_EQ(ends_, 1);  // one final report
}

TEST_F(RunnerTest, RunningListsOnlyLiveTasksOfTheOwner) {
  ASSERT_TRUE(runner_->Start(Spec("live", "exec sleep 30")).ok());
  TaskSpec other = Spec("other", "exec sleep 30");
  other.owner = "node-b";
  ASSERT_TRUE(runner_->Start(other).ok());
  auto running = runner_->Running("node-a");
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].task_id, "live");
  runner_->StopAll("node-a", 1'000, "node going away");
  EXPECT_TRUE(runner_->Running("node-a").empty());
  EXPECT_EQ(runner_->Running("node-b").size(), 1u);
  EXPECT_EQ(WaitEnd("live").phase, TaskPhase::kCancelled);
}

TEST_F(RunnerTest, NoZombiesAfterManyTasks) {
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        runner_->Start(Spec("z" + std::to_string(i), "exit " + std::to_string(i % 3))).ok());
  }
  for (int i = 0; i < 20; ++i) WaitEnd("z" + std::to_string(i));
  // Every child has been reaped: nothing left to wait for.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace gpupool::agent

namespace gpupool::agent {
namespace {

TaskSpec RecoverSpec(const std::string& owner, const std::string& id, const std::string& script) {
  TaskSpec s;
  s.owner = owner;
  s.task_id = id;
  s.job_id = "job-r";
  s.tenant = "acme/ml";
  s.attempt = 2;
  s.argv = {"/bin/sh", "-c", script};
  s.devices = {{"GPU-r0", 50'000, 40'960, 50, 989'000, 81'920}};
  return s;
}

// Statuses a runner hands to owner "n"'s listener, for a test to wait on.
struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, TaskStatus> ended;
  TaskRunner::Listener Listener() {
    return [this](const TaskStatus& st) {
      std::lock_guard lock(mu);
      ended[st.task_id] = st;
      cv.notify_all();
    };
  }
  std::optional<TaskStatus> Wait(const std::string& id) {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(30), [&] { return ended.count(id) > 0; }))
      return std::nullopt;
    return ended[id];
  }
};

// StopAll() returns once the owner's tasks have ended, whether or not anyone listens for their
// ends (it waited forever without a listener: the runner woke it only when it had listeners to
// call).
TEST(TaskRunnerStopAllTest, ReturnsWithoutAListener) {
  const std::string dir = TempDir();
  TaskRunnerOptions o;
  o.data_dir = dir;
  TaskRunner runner(o);
  auto st = runner.Start(RecoverSpec("n", "unheard", "exec sleep 30"));
  ASSERT_TRUE(st.ok() && st->phase == TaskPhase::kRunning);
  std::thread stopper([&] { runner.StopAll("n", 0, "node going away"); });
  bool returned = false;
  for (int i = 0; i < 1000 && !returned; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    returned = runner.Running("n").empty();
  }
  stopper.join();  // hung here before the fix
  EXPECT_TRUE(returned);
  EXPECT_EQ(runner.Get("unheard")->phase, TaskPhase::kCancelled);
  std::filesystem::remove_all(dir);
}

// The runners here live in the test process, so a re-adopted task's recorder is this process's
// child: the test reaps it, as init reaps it for a real agent that exited.
// A previous agent process: a runner on `o` starts `spec` and leaves it running. Its pid, or 0
// when it did not start.
pid_t StartAndLeave(const TaskRunnerOptions& o, const TaskSpec& spec) {
  TaskRunner previous(o);
  auto st = previous.Start(spec);
  if (!st.ok() || st->phase != TaskPhase::kRunning) return 0;
  previous.Leave();
  return static_cast<pid_t>(st->pid);
}

bool GroupGone(pid_t pgid) {
  while (waitpid(-pgid, nullptr, WNOHANG) > 0) {
  }
  return kill(-pgid, 0) != 0;
}

bool WaitGroupGone(pid_t pgid) {
  for (int i = 0; i < 3000 && !GroupGone(pgid); ++i) std::this_thread::sleep_for(milliseconds(10));
  return GroupGone(pgid);
}

// Issue 30: an agent that leaves (a restart) does not kill its tasks; the next runner on the same
// data dir re-adopts a running one — same pid, its grant and attempt — stops it when told, and
// reports it CANCELLED; nothing ran twice.
TEST(TaskRunnerRecoverTest, ARestartedRunnerReadoptsARunningTaskAndCanStopIt) {
  const std::string dir = TempDir();
  TaskRunnerOptions o;
  o.data_dir = dir;
  o.default_grace_ms = 300;
  pid_t pid = 0;
  {
    TaskRunner previous(o);
    auto st = previous.Start(RecoverSpec("n", "keep", "echo started >> runs; exec sleep 60"));
    ASSERT_TRUE(st.ok() && st->phase == TaskPhase::kRunning);
    pid = static_cast<pid_t>(st->pid);
    for (int i = 0; i < 3000 && ReadFile(dir + "/tasks/keep.2/runs").empty(); ++i)
      std::this_thread::sleep_for(milliseconds(10));
    previous.Leave();
  }
  ASSERT_FALSE(GroupGone(pid)) << "a runner that left killed its task";
  TaskRunner next(o);
  const TaskRunner::Recovery r = next.Recover("n");
  EXPECT_EQ(r.adopted, 1);
  EXPECT_EQ(r.killed + r.ended + r.reported, 0);
  const std::optional<TaskStatus> now = next.Get("keep");
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->phase, TaskPhase::kRunning);
  EXPECT_EQ(now->pid, pid);
  EXPECT_EQ(now->attempt, 2);
  ASSERT_EQ(now->devices.size(), 1u);
  EXPECT_EQ(now->devices[0].uuid, "GPU-r0");
  EXPECT_EQ(now->devices[0].vram_mib, 40'960);
  ASSERT_EQ(next.Running("n").size(), 1u);
  // Start() of the same attempt is idempotent against the adopted copy.
  auto again = next.Start(RecoverSpec("n", "keep", "echo started >> runs; exec sleep 60"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->pid, pid);
  Collected c;
  next.SetListener("n", c.Listener());
  ASSERT_TRUE(next.Stop("keep", 2, 300, "told to").has_value());
  const std::optional<TaskStatus> end = c.Wait("keep");
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->phase, TaskPhase::kCancelled);
  EXPECT_EQ(end->signal, SIGTERM);
  EXPECT_TRUE(WaitGroupGone(pid));
  EXPECT_EQ(ReadFile(dir + "/tasks/keep.2/runs"), "started\n");
  std::filesystem::remove_all(dir);
}

// The program's own exit code reaches the next runner through the recorder's file, whether it
// ends after the re-adoption or while no runner watched.
TEST(TaskRunnerRecoverTest, ExitCodesSurviveTheRestartWhetherTheTaskEndsBeforeOrAfter) {
  const std::string dir = TempDir();
  TaskRunnerOptions o;
  o.data_dir = dir;
  pid_t during = 0, after = 0;
  {
    TaskRunner previous(o);
    auto a = previous.Start(RecoverSpec("n", "ends-meanwhile", "exit 4"));
    auto b = previous.Start(RecoverSpec("n", "ends-later", "sleep 1; exit 3"));
    ASSERT_TRUE(a.ok() && b.ok());
    during = static_cast<pid_t>(a->pid);
    after = static_cast<pid_t>(b->pid);
    previous.Leave();
  }
  ASSERT_TRUE(WaitGroupGone(during));
  TaskRunner next(o);
  const TaskRunner::Recovery r = next.Recover("n");
  // "ends-meanwhile" either ended under the previous runner (recorded: reported again) or after
  // it left (ended meanwhile): reported either way.
  EXPECT_EQ(r.ended + r.reported, 1);
  EXPECT_EQ(r.adopted, 1);
  Collected c;
  next.SetListener("n", c.Listener());  // held statuses are delivered now
  const std::optional<TaskStatus> first = c.Wait("ends-meanwhile");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->phase, TaskPhase::kFailed);
  EXPECT_EQ(first->exit_code, 4);
  EXPECT_EQ(first->signal, 0);
  const std::optional<TaskStatus> second = c.Wait("ends-later");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->phase, TaskPhase::kFailed);
  EXPECT_EQ(second->exit_code, 3);
  EXPECT_EQ(second->reason, "exit code 3");
  EXPECT_TRUE(GroupGone(after));
  std::filesystem::remove_all(dir);
}

// A re-adopted task whose group is SIGKILLed (the lease keeper at the lease deadline) ends with no
// recorded status: reported FAILED by SIGKILL with a reason that says so, not guessed an OOM.
TEST(TaskRunnerRecoverTest, AGroupKilledWithoutARecordIsReportedAsSuch) {
  const std::string dir = TempDir();
  TaskRunnerOptions o;
  o.data_dir = dir;
  const pid_t pid = StartAndLeave(o, RecoverSpec("n", "killed", "exec sleep 60"));
  ASSERT_NE(pid, 0);
  TaskRunner next(o);
  Collected c;
  next.SetListener("n", c.Listener());
  ASSERT_EQ(next.Recover("n").adopted, 1);
  kill(-pid, SIGKILL);
  const std::optional<TaskStatus> end = c.Wait("killed");
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->phase, TaskPhase::kFailed);
  EXPECT_EQ(end->signal, SIGKILL);
  EXPECT_FALSE(end->oom);
  EXPECT_NE(end->reason.find("not recorded"), std::string::npos) << end->reason;
  EXPECT_TRUE(WaitGroupGone(pid));
  std::filesystem::remove_all(dir);
}

// What cannot be re-adopted is killed (here: another node's task), once, by its pid and start
// time; an unrelated process is left alone.
TEST(TaskRunnerRecoverTest, KillsWhatItCannotReadoptAndLeavesOthersAlone) {
  const std::string dir = TempDir();
  TaskRunnerOptions o;
  o.data_dir = dir;
  const pid_t foreign = StartAndLeave(o, RecoverSpec("other-node", "foreign", "exec sleep 60"));
  ASSERT_NE(foreign, 0);
  const pid_t bystander = fork();
  if (bystander == 0) {
    setpgid(0, 0);
    execl("/bin/sleep", "sleep", "60", nullptr);
    _exit(127);
  }
  setpgid(bystander, bystander);
  TaskRunner next(o);
  const TaskRunner::Recovery r = next.Recover("n");
  EXPECT_EQ(r.killed, 1);
  EXPECT_EQ(r.adopted, 0);
  EXPECT_TRUE(WaitGroupGone(foreign));
  EXPECT_NE(ReadFile(dir + "/tasks/foreign.2/state").find("phase=ORPHAN_KILLED"),
            std::string::npos);
  EXPECT_EQ(next.Recover("n").killed, 0);  // recorded: not again
  EXPECT_FALSE(GroupGone(bystander));
  kill(bystander, SIGKILL);
  waitpid(bystander, nullptr, 0);
  std::filesystem::remove_all(dir);
}

// A task whose end the previous runner recorded is reported again by the next (the previous
// process may have died before the scheduler had the report); older ones are not.
TEST(TaskRunnerRecoverTest, RecentlyRecordedEndsAreReportedAgain) {
  const std::string dir = TempDir();
  TaskRunnerOptions o;
  o.data_dir = dir;
  {
    TaskRunner previous(o);
    Collected c;
    previous.SetListener("n", c.Listener());
    ASSERT_TRUE(previous.Start(RecoverSpec("n", "done", "echo ok")).ok());
    ASSERT_TRUE(c.Wait("done").has_value());
  }
  {
    TaskRunner next(o);
    const TaskRunner::Recovery r = next.Recover("n");
    EXPECT_EQ(r.reported, 1);
    Collected c;
    next.SetListener("n", c.Listener());
    const std::optional<TaskStatus> st = c.Wait("done");
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->phase, TaskPhase::kSucceeded);
    EXPECT_EQ(st->attempt, 2);
    EXPECT_NE(st->output_tail.find("ok"), std::string::npos);
  }
  TaskRunner later(o);
  EXPECT_EQ(later.Recover("n", /*report_within_ms=*/0).reported, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool::agent
