// MpsManager with the fake control program (tests/agent/fake_mps_control.sh) as real child
// processes: daemons started per GPU or per tenant per GPU, the client limits sent through the
// control interface, the environment a task gets, a daemon that will not start failing the task
// (never running it unconfined), and a daemon that dies restarted with its tasks failed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "agent/capabilities.h"
#include "agent/mps/mps_manager.h"
#include "agent/task_runner.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class MpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupool-mps-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    options_.enabled = true;
    options_.control = GPUPOOL_FAKE_MPS;
    options_.dir = dir_ + "/mps";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static TaskSpec Spec(const std::string& id, const std::string& tenant, const std::string& uuid,
                       int32_t pct, int64_t vram_mib, const std::string& script = "sleep 60") {
    TaskSpec s;
    s.owner = "n1";
    s.task_id = id;
    s.tenant = tenant;
    s.argv = {"/bin/sh", "-c", script};
    s.devices = {{uuid, 0, vram_mib, pct}};
    return s;
  }
  std::string Log(const std::string& key) {
    return ReadFile(dir_ + "/mps/" + key + "/pipe/fake-mps.log");
  }

  // A previous agent process: a runner and a manager on `o` start MPS client 1.0 (GPU-0, 40 %)
  // and leave it running, then go. Sets the task's and its daemon's pids.
  void StartAClientAndLeave(TaskRunnerOptions* o, pid_t* task, pid_t* daemon) {
    o->data_dir = dir_ + "/data";
    o->mps = std::make_shared<MpsManager>(options_);
    {
      TaskRunner previous(*o);
      auto st = previous.Start(Spec("1.0", "acme", "GPU-0", 40, 2048));
      ASSERT_TRUE(st.ok());
      ASSERT_EQ(st->phase, TaskPhase::kRunning) << st->reason;
      *task = static_cast<pid_t>(st->pid);
      ASSERT_EQ(o->mps->States().size(), 1u);
      *daemon = o->mps->States()[0].pid;
      previous.Leave();
    }
    o->mps.reset();                                   // the old agent process is gone
    o->mps = std::make_shared<MpsManager>(options_);  // the next one's
  }

  std::string dir_;
  MpsOptions options_;
};

TEST_F(MpsTest, ASharedGrantStartsTheDaemonAndGivesTheClientItsLimits) {
  MpsManager mps(options_);
  // A whole device needs no MPS.
  auto env = mps.Prepare(Spec("1.0", "acme", "GPU-0", 100, 81920));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_TRUE(env->empty());
  EXPECT_TRUE(mps.States().empty());

  env = mps.Prepare(Spec("2.0", "acme", "GPU-0", 30, 8192));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ((*env)["CUDA_MPS_PIPE_DIRECTORY"], dir_ + "/mps/GPU-0/pipe");
  EXPECT_EQ((*env)["CUDA_MPS_LOG_DIRECTORY"], dir_ + "/mps/GPU-0/log");
  EXPECT_EQ((*env)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "30");
  EXPECT_EQ((*env)["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=8192M");
  const std::string log = Log("GPU-0");
  EXPECT_NE(log.find("daemon start devices=GPU-0 logdir=" + dir_ + "/mps/GPU-0/log"),
            std::string::npos)
      << log;
  // The limits are the client's own, in its environment: never the daemon's defaults, which
  // only the next server would take (nvidia-cuda-mps-control(1)).
  EXPECT_EQ(log.find("set_default"), std::string::npos) << log;
  ASSERT_EQ(mps.States().size(), 1u);
  EXPECT_TRUE(mps.States()[0].up);

  // Device isolation: another tenant shares the same daemon.
  ASSERT_TRUE(mps.Prepare(Spec("3.0", "other", "GPU-0", 50, 0)).ok());
  EXPECT_EQ(mps.States().size(), 1u);
  EXPECT_EQ(Log("GPU-0").find("set_default"), std::string::npos);
}

TEST_F(MpsTest, TenantIsolationRunsOneDaemonPerTenantPerGpu) {
  options_.per_tenant = true;
  MpsManager mps(options_);
  ASSERT_TRUE(mps.Prepare(Spec("1.0", "acme/a", "GPU-0", 25, 1024)).ok());
  ASSERT_TRUE(mps.Prepare(Spec("2.0", "acme/b", "GPU-0", 25, 1024)).ok());
  ASSERT_TRUE(mps.Prepare(Spec("3.0", "acme/a", "GPU-0", 25, 1024)).ok());
  const std::vector<MpsDaemonState> states = mps.States();
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].tenant, "acme/a");
  EXPECT_EQ(states[1].tenant, "acme/b");
  EXPECT_NE(states[0].pid, states[1].pid);
  EXPECT_NE(Log("GPU-0.acme_a").find("daemon start"), std::string::npos);
  EXPECT_NE(Log("GPU-0.acme_b").find("daemon start"), std::string::npos);
}

