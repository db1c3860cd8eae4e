// Agents with their own identity, end to end: a real gpupoold creates its CA on first start and
// serves gRPC over TLS; a real gpupool-agent joins with the join token, gets a certificate for
// its node name and registers over mutual TLS. Someone holding the same token cannot register
// under that name (the real agent is not kicked off), and an admin's revocation shuts it out.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "gpupool/v1/agent.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::ChildProcess;
using testing::DaemonProcess;
using namespace std::chrono_literals;

constexpr char kToken[] = "join-token-0123456789";

unsigned Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(NodeIdentityE2eTest, AgentJoinsAndNobodyElseCanBeItsNode) {
  Result<std::string> dir = testing::MakeTempDir("gpupool-e2e-id");
  ASSERT_TRUE(dir.ok());
  std::ofstream(*dir + "/gpupoold.yaml") << "auth:\n  node_tokens: [\"" << kToken << "\"]\n"
                                         << "scheduler: {heartbeat_interval_ms: 200, "
                                            "heartbeat_timeout_ms: 1500, node_lease_ms: 1500}\n"
                                         << "pools:\n  - {name: gpu}\n";
  const std::string tls_address = "127.0.0.1:" + std::to_string(testing::FreePort());
  auto d = DaemonProcess::Start(
      {"", {"--config", *dir + "/gpupoold.yaml", "--grpc-tls-listen", tls_address}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::unique_ptr<DaemonProcess> daemon = std::move(d).value();
  const std::string ca = daemon->data_dir() + "/tls/ca.crt";
  EXPECT_EQ(Mode(ca), 0600u);
  EXPECT_EQ(Mode(daemon->data_dir() + "/tls/ca.key"), 0600u);

  auto channel = grpc::CreateChannel(daemon->grpc_address(), grpc::InsecureChannelCredentials());
  auto nodes = v1::NodeService::NewStub(channel);
  auto state = [&]() -> v1::NodeState {
    grpc::ClientContext ctx;
    v1::GetNodeRequest req;
    req.set_name("node-a");
    v1::Node n;
    return nodes->GetNode(&ctx, req, &n).ok() ? n.state() : v1::NODE_STATE_UNSPECIFIED;
  };

  std::ofstream(*dir + "/agent.yaml")
      << "node_name: node-a\npool: gpu\ncpu_milli: 8000\nmemory_mib: 16384\n"
         "backend: simulated\nheartbeat_interval_ms: 200\n"
         "reconnect: {initial_ms: 100, max_ms: 500}\n"
      << "token: " << kToken << "\nca_file: " << ca << "\n"
      << "gpus:\n  - model: L4\n    count: 1\n";
  auto agent =
      ChildProcess::Spawn({testing::BinaryPath("gpupool-agent"), "--config", *dir + "/agent.yaml",
                           "--scheduler", tls_address, "--data-dir", *dir + "/agent"},
                          *dir + "/agent.log");
  ASSERT_TRUE(agent.ok());
  ASSERT_TRUE(testing::WaitFor([&] { return state() == v1::NODE_STATE_READY; }, 60s))
      << "the agent did not register over mutual TLS; log: " << daemon->LogTail(20);
  EXPECT_EQ(Mode(*dir + "/agent/tls/node.key"), 0600u);

  // gpupoolctl speaks TLS to the same port when given the CA, and nothing without it.
  {
    auto ctl = ChildProcess::Spawn(
        {testing::BinaryPath("gpupoolctl"), "--server", tls_address, "--ca", ca, "nodes", "list"},
        *dir + "/ctl.log");
    ASSERT_TRUE(ctl.ok());
    const int status = (*ctl)->Wait(60s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::ifstream in(*dir + "/ctl.log");
    const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(out.find("node-a"), std::string::npos) << out;
  }

  // The token's holder tries to be node-a over the plaintext port: refused, node-a stays.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    auto stream = v1::AgentService::NewStub(channel)->Connect(&ctx);
    v1::AgentMessage m;
    v1::Register* r = m.mutable_register_();
    r->set_node_name("node-a");
    r->set_pool("gpu");
    r->set_token(kToken);
    r->set_cpu_milli(1000);
    r->set_memory_mib(1024);
    stream->Write(m);
    v1::SchedulerMessage in;
    EXPECT_FALSE(stream->Read(&in));
    grpc::Status st = stream->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  }
  EXPECT_EQ(state(), v1::NODE_STATE_READY);

  // An admin revokes node-a: its stream ends and it cannot come back.
  {
    grpc::ClientContext ctx;
    v1::RevokeNodeRequest req;
    req.set_node_name("node-a");
    v1::RevokeNodeResponse resp;
    ASSERT_TRUE(v1::NodeEnrollService::NewStub(channel)->RevokeNode(&ctx, req, &resp).ok());
  }
  EXPECT_TRUE(testing::WaitFor([&] { return state() != v1::NODE_STATE_READY; }, 60s));

  (*agent)->Signal(SIGTERM);
  (*agent)->Wait(10s);
  daemon.reset();
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(*dir);
}

}  // namespace
}  // namespace gpupool
