// End to end: gpupoold's secure default, as a fresh install meets it — the generated CA and admin
// credential (0600), TLS on the gRPC and REST ports, authentication always on, no detail leaked
// to a wrong credential — the node join token (0600) and agents that register only with a
// certificate bought with it, and --insecure refused off loopback.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "gpupool/v1/agent.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/api/https_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using api::testing::HttpCall;
using api::testing::HttpResult;
using api::testing::HttpsCall;
using testing::DaemonProcess;
namespace http = boost::beast::http;

unsigned Mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

class SecureDefault : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start({.data_dir = "", .extra_args = {}, .secure = true});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(SecureDefault, FirstStartWritesTheCaAndAnAdminCredentialReadableByTheOwnerOnly) {
  EXPECT_EQ(Mode(daemon_->data_dir() + "/admin.token"), 0600u);
  EXPECT_EQ(Mode(daemon_->ca_path()), 0600u);
  EXPECT_EQ(daemon_->admin_token().size(), 64u);
  // Kept across restarts: scripts may rely on the file.
  const std::string token = daemon_->admin_token();
  ASSERT_EQ(daemon_->Stop(), 0);
  ASSERT_TRUE(daemon_->Restart().ok());
  EXPECT_EQ(daemon_->admin_token(), token);
}

TEST_F(SecureDefault, GrpcNeedsTlsAndACredential) {
  v1::ListPoolsResponse resp;
  {  // plaintext to the TLS port: no answer
    auto stub = v1::PoolService::NewStub(
        grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    EXPECT_EQ(stub->ListPools(&ctx, {}, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  auto stub = v1::PoolService::NewStub(daemon_->Channel());
  for (const std::string& header :
       {std::string(), std::string("Bearer wrong-token"), std::string("Bearer gpk_000000000000_00"),
        "Bearer " + daemon_->admin_token() + "x"}) {
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata("authorization", header);
    const grpc::Status st = stub->ListPools(&ctx, {}, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << header;
    EXPECT_EQ(st.error_message().find(daemon_->admin_token()), std::string::npos);
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + daemon_->admin_token());
  EXPECT_TRUE(stub->ListPools(&ctx, {}, &resp).ok());
}

TEST_F(SecureDefault, RestServesHttpsOnlyAndNeedsACredential) {
  const std::string ca = daemon_->ca_pem();
  const int port = daemon_->http_port();
  HttpResult r = HttpsCall(port, ca, http::verb::get, "/v1/pools");
  EXPECT_EQ(r.status, 401) << r.body;
  r = HttpsCall(port, ca, http::verb::get, "/v1/pools", "", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(r.body.find("nope"), std::string::npos) << "credentials never echo: " << r.body;
  r = HttpsCall(port, ca, http::verb::get, "/v1/pools", "",
                {{"Authorization", "Bearer " + daemon_->admin_token()}});
  EXPECT_EQ(r.status, 200) << r.body;
  // Probes stay unauthenticated, over TLS.
  EXPECT_EQ(HttpsCall(port, ca, http::verb::get, "/readyz").status, 200);
  // A client that does not trust the CA fails the handshake.
  EXPECT_EQ(HttpsCall(port, "", http::verb::get, "/readyz").status, 0);
  // Plain HTTP gets no HTTP answer.
  bool plaintext_answered = false;
  try {
    plaintext_answered = HttpCall(port, http::verb::get, "/readyz").status != 0;
  } catch (const std::exception&) {
  }
  EXPECT_FALSE(plaintext_answered);
}

// The anonymous-node hole (issue 30): on a fresh default install nobody registers a node without
// a node certificate — no credential, the join token itself, a wrong token; any node name, any
// pool — while a real agent given the join token joins, registers with its certificate and runs a
// task.
TEST_F(SecureDefault, RegistrationNeedsANodeCertificateAndTheJoinTokenBuysOne) {
  const std::string token_path = daemon_->node_token_path();
  EXPECT_EQ(Mode(token_path), 0600u);
  std::ifstream token_in(token_path);
  std::string join_token;
  std::getline(token_in, join_token);
  EXPECT_EQ(join_token.size(), 64u);
  EXPECT_NE(join_token, daemon_->admin_token());
  ASSERT_TRUE(daemon_->CreatePool("gpu").ok());

  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = daemon_->ca_pem();
  for (const std::string& token : {std::string(), join_token, std::string("wrong-0123456789abc")}) {
    for (const std::string& node : {std::string("intruder"), std::string("node-a")}) {
      for (const std::string& pool : {std::string("gpu"), std::string("no-such-pool")}) {
        auto channel = grpc::CreateChannel(daemon_->grpc_address(), grpc::SslCredentials(tls));
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        auto stream = v1::AgentService::NewStub(channel)->Connect(&ctx);
        v1::AgentMessage m;
        v1::Register* r = m.mutable_register_();
        r->set_node_name(node);
        r->set_pool(pool);
        r->set_token(token);
        r->set_cpu_milli(1000);
        r->set_memory_mib(1024);
        stream->Write(m);
        v1::SchedulerMessage in;
        EXPECT_FALSE(stream->Read(&in)) << "registered " << node << " without a certificate";
        grpc::Status st = stream->Finish();
        EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << node << "/" << pool << ": " << st.error_message();
        EXPECT_EQ(st.error_message().find(join_token), std::string::npos);
      }
    }
  }

  // A real agent with the join token and the CA joins, gets its certificate and runs a task.
  Result<std::string> dir = testing::MakeTempDir("gpupool-e2e-join");
  ASSERT_TRUE(dir.ok());
  testing::SingleAgent::Options o;
  o.dir = *dir;
  testing::SingleAgent agent(o);
  agent.Connect(*daemon_);
  ASSERT_TRUE(agent.StartAndWaitReady(std::chrono::seconds(60))) << daemon_->LogTail(20);
  testing::ShellJob shell;
  shell.script = "echo joined";
  const std::string job = agent.Submit(shell);
  ASSERT_FALSE(job.empty());
  EXPECT_TRUE(testing::WaitFor([&] { return agent.Task(job).state() == v1::TASK_STATE_SUCCEEDED; },
                               std::chrono::seconds(60), std::chrono::milliseconds(100)))
      << v1::TaskState_Name(agent.Task(job).state());
  agent.Stop();
  if (!HasFailure()) std::filesystem::remove_all(*dir);
}

// Join tokens an admin creates (issue 30), with the real gpupoolctl and real agents: a token for
// one node enrols one, the next agent with it is refused saying why, and the list shows it used
// up with the node it enrolled.
TEST_F(SecureDefault, AJoinTokenForOneNodeEnrolsOneAndTheListSaysSo) {
  ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
  Result<std::string> dir = testing::MakeTempDir("gpupool-e2e-join-token");
  ASSERT_TRUE(dir.ok());
  auto ctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::BinaryPath("gpupoolctl"),
                                     "--server",
                                     daemon_->grpc_address(),
                                     "--ca",
                                     daemon_->ca_path(),
                                     "--token",
                                     daemon_->admin_token()};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = *dir + "/ctl.log";
    std::filesystem::remove(log);
    auto child = testing::ChildProcess::Spawn(argv, log);
    EXPECT_TRUE(child.ok());
    const int status = child.ok() ? (*child)->Wait(std::chrono::seconds(60)) : -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string created =
      ctl({"join-tokens", "create", "--uses", "1", "--expires-in", "1h", "--note", "e2e"});
  const size_t at = created.find("gpj_");
  ASSERT_NE(at, std::string::npos) << created;
  const std::string token = created.substr(at, created.find('\n', at) - at);
  const std::string token_file = *dir + "/join.token";
  std::ofstream(token_file) << token << "\n";
  std::filesystem::permissions(
      token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  testing::SingleAgent::Options a;
  a.dir = *dir;
  a.node = "node-a";
  a.token_file = token_file;
  testing::SingleAgent first(a);
  first.Connect(*daemon_);
  ASSERT_TRUE(first.StartAndWaitReady(std::chrono::seconds(60))) << daemon_->LogTail(20);

  testing::SingleAgent::Options b = a;
  b.node = "node-b";
  testing::SingleAgent second(b);
  second.Connect(*daemon_);
  ASSERT_TRUE(second.Start().ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        std::ifstream in(*dir + "/node-b.log");
        const std::string log((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
        return log.find("has been used 1 of 1 times") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << "the second agent was not refused with the reason";
  EXPECT_NE(second.Node().state(), v1::NODE_STATE_READY);

  const std::string listed = ctl({"join-tokens", "list"});
  EXPECT_NE(listed.find("used-up"), std::string::npos) << listed;
  EXPECT_NE(listed.find("1/1"), std::string::npos) << listed;
  EXPECT_NE(listed.find("node-a"), std::string::npos) << listed;
  EXPECT_EQ(listed.find(token), std::string::npos) << "the list shows the token";
  second.Stop();
  first.Stop();
  if (!HasFailure()) std::filesystem::remove_all(*dir);
}

TEST(InsecureMode, IsRefusedOffLoopback) {
  auto dir = testing::MakeTempDir("gpupoold-insecure");
  ASSERT_TRUE(dir.ok());
  const std::string log = *dir + "/out.log";
  auto child = testing::ChildProcess::Spawn(
      {testing::BinaryPath("gpupoold"), "--insecure", "--data-dir", *dir + "/d", "--grpc-listen",
       "0.0.0.0:0", "--http-listen", "127.0.0.1:0"},
      log);
  ASSERT_TRUE(child.ok());
  const int status = (*child)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("--insecure: --grpc-listen '0.0.0.0:0' is not a loopback address"),
            std::string::npos)
      << text.str();
}

}  // namespace
}  // namespace gpupool