// The pool's option (StartTask.mps_tenant_isolation) with the agent at `isolation: device`: tasks
// whose pool asks get their tenant's own daemon, the others share the device's; a daemon's death
// fails only the tasks that were its clients.
TEST_F(MpsTest, APoolAskingForIsolationGetsItsTenantsTheirOwnDaemon) {
  auto mps = std::make_shared<MpsManager>(options_);
  TaskRunnerOptions o;
  o.data_dir = dir_ + "/data";
  o.mps = mps;
  TaskRunner runner(o);
  std::mutex mu;
  std::map<std::string, TaskStatus> ended;
  runner.SetListener("n1", [&](const TaskStatus& st) {
    std::lock_guard lock(mu);
    ended[st.task_id] = st;
  });
  auto isolated = [](TaskSpec s) {
    s.mps_tenant_isolation = true;
    return s;
  };
  const std::string show = "echo pipe=$CUDA_MPS_PIPE_DIRECTORY; sleep 60";
  for (const TaskSpec& s : {isolated(Spec("1.0", "acme/a", "GPU-0", 25, 1024, show)),
                            isolated(Spec("2.0", "acme/b", "GPU-0", 25, 1024, show)),
                            Spec("3.0", "acme/c", "GPU-0", 25, 1024, show)}) {
    auto st = runner.Start(s);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_EQ(st->phase, TaskPhase::kRunning) << st->reason;
  }
  std::vector<MpsDaemonState> states = mps->States();
  ASSERT_EQ(states.size(), 3u);  // by key: GPU-0, GPU-0/acme/a, GPU-0/acme/b
  EXPECT_EQ(states[0].tenant, "");
  EXPECT_EQ(states[1].tenant, "acme/a");
  EXPECT_EQ(states[2].tenant, "acme/b");
  for (const auto& [task, key] : std::map<std::string, std::string>{
           {"1.0", "GPU-0.acme_a"}, {"2.0", "GPU-0.acme_b"}, {"3.0", "GPU-0"}}) {
    ASSERT_TRUE(::gpupool::testing::WaitFor(
        [&] {
          auto log = runner.ReadLog(task, 0, 4096);
          return log.ok() &&
                 log->data.find("pipe=" + dir_ + "/mps/" + key + "/pipe\n") != std::string::npos;
        },
        std::chrono::seconds(30)))
        << task << " should use " << key;
    EXPECT_NE(Log(key).find("daemon start"), std::string::npos) << key;
    EXPECT_EQ(Log(key).find("set_default"), std::string::npos) << key;
  }

  // Tenant a's daemon dies: only its task fails, not b's (its own daemon) nor c's (the shared one).
  ASSERT_EQ(kill(states[1].pid, SIGKILL), 0);
  std::vector<MpsFailure> failures;
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        failures = mps->Supervise();
        return !failures.empty();
      },
      std::chrono::seconds(30)));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].tenant, "acme/a");
  EXPECT_NE(failures[0].reason.find("(tenant acme/a) exited (signal 9)"), std::string::npos)
      << failures[0].reason;
  auto used = [&](const MpsFailure& f) {
    return [&mps, &f](const TaskSpec& s) { return mps->UsedBy(s, f); };
  };
  EXPECT_EQ(runner.FailIf("n1", used(failures[0]), failures[0].reason),
            std::vector<std::string>{"1.0"});

  // The device's shared daemon dies: only the task of the pool without isolation fails.
  ASSERT_EQ(kill(states[0].pid, SIGKILL), 0);
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        failures = mps->Supervise();
        return !failures.empty();
      },
      std::chrono::seconds(30)));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].tenant, "");
  EXPECT_EQ(runner.FailIf("n1", used(failures[0]), failures[0].reason),
            std::vector<std::string>{"3.0"});
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return ended.contains("1.0") && ended.contains("3.0");
      },
      std::chrono::seconds(30)));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(ended["1.0"].phase, TaskPhase::kFailed);
    EXPECT_EQ(ended["3.0"].phase, TaskPhase::kFailed);
    EXPECT_FALSE(ended.contains("2.0"));
  }
  runner.StopAll("n1", 0, "test over");
}

