// The services' gateway over loopback: real HTTP/1.1 clients, real replica servers (threads with
// their own listening sockets), a directory the test controls.
#include "api/gateway/gateway.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "api/auth.h"
#include "api/gateway/route.h"
#include "base/tls/pki.h"
#include "tests/api/gateway_fixture.h"
#include "tests/api/http_client.h"
#include "tests/api/https_client.h"

namespace gpupool::api::gateway {
namespace {

using namespace std::chrono_literals;
using testing::HttpClient;
using testing::HttpResult;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

using fixture::Chat;
using fixture::GatewayFixture;
using fixture::Replica;

class GatewayTest : public GatewayFixture {
 protected:
  HttpResult Get(const std::string& target,
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpClient c(gateway_->port());
    return c.Send(http::verb::get, target, "", std::move(headers));
  }
};

TEST(GatewayRoute, MatchesWholeSegmentsAndKeepsTheRestAndQuery) {
  const std::vector<std::string> names = {"acme/chat", "acme/research/chat"};
  auto m = MatchRoute("/services/acme/research/chat/v1/complete?x=1", names);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->service, 1u);
  EXPECT_EQ(m->rest, "/v1/complete?x=1");
  m = MatchRoute("/services/acme/chat", names);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->rest, "/");
  m = MatchRoute("/services/acme/chat?q", names);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->rest, "/?q");
  EXPECT_FALSE(MatchRoute("/services/acme/chatter/x", names));
  EXPECT_FALSE(MatchRoute("/v1/jobs", names));
  EXPECT_FALSE(MatchRoute("/services/", names));
}

TEST(GatewayRoute, PicksTheReadyReplicaWithFewestOutstandingRoundRobinOnTies) {
  std::vector<Candidate> c = {{true, 2}, {false, 0}, {true, 1}, {true, 1}};
  EXPECT_EQ(PickLeastOutstanding(c, 0), 2u);
  EXPECT_EQ(PickLeastOutstanding(c, 3), 3u);
  EXPECT_FALSE(PickLeastOutstanding({{false, 0}}, 0));
  EXPECT_TRUE(IsIdempotent("GET"));
  EXPECT_TRUE(IsIdempotent("PUT"));
  EXPECT_FALSE(IsIdempotent("POST"));
  EXPECT_FALSE(IsIdempotent("PATCH"));
}

TEST_F(GatewayTest, RoutesToTheServicesReadyReplicasWithTheRestOfThePath) {
  Replica a(101), b(102);
  dir_.Set({Chat({a.backend(), b.backend()})});
  Start();
  WaitRoutable();
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    HttpResult r = Get("/services/acme/research/chat/v1/models?limit=2",
                       {{"Authorization", "Bearer ignored"}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(" /v1/models?limit=2 "), std::string::npos) << r.body;
    // The caller's credential is the gateway's, never passed on to the replica.
    EXPECT_NE(r.body.find("auth=no"), std::string::npos) << r.body;
    seen.insert(r.body.substr(0, r.body.find(' ', 8)));
  }
  EXPECT_EQ(seen.size(), 2u);  // both replicas served
  EXPECT_EQ(Get("/services/acme/research/other/").status, 404);
  EXPECT_EQ(Get("/v1/jobs").status, 404);
}

