// Clients and agents follow the leader (docs/ha.md): three gpupoold replicas on one PostgreSQL.
// A standby serves its ports but executes nothing: gRPC calls get UNAVAILABLE with a NotLeader
// naming the leader, REST gets 307 to the leader's URL, /readyz says 503 with role standby.
// gpupoolctl given the standby's address first succeeds; an agent configured with every address
// (standby first) registers with the leader, and after the leader is killed with -9 it reconnects
// to the new one, which dispatches a job to it.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "api/client/leader_follow.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/cmd/run_ctl.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/leader_client.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::DaemonProcess;

constexpr char kConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 6000
  node_lease_ms: 6000  # L = T: this test's scenarios predate the long lease
  node_lease_stop_grace_ms: 1000
  node_lease_margin_ms: 1000
ha:
  enabled: true
  lease_ms: 1000
)";

constexpr int kReplicas = 3;

struct HttpReply {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

// One plain HTTP/1.1 GET on 127.0.0.1:port (the standby closes after one answer).
HttpReply Get(int port, const std::string& path) {
  HttpReply reply;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return reply;
  }
  const std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return reply;
  }
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const size_t split = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 ", 0) != 0 || split == std::string::npos) return reply;
  reply.status = std::stoi(all.substr(9, 3));
  reply.head = all.substr(0, split);
  reply.body = all.substr(split + 4);
  return reply;
}

class LeaderFollowE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = testing::TestPostgres::Start();
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    pg_ = std::move(pg).value();
    Result<std::string> uri = pg_->CreateDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    Result<std::string> dir = testing::MakeTempDir("gpupool-follow-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml") << kConfig;
    auto started = DaemonProcess::StartReplicas(
        kReplicas, {"--config", dir_ + "/gpupoold.yaml", "--database", *uri});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    replicas_ = std::move(started).value();
    leader_ = Leader(60s);
    ASSERT_GE(leader_, 0) << "no replica took the lead";
    standby_ = (leader_ + 1) % kReplicas;
    // Every standby knows the leader (they poll the lease every lease/10).
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          for (int i = 0; i < kReplicas; ++i) {
            if (i != leader_ && NotLeaderAt(i).leader_address() != Replica(leader_).grpc_address())
              return false;
          }
          return true;
        },
        30s, 50ms));
  }

  void TearDown() override {
    for (auto& a : agents_) {
      a->Signal(SIGTERM);
      a->Wait(10s);
    }
    agents_.clear();
    replicas_.clear();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  DaemonProcess& Replica(int i) { return *replicas_[static_cast<size_t>(i)]; }

  // The index of the replica that serves, waiting up to `timeout`; -1 if none.
  int Leader(std::chrono::seconds timeout) {
    int found = -1;
    testing::WaitFor(
        [&] {
          for (int i = 0; i < kReplicas; ++i) {
            if (Replica(i).Serving()) found = i;
          }
          return found >= 0;
        },
        timeout, 20ms);
    return found;
  }

  // What replica i answers a gRPC call with when it is a standby (an empty NotLeader if it
  // answered something else).
  v1::NotLeader NotLeaderAt(int i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::ListPoolsResponse resp;
    grpc::Status st = v1::PoolService::NewStub(Replica(i).Channel())->ListPools(&ctx, {}, &resp);
    return api::NotLeaderOf(st).value_or(v1::NotLeader{});
  }

  // Every address, standby first.
  std::string StandbyFirstTargets() {
    std::string t = Replica(standby_).grpc_address();
    for (int i = 0; i < kReplicas; ++i) {
      if (i != standby_) t += "," + Replica(i).grpc_address();
    }
    return t;
  }

  std::unique_ptr<testing::TestPostgres> pg_;
  std::string dir_;
  std::vector<std::unique_ptr<DaemonProcess>> replicas_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
  int leader_ = -1;
  int standby_ = -1;
};