TEST_F(MpsTest, ADaemonThatWillNotStartFailsTheTaskNamingIt) {
  std::filesystem::create_directories(options_.dir);
  std::ofstream(options_.dir + "/fail-start") << "";
  auto mps = std::make_shared<MpsManager>(options_);
  auto env = mps->Prepare(Spec("1.0", "acme", "GPU-0", 30, 0));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("mps: control daemon " + options_.control +
                                        " for GPU-0 did not start: exited at start"),
            std::string::npos)
      << env.status().ToString();
  EXPECT_NE(env.status().message().find("refusing to start"), std::string::npos);

  // Through the runner: FAILED with exit code 126, and the program never ran.
  TaskRunnerOptions o;
  o.data_dir = dir_ + "/data";
  o.mps = mps;
  TaskRunner runner(o);
  auto st = runner.Start(Spec("2.0", "acme", "GPU-0", 30, 0, "touch " + dir_ + "/ran"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->phase, TaskPhase::kFailed);
  EXPECT_EQ(st->exit_code, 126);
  EXPECT_NE(st->reason.find("mps: control daemon"), std::string::npos) << st->reason;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ran"));

  // No such control program: the same, naming it.
  options_.control = dir_ + "/no-such-mps-control";
  MpsManager missing(options_);
  env = missing.Prepare(Spec("3.0", "acme", "GPU-1", 30, 0));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("cannot run " + options_.control), std::string::npos)
      << env.status().ToString();
}

TEST_F(MpsTest, ADeadDaemonIsRestartedAndItsTasksFail) {
  auto mps = std::make_shared<MpsManager>(options_);
  TaskRunnerOptions o;
  o.data_dir = dir_ + "/data";
  o.mps = mps;
  TaskRunner runner(o);
  std::mutex mu;
  std::map<std::string, TaskStatus> ended;
  runner.SetListener("n1", [&](const TaskStatus& st) {
    std::lock_guard lock(mu);
    ended[st.task_id] = st;
  });
  auto st = runner.Start(
      Spec("1.0", "acme", "GPU-0", 40, 2048,
           "echo pipe=$CUDA_MPS_PIPE_DIRECTORY pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; "
           "sleep 60"));
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->phase, TaskPhase::kRunning) << st->reason;
  ASSERT_TRUE(runner.Start(Spec("2.0", "acme", "GPU-1", 100, 0)).ok());  // whole GPU, no MPS
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        auto log = runner.ReadLog("1.0", 0, 4096);
        return log.ok() && log->data.find("pct=40") != std::string::npos;
      },
      std::chrono::seconds(30)));
  EXPECT_NE(runner.ReadLog("1.0", 0, 4096)->data.find("pipe=" + dir_ + "/mps/GPU-0/pipe"),
            std::string::npos);

  EXPECT_TRUE(mps->Supervise().empty());  // all well
  const pid_t old_pid = mps->States()[0].pid;
  ASSERT_EQ(kill(old_pid, SIGKILL), 0);
  std::vector<MpsFailure> failures;
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        failures = mps->Supervise();
        return !failures.empty();
      },
      std::chrono::seconds(30)));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].uuid, "GPU-0");
  EXPECT_NE(failures[0].reason.find("MPS control daemon for GPU-0 exited (signal 9)"),
            std::string::npos)
      << failures[0].reason;
  EXPECT_NE(failures[0].reason.find("daemon restarted"), std::string::npos);
  ASSERT_EQ(mps->States().size(), 1u);
  EXPECT_TRUE(mps->States()[0].up);
  EXPECT_NE(mps->States()[0].pid, old_pid);
  EXPECT_EQ(mps->States()[0].restarts, 1);

  // What the agent does with it: the daemon's tasks fail with the reason; others go on.
  EXPECT_EQ(runner.FailDevices("n1", {failures[0].uuid}, failures[0].reason, failures[0].tenant),
            std::vector<std::string>{"1.0"});
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return ended.contains("1.0");
      },
      std::chrono::seconds(30)));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(ended["1.0"].phase, TaskPhase::kFailed);
    EXPECT_EQ(ended["1.0"].reason, failures[0].reason);
    EXPECT_FALSE(ended.contains("2.0"));
  }

  // Registration says MPS is managed.
  bool managed = false;
  for (const auto& c : NodeCapabilities(runner.options())) {
    if (c.name == "mps") managed = c.enforced;
  }
  EXPECT_TRUE(managed);
  runner.StopAll("n1", 0, "test over");
}

