// Node enrolments survive a failover (docs/ha.md, "Secure replicas"): two secure gpupoold
// replicas on one PostgreSQL keep which certificate speaks for which node, and revocations, in
// the database. A real gpupool-agent given both addresses joins through the leader; the leader
// is killed with -9 and the agent registers with the new leader over mutual TLS with the same
// certificate, without joining again. A node revoked on one replica is then refused by the
// other: the revoking leader is killed, and the replica that takes over refuses the revoked
// certificate.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "gpupool/v1/agent.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/leader_client.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::DaemonProcess;
using testing::WaitFor;

constexpr char kJoinToken[] = "join-token-0123456789";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Lines of `text` that contain every one of `words`.
int LinesWith(const std::string& text, const std::vector<std::string>& words) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const std::string& w : words) all = all && line.find(w) != std::string::npos;
    n += all ? 1 : 0;
  }
  return n;
}

class NodeEnrolmentHaE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> uri = testing::CreateTestDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    auto dir = testing::MakeTempDir("gpupool-enrol-ha");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml") << "ha:\n  enabled: true\n  lease_ms: 1000\n"
                                           << "auth:\n  node_tokens: [\"" << kJoinToken << "\"]\n"
                                           << "scheduler: {heartbeat_interval_ms: 200, "
                                              "heartbeat_timeout_ms: 3000, node_lease_ms: 3000}\n"
                                           << "pools:\n  - {name: gpu}\n";
    const std::vector<std::string> args = {"--config", dir_ + "/gpupoold.yaml", "--database", *uri};
    for (int i = 0; i < 2; ++i) {
      auto d = DaemonProcess::Start(
          {.data_dir = "", .extra_args = args, .secure = true, .wait_until_serving = false});
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      replicas_.push_back(std::move(d).value());
    }
    ASSERT_TRUE(WaitFor(
        [&] {
          // The admin token too: the replica that lost the race adopts both (CI saw the test
          // read a token about to be replaced, and every admin call refused for 90 s).
          return !replicas_[0]->ca_pem().empty() &&
                 replicas_[0]->ca_pem() == replicas_[1]->ca_pem() &&
                 !replicas_[0]->admin_token().empty() &&
                 replicas_[0]->admin_token() == replicas_[1]->admin_token();
        },
        60s, 100ms))
        << replicas_[0]->LogTail(20) << replicas_[1]->LogTail(20);
    targets_ = replicas_[0]->grpc_address() + "," + replicas_[1]->grpc_address();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = replicas_[0]->ca_pem();
    client_ = std::make_unique<testing::LeaderClient>(targets_, grpc::SslCredentials(ssl));
    token_ = replicas_[0]->admin_token();
  }
  void TearDown() override {
    agent_.reset();
    replicas_.clear();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // Calls the leader with the admin credential.
  grpc::Status AsAdmin(
      const std::function<grpc::Status(std::shared_ptr<grpc::Channel>, grpc::ClientContext*)>& fn) {
    return client_->Call([&](auto channel, grpc::ClientContext* ctx) {
      ctx->AddMetadata("authorization", "Bearer " + token_);
      return fn(channel, ctx);
    });
  }

  v1::NodeState NodeState() {
    v1::GetNodeRequest req;
    req.set_name("node-a");
    v1::Node n;
    grpc::Status st = AsAdmin([&](auto channel, grpc::ClientContext* ctx) {
      return v1::NodeService::NewStub(channel)->GetNode(ctx, req, &n);
    });
    return st.ok() ? n.state() : v1::NODE_STATE_UNSPECIFIED;
  }

  std::string Logs() const { return replicas_[0]->LogTail(40) + replicas_[1]->LogTail(40); }

  std::string dir_, targets_, token_;
  std::vector<std::unique_ptr<DaemonProcess>> replicas_;
  std::unique_ptr<testing::LeaderClient> client_;
  std::unique_ptr<testing::SingleAgent> agent_;
};

TEST_F(NodeEnrolmentHaE2eTest, AnEnrolledNodeFollowsTheFailoverAndARevocationHoldsOnBoth) {
  const int first = testing::ServingReplica(replicas_, 60s);
  ASSERT_GE(first, 0) << Logs();
  testing::SingleAgent::Options o;
  o.dir = dir_;
  o.extra_config =
      std::string("token: ") + kJoinToken + "\nca_file: " + replicas_[0]->ca_path() + "\n";
  agent_ = std::make_unique<testing::SingleAgent>(o);
  agent_->Connect(targets_);  // both replicas: Join and the stream follow the leader
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(WaitFor([&] { return NodeState() == v1::NODE_STATE_READY; }, 90s))
      << Logs() << ReadFile(dir_ + "/node-a.log");
  const std::string cert_path = dir_ + "/node-a/tls/node.crt";
  const std::string cert = ReadFile(cert_path);
  ASSERT_FALSE(cert.empty());
  const size_t f = static_cast<size_t>(first);
  EXPECT_EQ(LinesWith(ReadFile(replicas_[f]->log_path()), {"node enrolled", "node-a"}), 1);

  // kill -9 the leader: the agent registers with the new one with its certificate.
  replicas_[f]->Kill9();
  const size_t second = 1 - f;
  ASSERT_TRUE(WaitFor(
      [&] {
        return LinesWith(ReadFile(replicas_[second]->log_path()),
                         {"agent connected", "node=node-a"}) > 0;
      },
      90s, 100ms))
      << Logs() << ReadFile(dir_ + "/node-a.log");
  EXPECT_TRUE(WaitFor([&] { return NodeState() == v1::NODE_STATE_READY; }, 60s)) << Logs();
  // Not enrolled again: the same certificate on disk, one join in the agent's log, and neither
  // a join nor a refusal on the new leader.
  EXPECT_EQ(ReadFile(cert_path), cert);
  EXPECT_EQ(LinesWith(ReadFile(dir_ + "/node-a.log"), {"joined; node certificate saved"}), 1);
  const std::string second_log = ReadFile(replicas_[second]->log_path());
  EXPECT_EQ(LinesWith(second_log, {"node enrolled"}), 0) << second_log;
  EXPECT_EQ(LinesWith(second_log, {"agent rejected"}), 0) << second_log;

  // The killed replica comes back as a standby; the new leader revokes the node.
  ASSERT_TRUE(replicas_[f]->Restart().ok());
  {
    v1::RevokeNodeRequest req;
    req.set_node_name("node-a");
    v1::RevokeNodeResponse resp;
    grpc::Status st = AsAdmin([&](auto channel, grpc::ClientContext* ctx) {
      return v1::NodeEnrollService::NewStub(channel)->RevokeNode(ctx, req, &resp);
    });
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        return LinesWith(ReadFile(replicas_[second]->log_path()),
                         {"agent rejected", "node=node-a", "revoked"}) > 0;
      },
      60s, 100ms))
      << Logs();
  // Kill the revoking leader: the replica that takes over refuses the revoked certificate too.
  replicas_[second]->Kill9();
  EXPECT_TRUE(WaitFor(
      [&] {
        return LinesWith(ReadFile(replicas_[f]->log_path()),
                         {"agent rejected", "node=node-a", "the certificate is revoked"}) > 0;
      },
      90s, 100ms))
      << Logs() << ReadFile(dir_ + "/node-a.log");
  EXPECT_EQ(LinesWith(ReadFile(replicas_[f]->log_path()), {"agent connected", "node=node-a"}),
            1)  // before the revocation, in its first life
      << replicas_[f]->LogTail(40);
}

}  // namespace
}  // namespace gpupool
