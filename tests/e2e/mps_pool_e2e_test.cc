// Issue 10 end to end: MPS fault isolation between tenants is a pool option. A real gpupoold (on
// embedded PostgreSQL) and a real gpupool-agent whose MPS "control daemon" is the fake program
// (tests/agent/fake_mps_control.sh): two tenants' fractional tasks of a pool asking for isolation
// share one GPU through a daemon each; killing one tenant's daemon fails that tenant's task only
// (requeued);
// after the pool is switched back, a third tenant's task uses the GPU's shared daemon. And what
// the agent said it can enforce is stored: `nodes get` shows it after a gpupoold restart while
// the agent is away.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::ChildProcess;
using testing::DaemonProcess;
using namespace std::chrono_literals;

constexpr char kGpu[] = "GPU-sim-node-a-0";

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout = 60s) {
  return ::gpupool::testing::WaitFor(done, timeout, std::chrono::milliseconds(50));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class MpsPoolE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-mps-pool");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml") << "scheduler:\n  heartbeat_interval_ms: 200\n  "
                                              "heartbeat_timeout_ms: 3000\n  node_lease_ms: 3000\n"
                                              "  stop_grace_period_ms: 1000\n";
    auto d = DaemonProcess::Start(
        {.data_dir = "", .extra_args = {"--config", dir_ + "/gpupoold.yaml"}, .secure = false});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Connect();
  }

  void TearDown() override {
    agent_.reset();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  void Connect() {
    auto channel = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel);
    pools_ = v1::PoolService::NewStub(channel);
    nodes_ = v1::NodeService::NewStub(channel);
    if (!agent_) {
      agent_ = std::make_unique<testing::SingleAgent>(
          dir_, "shared",
          "mps:\n  enabled: true\n  control: " GPUPOOL_FAKE_MPS "\n  dir: " + dir_ + "/mps\n");
    }
    agent_->Connect(daemon_->grpc_address());
  }

  grpc::Status CreatePool(bool isolation, v1::Pool* out) {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("shared");
    req.mutable_pool()->set_sharing_mode(v1::SHARING_MODE_FRACTIONAL);
    req.mutable_pool()->set_mps_tenant_isolation(isolation);
    // The agents here run without the sandbox: no requirement of nodes (this test is MPS's).
    req.mutable_pool()->add_required_capabilities("none");
    grpc::ClientContext ctx;
    return pools_->CreatePool(&ctx, req, out);
  }

  void StartAgent() { ASSERT_TRUE(agent_->Start().ok()); }
  void StopAgent() { agent_->Stop(); }
  v1::Node Node() { return agent_->Node(); }
  v1::Task Task(const std::string& job_id) { return agent_->Task(job_id); }

  // A fractional task of `tenant` that writes the MPS pipe directory it was given to a file named
  // after its tenant, then sleeps.
  std::string Submit(const std::string& tenant) {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant(tenant);
    s->set_pool("shared");
    s->set_task_count(1);
    s->set_max_retries(0);
    std::string file = tenant;
    std::replace(file.begin(), file.end(), '/', '_');
    s->mutable_template_()->add_command("/bin/sh");
    s->mutable_template_()->add_command("-c");
    s->mutable_template_()->add_command("echo $CUDA_MPS_PIPE_DIRECTORY > " + dir_ + "/" + file +
                                        ".pipe; sleep 300");
    v1::FractionalRequest* f = s->mutable_template_()->mutable_resources()->mutable_fractional();
    f->set_milli_tflops(100'000);
    f->set_vram_mib(8192);
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_->SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.job_id();
  }

  std::string PipeOf(const std::string& file) {
    std::string s = ReadFile(dir_ + "/" + file + ".pipe");
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::SingleAgent> agent_;  // node-a, MPS through the fake control daemon
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::PoolService::Stub> pools_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
};

TEST_F(MpsPoolE2eTest, APoolAskingForIsolationGivesEachTenantItsOwnMpsDaemon) {
  // An exclusive pool has no shared GPU to isolate: refused, naming the field.
  {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("whole");
    req.mutable_pool()->set_sharing_mode(v1::SHARING_MODE_EXCLUSIVE);
    req.mutable_pool()->set_mps_tenant_isolation(true);
    grpc::ClientContext ctx;
    v1::Pool out;
    grpc::Status st = pools_->CreatePool(&ctx, req, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("pool.mps_tenant_isolation"), std::string::npos)
        << st.error_message();
  }
  v1::Pool pool;
  grpc::Status created = CreatePool(/*isolation=*/true, &pool);
  ASSERT_TRUE(created.ok()) << created.error_message();
  EXPECT_TRUE(pool.mps_tenant_isolation());
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; }))
      << daemon_->LogTail(30);

  const std::string a = Submit("acme/a");
  const std::string b = Submit("acme/b");
  ASSERT_TRUE(WaitFor([&] {
    return Task(a).state() == v1::TASK_STATE_RUNNING && Task(b).state() == v1::TASK_STATE_RUNNING;
  })) << Task(a).DebugString()
      << Task(b).DebugString();
  // Each tenant got a daemon of its own on the one GPU, and its limits through it.
  const std::string mps = dir_ + "/mps/";
  ASSERT_TRUE(WaitFor([&] { return !PipeOf("acme_a").empty() && !PipeOf("acme_b").empty(); }));
  EXPECT_EQ(PipeOf("acme_a"), mps + kGpu + ".acme_a/pipe");
  EXPECT_EQ(PipeOf("acme_b"), mps + kGpu + ".acme_b/pipe");
  for (const char* t : {".acme_a", ".acme_b"}) {
    const std::string log = ReadFile(mps + kGpu + t + "/pipe/fake-mps.log");
    EXPECT_NE(log.find("daemon start devices=" + std::string(kGpu)), std::string::npos) << log;
    // The limits are the clients' own, in their environment (mps_test), not the daemon's defaults.
    EXPECT_EQ(log.find("set_default"), std::string::npos) << log;
  }
  EXPECT_FALSE(std::filesystem::exists(mps + kGpu + "/pipe/fake-mps.log"));

  // Tenant a's daemon dies: the agent fails a's task, naming the daemon (gpupoold requeues it:
  // a device fault, and every job has retries); b's runs on, still its first attempt.
  const std::string pid = ReadFile(mps + kGpu + ".acme_a/pipe/fake-mps.pid");
  ASSERT_FALSE(pid.empty());
  ASSERT_EQ(kill(std::stoi(pid), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return Task(a).attempt() >= 1; })) << Task(a).DebugString();
  const std::string agent_log = ReadFile(dir_ + "/node-a.log");
  EXPECT_NE(agent_log.find("MPS control daemon for " + std::string(kGpu) +
                           " (tenant acme/a) exited (signal 9)"),
            std::string::npos)
      << agent_log;
  EXPECT_NE(agent_log.find("task=" + Task(a).id() + " state=FAILED"), std::string::npos)
      << agent_log;
  EXPECT_EQ(Task(b).state(), v1::TASK_STATE_RUNNING) << Task(b).DebugString();
  EXPECT_EQ(Task(b).attempt(), 0) << Task(b).DebugString();

  // The pool switched back to one daemon per GPU: a new task uses the GPU's shared daemon.
  {
    v1::UpdatePoolRequest req;
    req.mutable_pool()->set_name("shared");
    req.mutable_pool()->set_mps_tenant_isolation(false);
    req.mutable_update_mask()->add_paths("mps_tenant_isolation");
    grpc::ClientContext ctx;
    v1::Pool updated;
    grpc::Status st = pools_->UpdatePool(&ctx, req, &updated);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_FALSE(updated.mps_tenant_isolation());
  }
  const std::string c = Submit("acme/c");
  ASSERT_TRUE(WaitFor([&] { return !PipeOf("acme_c").empty(); })) << Task(c).DebugString();
  EXPECT_EQ(PipeOf("acme_c"), mps + kGpu + "/pipe");
  EXPECT_EQ(Task(b).state(), v1::TASK_STATE_RUNNING) << Task(b).DebugString();
}