// Issue 30: an agent restart keeps an MPS client running, and its daemon with it. The runner
// and the manager leave; the next ones re-adopt the task and the very daemon (same pid, not
// restarted, nothing failed); a new client of the same tenant and GPU joins that daemon; an
// agent that then stops for good quits it.
TEST_F(MpsTest, ARestartedAgentReadoptsAnMpsClientAndItsDaemon) {
  TaskRunnerOptions o;
  pid_t daemon = 0, task = 0;
  ASSERT_NO_FATAL_FAILURE(StartAClientAndLeave(&o, &task, &daemon));
  ASSERT_EQ(kill(daemon, 0), 0) << "the daemon went with the agent";
  EXPECT_EQ(Log("GPU-0").find("daemon quit"), std::string::npos);
  TaskRunner next(o);
  const TaskRunner::Recovery r = next.Recover("n1");
  EXPECT_EQ(r.adopted, 1);
  EXPECT_EQ(r.killed, 0);
  ASSERT_TRUE(next.Get("1.0").has_value());
  EXPECT_EQ(next.Get("1.0")->pid, task);
  ASSERT_EQ(o.mps->States().size(), 1u);
  EXPECT_EQ(o.mps->States()[0].pid, daemon);
  EXPECT_TRUE(o.mps->States()[0].up);
  EXPECT_TRUE(o.mps->Supervise().empty());
  // A new client joins the same daemon: no second one starts on its pipes.
  auto joined = next.Start(Spec("3.0", "acme", "GPU-0", 30, 1024));
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->phase, TaskPhase::kRunning) << joined->reason;
  EXPECT_EQ(o.mps->States()[0].pid, daemon);
  const std::string log = Log("GPU-0");
  size_t starts = 0;
  for (size_t at = 0; (at = log.find("daemon start", at)) != std::string::npos; ++at) ++starts;
  EXPECT_EQ(starts, 1u) << log;
  next.StopAll("n1", 0, "test over");
}

// A daemon that died while no agent ran took its clients' GPU contexts: the restarted agent
// cannot give it back, so it kills the client (gpupoold requeues it) and says why.
TEST_F(MpsTest, AClientWhoseDaemonDiedWhileNoAgentRanIsKilled) {
  TaskRunnerOptions o;
  pid_t daemon = 0, task = 0;
  ASSERT_NO_FATAL_FAILURE(StartAClientAndLeave(&o, &task, &daemon));
  ASSERT_EQ(kill(daemon, SIGKILL), 0);
  waitpid(daemon, nullptr, 0);  // reaped, as init would reap an orphan
  TaskRunner next(o);
  const TaskRunner::Recovery r = next.Recover("n1");
  EXPECT_EQ(r.adopted, 0);
  EXPECT_EQ(r.killed, 1);
  EXPECT_FALSE(next.Get("1.0").has_value());
  EXPECT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        while (waitpid(-task, nullptr, WNOHANG) > 0) {
        }
        return kill(-task, 0) != 0;
      },
      std::chrono::seconds(30)));
}

}  // namespace
}  // namespace gpupool::agent
