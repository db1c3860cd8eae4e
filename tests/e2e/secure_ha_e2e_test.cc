// Secure replicas (docs/ha.md, "Secure replicas"): two gpupoold replicas in the secure default
// (TLS, admin credential) on one PostgreSQL share one CA and one admin credential, published by
// the first in the database. A client that trusts one CA file and holds one credential works
// against the leader, and after the leader is killed with -9 it continues against the new leader
// over TLS with the same credential. A replica that already has a CA of its own is refused at
// start rather than silently serving with another CA. gpupoolctl given both addresses works over
// TLS too (every replica's certificate carries the name a client checks for a list).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/tls/pki.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"
#include "tests/support/leader_client.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::DaemonProcess;
using testing::WaitFor;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SecureHaE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> uri = testing::CreateTestDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    auto dir = testing::MakeTempDir("gpupool-secure-ha");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml") << "ha:\n  enabled: true\n  lease_ms: 1000\n";
    args_ = {"--config", dir_ + "/gpupoold.yaml", "--database", *uri};
  }
  void TearDown() override {
    replicas_.clear();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  void StartReplica(const std::string& data_dir = "") {
    auto d = DaemonProcess::Start(
        {.data_dir = data_dir, .extra_args = args_, .secure = true, .wait_until_serving = false});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    replicas_.push_back(std::move(d).value());
  }
  // The index of the replica that serves, waiting up to `timeout`; -1 if none.
  int Leader(std::chrono::seconds timeout) { return testing::ServingReplica(replicas_, timeout); }

  std::string dir_;
  std::vector<std::string> args_;
  std::vector<std::unique_ptr<DaemonProcess>> replicas_;
};

TEST_F(SecureHaE2eTest, TheClientKeepsItsCaAndCredentialAcrossAFailover) {
  StartReplica();
  StartReplica();
  DaemonProcess& first = *replicas_[0];
  DaemonProcess& second = *replicas_[1];
  // Both replicas end up with the same CA and admin credential, each file 0600.
  ASSERT_TRUE(WaitFor(
      [&] {
        return !first.ca_pem().empty() && first.ca_pem() == second.ca_pem() &&
               !first.admin_token().empty() && first.admin_token() == second.admin_token();
      },
      60s, 100ms))
      << first.LogTail(20) << second.LogTail(20);
  for (const DaemonProcess* r : {&first, &second}) {
    for (const std::string f : {"/admin.token", "/tls/ca.key", "/tls/ca.crt"}) {
      struct stat st {};
      ASSERT_EQ(::stat((r->data_dir() + f).c_str(), &st), 0) << f;
      EXPECT_EQ(st.st_mode & 0777, 0600u) << r->data_dir() << f;
    }
  }
  const int leader = Leader(60s);
  ASSERT_GE(leader, 0) << first.LogTail(20) << second.LogTail(20);

  // The client: one CA file and one credential, taken from the first replica, and both addresses.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = first.ca_pem();
  const std::string token = first.admin_token();
  testing::LeaderClient client(first.grpc_address() + "," + second.grpc_address(),
                               grpc::SslCredentials(ssl));
  auto create_pool = [&](const std::string& name) {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name(name);
    v1::Pool pool;
    return client.Call([&](auto channel, grpc::ClientContext* ctx) {
      ctx->AddMetadata("authorization", "Bearer " + token);
      return v1::PoolService::NewStub(channel)->CreatePool(ctx, req, &pool);
    });
  };
  grpc::Status st = create_pool("before");
  ASSERT_TRUE(st.ok()) << st.error_message();

  replicas_[static_cast<size_t>(leader)]->Kill9();
  const int next = 1 - leader;
  // The same client continues against the new leader over TLS with the same credential. A call
  // that reached the killed leader fails (it may have executed, so LeaderClient leaves the retry
  // to the caller); a read is safe to send again.
  v1::GetPoolRequest get;
  get.set_name("before");
  v1::Pool pool;
  EXPECT_TRUE(WaitFor(
      [&] {
        st = client.Call([&](auto channel, grpc::ClientContext* ctx) {
          ctx->AddMetadata("authorization", "Bearer " + token);
          return v1::PoolService::NewStub(channel)->GetPool(ctx, get, &pool);
        });
        return st.ok();
      },
      90s, 200ms))
      << st.error_message() << "\n"
      << replicas_[static_cast<size_t>(next)]->LogTail(20);
  EXPECT_EQ(pool.name(), "before");
  EXPECT_TRUE(create_pool("after").ok());
  EXPECT_TRUE(replicas_[static_cast<size_t>(next)]->Serving());

  // gpupoolctl given both addresses, the one CA file and the credential, over TLS.
  const ctltest::Outcome o =
      ctltest::RunCtl({"--server", first.grpc_address() + "," + second.grpc_address(), "--ca",
                       first.ca_path(), "--token", token, "pools", "list"},
                      {"GPUPOOL_CONFIG=" + dir_ + "/no-such-config"});
  EXPECT_EQ(o.exit, 0) << ctltest::Dump(o);
  EXPECT_NE(o.out.find("after"), std::string::npos) << ctltest::Dump(o);
}

TEST_F(SecureHaE2eTest, AReplicaWithAnotherCaOfItsOwnIsRefused) {
  StartReplica();
  ASSERT_GE(Leader(60s), 0) << replicas_[0]->LogTail(20);
  // A data directory that already holds a CA (made before, not the shared one).
  auto own = testing::MakeTempDir("gpupool-own-ca");
  ASSERT_TRUE(own.ok());
  ASSERT_TRUE(tls::CertAuthority::LoadOrCreate(*own + "/tls").ok());
  StartReplica(*own);
  DaemonProcess& refused = *replicas_[1];
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadFile(refused.log_path()).find("is not the one the replicas share") !=
               std::string::npos;
      },
      60s, 100ms))
      << refused.LogTail(20);
  EXPECT_NE(ReadFile(refused.log_path()).find(*own + "/tls/ca.crt"), std::string::npos);
  EXPECT_FALSE(refused.Serving());
}

}  // namespace
}  // namespace gpupool