TEST_F(LeaderFollowE2eTest, AStandbyAnswersWithTheLeaderAndExecutesNothing) {
  // gRPC: UNAVAILABLE with the leader's address in the status details and the trailer.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("made-on-a-standby");
    v1::Pool pool;
    grpc::Status st =
        v1::PoolService::NewStub(Replica(standby_).Channel())->CreatePool(&ctx, req, &pool);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
    std::optional<v1::NotLeader> hint = api::NotLeaderOf(st);
    ASSERT_TRUE(hint.has_value()) << st.error_message();
    EXPECT_EQ(hint->leader_address(), Replica(leader_).grpc_address());
    EXPECT_EQ(hint->leader_http(),
              "http://127.0.0.1:" + std::to_string(Replica(leader_).http_port()));
    EXPECT_EQ(hint->role(), "standby");
    EXPECT_GT(hint->epoch(), 0);
    auto trailer = ctx.GetServerTrailingMetadata().find(api::kLeaderTrailer);
    ASSERT_NE(trailer, ctx.GetServerTrailingMetadata().end());
    EXPECT_EQ(std::string(trailer->second.data(), trailer->second.size()),
              Replica(leader_).grpc_address());
  }
  // Nothing was executed: the leader has no such pool.
  {
    testing::LeaderClient client(Replica(leader_).grpc_address());
    v1::GetPoolRequest req;
    req.set_name("made-on-a-standby");
    v1::Pool pool;
    grpc::Status st = client.Call([&](auto ch, grpc::ClientContext* ctx) {
      return v1::PoolService::NewStub(ch)->GetPool(ctx, req, &pool);
    });
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  }

  // REST: /healthz alive, /readyz not ready with the role, API paths redirected to the leader.
  const int http = Replica(standby_).http_port();
  HttpReply health = Get(http, "/healthz");
  EXPECT_EQ(health.status, 200) << health.head;
  EXPECT_NE(health.body.find("\"role\":\"standby\""), std::string::npos) << health.body;
  HttpReply ready = Get(http, "/readyz");
  EXPECT_EQ(ready.status, 503) << ready.head;
  EXPECT_NE(ready.body.find("\"role\":\"standby\""), std::string::npos) << ready.body;
  EXPECT_NE(ready.body.find(Replica(leader_).grpc_address()), std::string::npos) << ready.body;
  const std::string leader_url = "http://127.0.0.1:" + std::to_string(Replica(leader_).http_port());
  HttpReply pools = Get(http, "/v1/pools?limit=5");
  EXPECT_EQ(pools.status, 307) << pools.head;
  EXPECT_NE(pools.head.find("Location: " + leader_url + "/v1/pools?limit=5"), std::string::npos)
      << pools.head;
  EXPECT_NE(pools.head.find("Gpupool-Leader: " + leader_url), std::string::npos) << pools.head;
  // The leader itself is ready.
  EXPECT_EQ(Get(Replica(leader_).http_port(), "/readyz").status, 200);

  // gpupoolctl pointed at the standby first: the command succeeds on the leader.
  ctltest::Outcome o =
      ctltest::RunCtl({"--server", StandbyFirstTargets(), "pools", "create", "gpu"});
  EXPECT_EQ(o.exit, 0) << ctltest::Dump(o);
  o = ctltest::RunCtl({"--server", Replica(standby_).grpc_address(), "pools", "list"});
  EXPECT_EQ(o.exit, 0) << ctltest::Dump(o);
  EXPECT_NE(o.out.find("gpu"), std::string::npos) << ctltest::Dump(o);
}

TEST_F(LeaderFollowE2eTest, AnAgentFollowsTheLeaderAcrossAKill) {
  testing::LeaderClient client(StandbyFirstTargets());
  {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("gpu");
    v1::Pool pool;
    grpc::Status st = client.Call([&](auto ch, grpc::ClientContext* ctx) {
      return v1::PoolService::NewStub(ch)->CreatePool(ctx, req, &pool);
    });
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  testing::AgentProcessOptions o;
  o.dir = dir_;
  o.node = "node-0";
  o.scheduler = StandbyFirstTargets();
  auto agent = testing::StartAgentProcess(o);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  agents_.push_back(std::move(agent).value());

  auto submit_and_wait = [&] {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant("acme/e2e/tester");
    s->set_pool("gpu");
    s->set_task_count(1);
    s->mutable_template_()->add_command("/bin/true");
    s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
    v1::SubmitJobResponse resp;
    grpc::Status st = client.Call([&](auto ch, grpc::ClientContext* ctx) {
      return v1::JobService::NewStub(ch)->SubmitJob(ctx, req, &resp);
    });
    if (!st.ok()) {
      ADD_FAILURE() << "submit: " << st.error_message();
      return false;
    }
    return testing::WaitFor(
        [&] {
          v1::GetJobRequest get;
          get.set_job_id(resp.job_id());
          v1::Job job;
          return client
                     .Call([&](auto ch, grpc::ClientContext* ctx) {
                       return v1::JobService::NewStub(ch)->GetJob(ctx, get, &job);
                     })
                     .ok() &&
                 job.state() == v1::JOB_STATE_SUCCEEDED;
        },
        90s, 100ms);
  };
  // The agent found the leader through the standby listed first: the job ran on it.
  ASSERT_TRUE(submit_and_wait()) << Replica(leader_).LogTail(20);

  Replica(leader_).Kill9();
  const int next = Leader(60s);
  ASSERT_GE(next, 0) << "no standby took over";
  ASSERT_NE(next, leader_);
  // Only an agent connected to the new leader can run this job.
  EXPECT_TRUE(submit_and_wait()) << Replica(next).LogTail(30);
  std::ifstream log(dir_ + "/node-0.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("following the leader"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