// A client that cannot put the service in the path (a gRPC client's paths are its methods')
// names it in the gpupool-service field; the path then reaches the replica unchanged.
TEST_F(GatewayTest, RoutesByTheServiceFieldWhenThePathNamesNone) {
  Replica a(121);
  dir_.Set({Chat({a.backend()})});
  Start();
  WaitRoutable();
  HttpResult r = Get("/v1/complete?x=1", {{"gpupool-service", "acme/research/chat"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("replica 121 /v1/complete?x=1"), std::string::npos) << r.body;
  EXPECT_EQ(Get("/v1/complete", {{"gpupool-service", "acme/chat"}}).status, 404);
  EXPECT_EQ(Get("/v1/complete").status, 404);
}

TEST_F(GatewayTest, HoldsARequestWhileAReplicaStartsAndReportsItQueuedAndItsColdStart) {
  dir_.Set({Chat({})});  // scaled to zero
  Start();
  auto pending =
      std::async(std::launch::async, [&] { return Get("/services/acme/research/chat/x"); });
  // The held request is reported queued: the autoscaler's cue to start a replica.
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(10ms);
    std::lock_guard lock(dir_.mu);
    if (dir_.max_queued[7] >= 1) break;
  }
  {
    std::lock_guard lock(dir_.mu);
    EXPECT_GE(dir_.max_queued[7], 1);
  }
  // A replica comes up, still loading: not routed to until its readiness check passes.
  Replica a(201);
  a.ready = false;
  dir_.Set({Chat({a.backend()})});
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(pending.wait_for(0ms), std::future_status::timeout);
  EXPECT_EQ(a.served, 0);
  a.ready = true;
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
  HttpResult r = pending.get();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("replica 201 /x"), std::string::npos) << r.body;
  std::lock_guard lock(dir_.mu);
  ASSERT_EQ(dir_.cold_starts[7].size(), 1u);
  EXPECT_GE(dir_.cold_starts[7][0], 200);
}

TEST_F(GatewayTest, AnswersServiceUnavailableWithRetryAfterAndWhyWhenNoReplicaComesInTime) {
  RoutedService s = Chat({});
  s.below_reason = "0 of 1 replicas ready: replica job 9 is pending, OVER_QUOTA (acme in gpu)";
  dir_.Set({s});
  GatewayOptions o;
  o.hold_timeout = 300ms;
  Start(o);
  const auto t0 = std::chrono::steady_clock::now();
  HttpResult r = Get("/services/acme/research/chat/");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 290ms);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["Retry-After"], "5");
  EXPECT_NE(r.body.find("OVER_QUOTA (acme in gpu)"), std::string::npos) << r.body;
}

TEST_F(GatewayTest, RetriesIdempotentRequestsOnAnotherReplicaWhenOneDiesButNeverAPost) {
  Replica good(301), dead(302);
  dir_.Set({Chat({good.backend(), dead.backend()}, "")});
  Start();
  WaitRoutable();
  dead.drop = true;
  for (int i = 0; i < 10; ++i) {
    HttpResult r = Get("/services/acme/research/chat/item");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("replica 301"), std::string::npos) << r.body;
  }
  // A POST to a replica that dies after taking it is not sent again: it may have had effects.
  dir_.Set({Chat({dead.backend()}, "")});
  std::this_thread::sleep_for(100ms);
  HttpClient c(gateway_->port());
  HttpResult r = c.Send(http::verb::post, "/services/acme/research/chat/orders", "{}");
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body.find("not retried: POST is not idempotent"), std::string::npos) << r.body;
}

TEST_F(GatewayTest, KeepsItsConnectionsToAReplicaAliveAcrossRequests) {
  Replica a(601);
  dir_.Set({Chat({a.backend()})});
  Start();
  WaitRoutable();
  ASSERT_EQ(Get("/services/acme/research/chat/first").status, 200);
  const int before = a.accepted;
  for (int i = 0; i < 20; ++i) {
    // Each client closes its connection; the gateway keeps its own to the replica.
    HttpResult r = Get("/services/acme/research/chat/again");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(a.accepted, before);
  EXPECT_EQ(a.served, 21);
}

TEST_F(GatewayTest, AKeptConnectionClosedUnderARequestSendsAGetAgainOnANewOneButNotAPost) {
  Replica a(701);
  a.close_on_reuse = true;
  dir_.Set({Chat({a.backend()}, "")});
  Start();
  WaitRoutable();
  ASSERT_EQ(Get("/services/acme/research/chat/one").status, 200);
  const int before = a.accepted;
  // The kept connection is closed as the GET arrives: sent again on a new one, answered 200.
  HttpResult r = Get("/services/acme/research/chat/two");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("replica 701 /two"), std::string::npos) << r.body;
  EXPECT_EQ(a.accepted, before + 1);
  EXPECT_EQ(a.served, 2);
  // A POST on a kept connection that closes under it may have reached the replica: not resent.
  HttpClient c(gateway_->port());
  r = c.Send(http::verb::post, "/services/acme/research/chat/orders", "{}");
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body.find("not retried: POST is not idempotent"), std::string::npos) << r.body;
  EXPECT_EQ(a.served, 2);
}