TEST_F(MpsPoolE2eTest, NodeCapabilitiesAreShownAfterARestartWhileTheAgentIsAway) {
  v1::Pool pool;
  ASSERT_TRUE(CreatePool(/*isolation=*/false, &pool).ok());
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; }))
      << daemon_->LogTail(30);
  auto mps_capability = [](const v1::Node& n) -> const v1::NodeCapability* {
    for (const v1::NodeCapability& c : n.capabilities()) {
      if (c.name() == "mps") return &c;
    }
    return nullptr;
  };
  const v1::Node before = Node();
  ASSERT_NE(mps_capability(before), nullptr) << before.DebugString();
  EXPECT_TRUE(mps_capability(before)->enforced());

  StopAgent();
  ASSERT_EQ(daemon_->Stop(), 0) << daemon_->LogTail(30);
  Status restarted = daemon_->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  Connect();
  ASSERT_TRUE(WaitFor([&] { return Node().name() == "node-a"; })) << daemon_->LogTail(30);
  const v1::Node after = Node();
  ASSERT_EQ(after.capabilities_size(), before.capabilities_size()) << after.DebugString();
  for (int i = 0; i < after.capabilities_size(); ++i) {
    EXPECT_EQ(after.capabilities(i).name(), before.capabilities(i).name());
    EXPECT_EQ(after.capabilities(i).enforced(), before.capabilities(i).enforced());
    EXPECT_EQ(after.capabilities(i).detail(), before.capabilities(i).detail());
  }
  ASSERT_NE(mps_capability(after), nullptr);
  EXPECT_NE(mps_capability(after)->detail().find("per tenant per GPU where the task's pool asks"),
            std::string::npos)
      << mps_capability(after)->detail();
}

}  // namespace
}  // namespace gpupool
