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

// A replica: answers "replica <id> <target> auth=<yes|no>" (after ?sleep_ms=N), /healthz 200 once
// `ready`, and with `drop` closes every connection without a word (a process that died). With
// `close_on_reuse` it closes a connection that comes back with a second request, unanswered: a
// server whose keep-alive timeout ran out as the gateway reused the connection.
class Replica {
 public:
  explicit Replica(int64_t id) : id_(id), acceptor_(io_) {
    tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Serve(); });
  }
  ~Replica() {
    stopping_ = true;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& t : conns_) t.join();
  }
  int port() const { return port_; }
  Backend backend() const { return Backend{id_, "127.0.0.1", port_}; }

  std::atomic<bool> ready{true};
  std::atomic<bool> drop{false};
  std::atomic<bool> close_on_reuse{false};
  std::atomic<int> served{0};
  std::atomic<int> accepted{0};  // connections, probes' included

 private:
  void Serve() {
    while (!stopping_) {
      tcp::socket s(io_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      if (ec) return;
      ++accepted;
      std::lock_guard lock(mu_);
      open_.insert(s.native_handle());
      conns_.emplace_back([this, sock = std::move(s)]() mutable { Conn(std::move(sock)); });
    }
  }
  void Conn(tcp::socket s) {
    const int fd = s.native_handle();
    boost::beast::flat_buffer buf;
    for (int answered = 0;; ++answered) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(s, buf, req, ec);
      if (ec || drop || (close_on_reuse && answered > 0)) break;
      http::response<http::string_body> res{http::status::ok, req.version()};
      const std::string target(req.target());
      if (target == "/healthz") {
        res.result(ready ? http::status::ok : http::status::service_unavailable);
      } else {
        if (const size_t at = target.find("sleep_ms="); at != std::string::npos) {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(target.substr(at + 9))));
        }
        ++served;
        res.body() = "replica " + std::to_string(id_) + " " + target +
                     " auth=" + (req.count(http::field::authorization) ? "yes" : "no");
      }
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      http::write(s, res, ec);
      if (ec || !req.keep_alive()) break;
    }
    std::lock_guard lock(mu_);
    open_.erase(fd);
    boost::system::error_code ignored;
    s.shutdown(tcp::socket::shutdown_both, ignored);
  }

  const int64_t id_;
  net::io_context io_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mu_;
  std::set<int> open_;
  std::vector<std::thread> conns_;
};

class TestDirectory final : public Directory {
 public:
  std::vector<RoutedService> Services() override {
    std::lock_guard lock(mu);
    return services;
  }
  void ReportLoad(int64_t id, const ServiceLoadSample& s) override {
    std::lock_guard lock(mu);
    max_queued[id] = std::max(max_queued[id], s.queued);
    max_in_flight[id] = std::max(max_in_flight[id], s.in_flight);
    ++reports;
  }
  void ReportColdStart(int64_t id, int64_t ms) override {
    std::lock_guard lock(mu);
    cold_starts[id].push_back(ms);
  }
  void Set(std::vector<RoutedService> s) {
    std::lock_guard lock(mu);
    services = std::move(s);
  }

  std::mutex mu;
  std::vector<RoutedService> services;
  std::map<int64_t, double> max_queued, max_in_flight;
  std::map<int64_t, std::vector<int64_t>> cold_starts;
  int reports = 0;
};

RoutedService Chat(std::vector<Backend> running, std::string readiness = "/healthz") {
  RoutedService s;
  s.id = 7;
  s.tenant = "acme/research";
  s.name = "chat";
  s.readiness_path = std::move(readiness);
  s.running = std::move(running);
  return s;
}

class GatewayTest : public ::testing::Test {
 protected:
  void Start(GatewayOptions o = {}) {
    o.probe_interval = 20ms;
    o.refresh_interval = 20ms;
    o.report_interval = 20ms;
    gateway_ = std::make_unique<Gateway>(&dir_, o);
    ASSERT_TRUE(gateway_->Start().ok());
  }
  HttpResult Get(const std::string& target,
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpClient c(gateway_->port());
    return c.Send(http::verb::get, target, "", std::move(headers));
  }
  // Waits until the gateway has probed `n` replicas ready (a request reaches one).
  void WaitRoutable() {
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(10ms);
      std::lock_guard lock(dir_.mu);
      if (dir_.reports > 3) break;
    }
  }

  TestDirectory dir_;
  std::unique_ptr<Gateway> gateway_;
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