TEST_F(GatewayTest, CallersNeedAKeyOfTheServicesTenantOrAbove) {
  Replica a(401);
  dir_.Set({Chat({a.backend()})});
  Result<Authenticator> auth = Authenticator::Create({
      ApiToken{"tok-acme", "acme", false, Role::kViewer},
      ApiToken{"tok-other", "globex", false, Role::kMember},
  });
  ASSERT_TRUE(auth.ok());
  GatewayOptions o;
  o.auth = &*auth;
  Start(o);
  WaitRoutable();
  EXPECT_EQ(Get("/services/acme/research/chat/").status, 401);
  EXPECT_EQ(Get("/services/acme/research/chat/", {{"Authorization", "Bearer nope"}}).status, 401);
  // Another tenant's key does not learn that the service exists.
  EXPECT_EQ(Get("/services/acme/research/chat/", {{"Authorization", "Bearer tok-other"}}).status,
            404);
  HttpResult r = Get("/services/acme/research/chat/", {{"Authorization", "Bearer tok-acme"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("auth=no"), std::string::npos);
}

// An API key the cache does not hold is read from PostgreSQL: that read must not stall the one
// thread every service's requests share. Here the key lookup blocks until the test lets it go
// (at most 5 s), and a caller with a token is served meanwhile.
TEST_F(GatewayTest, AKeyLookupDoesNotStallOtherCallers) {
  Replica a(411);
  dir_.Set({Chat({a.backend()})});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> lookups{0};
  Result<Authenticator> auth =
      Authenticator::Create({ApiToken{"tok-acme", "acme", false, Role::kViewer}},
                            [&](const std::string&) -> Result<std::optional<StoredKey>> {
                              ++lookups;
                              released.wait_for(5s);
                              return std::optional<StoredKey>();  // no such key
                            });
  ASSERT_TRUE(auth.ok());
  GatewayOptions o;
  o.auth = &*auth;
  Start(o);
  WaitRoutable();
  const std::string unknown = "Bearer gpk_0123456789ab_" + std::string(64, 'f');
  std::future<HttpResult> slow = std::async(std::launch::async, [&] {
    return Get("/services/acme/research/chat/", {{"Authorization", unknown}});
  });
  for (int i = 0; i < 500 && lookups.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(lookups.load(), 1);
  HttpResult r = Get("/services/acme/research/chat/fast", {{"Authorization", "Bearer tok-acme"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(slow.wait_for(0s), std::future_status::timeout) << "the lookup held the gateway";
  release.set_value();
  EXPECT_EQ(slow.get().status, 401);
}

TEST_F(GatewayTest, ServesOverTlsWithTheDaemonsCertificate) {
  char dir[] = "/tmp/gateway-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  Result<tls::CertAuthority> ca = tls::CertAuthority::LoadOrCreate(dir, {});
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  Replica a(501);
  dir_.Set({Chat({a.backend()})});
  GatewayOptions o;
  o.tls_cert_pem = ca->server_cert_pem();
  o.tls_key_pem = ca->server_key_pem();
  Start(o);
  WaitRoutable();
  HttpResult r = testing::HttpsCall(gateway_->port(), ca->ca_pem(), http::verb::get,
                                    "/services/acme/research/chat/tls");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("replica 501 /tls"), std::string::npos) << r.body;
  // Plain HTTP to the TLS port is not served.
  EXPECT_ANY_THROW(Get("/services/acme/research/chat/"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool::api::gateway
