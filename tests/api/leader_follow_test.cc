// The client side of following the leader (api/client/leader_follow.h) and the standby's gRPC
// face (api/grpc/standby_server.h): what a standby answers, how a client reads it, and where a
// LeaderFollower sends the next attempt.
#include "api/client/leader_follow.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/grpc/standby_server.h"
#include "gpupool/v1/agent.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/wait_for.h"

namespace gpupool::api {
namespace {

using std::chrono::milliseconds;

v1::NotLeader Hint(const std::string& leader) {
  v1::NotLeader h;
  h.set_leader_address(leader);
  h.set_leader_http(leader.empty() ? "" : "https://" + leader);
  h.set_epoch(7);
  h.set_role("standby");
  return h;
}

LeaderFollower Follower(const std::string& list) {
  return LeaderFollower(list, [](const std::string& t) {
    return grpc::CreateChannel(t, grpc::InsecureChannelCredentials());
  });
}

TEST(LeaderFollowTest, TheHintSurvivesTheStatusDetails) {
  const grpc::Status st = NotLeaderStatus(Hint("10.0.0.2:7070"), "a standby");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(st.error_message(), "a standby");
  std::optional<v1::NotLeader> back = NotLeaderOf(st);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->leader_address(), "10.0.0.2:7070");
  EXPECT_EQ(back->leader_http(), "https://10.0.0.2:7070");
  EXPECT_EQ(back->epoch(), 7);
  // Wire-compatible with google.rpc.Status: code and message are there too.
  v1::RpcStatus details;
  ASSERT_TRUE(details.ParseFromString(st.error_details()));
  EXPECT_EQ(details.code(), 14);
  EXPECT_EQ(details.message(), "a standby");
  // Other statuses carry no hint.
  EXPECT_FALSE(NotLeaderOf(grpc::Status(grpc::StatusCode::UNAVAILABLE, "database down")));
  EXPECT_FALSE(NotLeaderOf(grpc::Status(grpc::StatusCode::UNAVAILABLE, "x", "not a proto")));
  EXPECT_FALSE(NotLeaderOf(grpc::Status(grpc::StatusCode::NOT_FOUND, "x", st.error_details())));
}

TEST(LeaderFollowTest, FollowsTheNamedLeaderAtOnceThenPausesWhileItIsGone) {
  LeaderFollower f = Follower("a:1,b:2,c:3");
  EXPECT_EQ(f.target(), "a:1,b:2,c:3");
  EXPECT_FALSE(f.following());
  auto first = f.channel();
  // A standby names c:3: go there at once.
  LeaderFollower::Next n = f.OnFailure(NotLeaderStatus(Hint("c:3"), ""));
  EXPECT_TRUE(n.retry);
  EXPECT_EQ(n.delay, milliseconds(0));
  EXPECT_EQ(f.target(), "c:3");
  EXPECT_TRUE(f.following());
  EXPECT_NE(f.channel(), first);
  // c:3 is gone (killed): back to the list after a pause.
  n = f.OnFailure(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses"));
  EXPECT_TRUE(n.retry);
  EXPECT_EQ(n.delay, milliseconds(50));
  EXPECT_EQ(f.target(), "a:1,b:2,c:3");
  // The standby still names c:3 (its lease has not run out yet): follow, but after a pause.
  n = f.OnFailure(NotLeaderStatus(Hint("c:3"), ""));
  EXPECT_TRUE(n.retry);
  EXPECT_EQ(n.delay, milliseconds(100));
  EXPECT_EQ(f.target(), "c:3");
  // No replica leads (the row expired): the list, pausing longer, up to the cap.
  n = f.OnFailure(NotLeaderStatus(Hint(""), ""));
  EXPECT_EQ(n.delay, milliseconds(200));
  EXPECT_EQ(f.target(), "a:1,b:2,c:3");
  for (int i = 0; i < 10; ++i) n = f.OnFailure(NotLeaderStatus(Hint(""), ""));
  EXPECT_EQ(n.delay, milliseconds(250));
  // The new leader is named: at once, however many pauses came before.
  n = f.OnFailure(NotLeaderStatus(Hint("b:2"), ""));
  EXPECT_EQ(n.delay, milliseconds(0));
  EXPECT_EQ(f.target(), "b:2");
  // b:2 won the lease but is still recovering (it names itself, leader-starting): ask it again.
  v1::NotLeader starting = Hint("b:2");
  starting.set_role("leader-starting");
  n = f.OnFailure(NotLeaderStatus(starting, ""));
  EXPECT_TRUE(n.retry);
  EXPECT_GT(n.delay, milliseconds(0));
  EXPECT_EQ(f.target(), "b:2");
  // A standby naming itself would be confused: start over from the list.
  n = f.OnFailure(NotLeaderStatus(Hint("b:2"), ""));
  EXPECT_TRUE(n.retry);
  EXPECT_EQ(f.target(), "a:1,b:2,c:3");
  // A success resets the pauses.
  f.OnSuccess();
  n = f.OnFailure(NotLeaderStatus(Hint(""), ""));
  EXPECT_EQ(n.delay, milliseconds(50));
}

TEST(LeaderFollowTest, WhatAServerMayHaveExecutedIsNotRetried) {
  LeaderFollower f = Follower("a:1,b:2");
  // The leader's own UNAVAILABLE (its database is down) or any other error: the caller's call.
  EXPECT_FALSE(f.OnFailure(grpc::Status(grpc::StatusCode::UNAVAILABLE, "database down")).retry);
  EXPECT_FALSE(f.OnFailure(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad")).retry);
  // Nothing reachable on the list itself: as with one server, the caller decides.
  EXPECT_FALSE(
      f.OnFailure(grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses"))
          .retry);
  EXPECT_FALSE(f.following());
  // Following a leader that answers with its own UNAVAILABLE: not retried either.
  f.OnFailure(NotLeaderStatus(Hint("b:2"), ""));
  EXPECT_FALSE(f.OnFailure(grpc::Status(grpc::StatusCode::UNAVAILABLE, "database down")).retry);
}

TEST(GrpcStandbyServerTest, EveryCallOfEveryServiceGetsTheLeader) {
  GrpcStandbyServer standby("127.0.0.1:0", {});
  ASSERT_TRUE(standby.Start().ok());
  ASSERT_GT(standby.port(), 0);
  const std::string me = "127.0.0.1:" + std::to_string(standby.port());
  auto channel = grpc::CreateChannel(me, grpc::InsecureChannelCredentials());

  auto list_pools = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListPoolsResponse resp;
    return v1::PoolService::NewStub(channel)->ListPools(&ctx, {}, &resp);
  };
  // Before the first poll: no leader known.
  grpc::Status st = list_pools();
  ASSERT_TRUE(NotLeaderOf(st).has_value()) << st.error_message();
  EXPECT_EQ(NotLeaderOf(st)->leader_address(), "");

  standby.SetLeader(Hint("10.0.0.9:7070"));
  st = list_pools();
  ASSERT_TRUE(NotLeaderOf(st).has_value()) << st.error_message();
  EXPECT_EQ(NotLeaderOf(st)->leader_address(), "10.0.0.9:7070");
  EXPECT_NE(st.error_message().find("10.0.0.9:7070"), std::string::npos);

  // The agent stream too: it ends at once with the same answer.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = v1::AgentService::NewStub(channel)->Connect(&ctx);
  v1::SchedulerMessage msg;
  EXPECT_FALSE(stream->Read(&msg));
  st = stream->Finish();
  ASSERT_TRUE(NotLeaderOf(st).has_value()) << st.error_message();
  EXPECT_EQ(NotLeaderOf(st)->leader_address(), "10.0.0.9:7070");

  // A client starting on the standby is sent to the leader.
  LeaderFollower f = Follower(me);
  EXPECT_TRUE(f.OnFailure(st).retry);
  EXPECT_EQ(f.target(), "10.0.0.9:7070");

  standby.Shutdown();
  // The port is free again for the leader's own server.
  GrpcStandbyServer again("127.0.0.1:" + std::to_string(standby.port()), {});
  EXPECT_TRUE(again.Start().ok());
}

// A TCP connection to 127.0.0.1:port that sends nothing; -1 when connect() fails.
int IdleConnection(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The server closed this connection (EOF or reset), reading whatever it sent first.
bool ClosedByPeer(int fd) {
  char buf[256];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
  }
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// The standby's ports have the leader's flood protection (issue 16): one client address holds at
// most its limit of connections, and a connection that never handshakes is closed.
TEST(GrpcStandbyServerTest, OneClientHoldsAtMostItsLimitAndSilentConnectionsAreClosed) {
  constexpr int kLimit = 8;
  GrpcStandbyOptions limited;
  limited.max_connections_per_client = kLimit;
  GrpcStandbyServer standby("127.0.0.1:0", limited);
  ASSERT_TRUE(standby.Start().ok());
  standby.SetLeader(Hint("10.0.0.9:7070"));
  auto list_pools = [&] {  // a fresh connection each time (its own subchannel pool)
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(standby.port()),
                                             grpc::InsecureChannelCredentials(), args);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListPoolsResponse resp;
    return v1::PoolService::NewStub(channel)->ListPools(&ctx, {}, &resp);
  };
  std::vector<int> held;
  for (int i = 0; i < kLimit; ++i) {
    const int fd = IdleConnection(standby.port());
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  // The next one is closed before a byte is read, and a real client from the same address is
  // refused (no NotLeader: it never reached the service).
  const int extra = IdleConnection(standby.port());
  ASSERT_GE(extra, 0);
  EXPECT_TRUE(testing::WaitFor([&] { return ClosedByPeer(extra); }, std::chrono::seconds(30)));
  ::close(extra);
  grpc::Status st = list_pools();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(NotLeaderOf(st).has_value()) << st.error_message();
  // A connection given up frees its slot: the client gets the leader's address again.
  ::close(held.back());
  held.pop_back();
  EXPECT_TRUE(testing::WaitFor([&] { return NotLeaderOf(list_pools()).has_value(); },
                               std::chrono::seconds(30), std::chrono::milliseconds(200)));
  for (int fd : held) ::close(fd);
  standby.Shutdown();

  // Silent connections are closed once the handshake timeout passes.
  GrpcStandbyOptions impatient;
  impatient.handshake_timeout = milliseconds(200);
  GrpcStandbyServer quick("127.0.0.1:0", impatient);
  ASSERT_TRUE(quick.Start().ok());
  const int fd = IdleConnection(quick.port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(testing::WaitFor([&] { return ClosedByPeer(fd); }, std::chrono::seconds(60)))
      << "the standby did not close a connection that never handshook";
  ::close(fd);
}

}  // namespace
}  // namespace gpupool::api
