// gateway_latency: what the services' gateway (api/gateway/gateway.h) adds to a request.
//
// One replica (an HTTP/1.1 server answering 200 at once, keep-alive, on a thread of its own) is
// reached two ways at the same offered rate: directly, and through a Gateway that routes
// /services/bench/echo/… to it (plain HTTP on both: TLS termination is a cost of its own, not
// routing's). The load is open-loop: request k is due at start + k / rate, sent on one of
// --connections keep-alive connections (k modulo their count), and its latency runs from when it
// was due to when its answer was read, so a stall counts for every request queued behind it.
// A third path, "gw+token", goes through a second Gateway that authenticates every caller (a
// token in the Authorization header): authentication runs on the gateway's auth threads, so this
// is what that hop and the check cost. Prints per rate and path: the rate achieved, p50 / p99 /
// p99.9 latency and errors, and the gateway's added p50 and p99 (gateway minus direct, and
// gw+token minus gateway, same rate, same run).
//   build/bench/gateway_latency [--rates 1000,10000] [--seconds 10] [--connections 32]
//                               [--json FILE]
#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/auth.h"
#include "api/gateway/gateway.h"
#include "bench/gateway_bench.h"

namespace gpupool {
namespace {

using bench::OneService;
using bench::Row;

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using Clock = std::chrono::steady_clock;

net::redirect_error_t<std::decay_t<decltype(net::use_awaitable)>> Into(beast::error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
}

// The replica: "ok" to every request, keep-alive, on one thread.
class Replica {
 public:
  Replica() : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    net::co_spawn(io_, Accept(), net::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Replica() {
    io_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  awaitable<void> Accept() {
    for (;;) {
      beast::error_code ec;
      tcp::socket s = co_await acceptor_.async_accept(Into(ec));
      if (ec) co_return;
      s.set_option(tcp::no_delay(true));
      net::co_spawn(io_, Serve(std::move(s)), net::detached);
    }
  }
  static awaitable<void> Serve(tcp::socket s) {
    beast::flat_buffer buf;
    for (;;) {
      http::request<http::string_body> req;
      beast::error_code ec;
      co_await http::async_read(s, buf, req, Into(ec));
      if (ec) co_return;
      http::response<http::string_body> res{http::status::ok, req.version()};
      res.set(http::field::content_type, "text/plain");
      res.body() = "ok\n";
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      co_await http::async_write(s, res, Into(ec));
      if (ec || !req.keep_alive()) co_return;
    }
  }

  net::io_context io_{1};
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread thread_;
};

struct Sample {
  std::vector<double> latency_ms;  // due → answered
  int64_t errors = 0;              // requests not answered 200
  double seconds = 0;              // first due → last answer
};

// Open-loop load at `rate` for `seconds` on `connections` keep-alive connections to port.
Sample Load(int port, const std::string& target, double rate, double seconds, int connections,
            const std::string& authorization = "") {
  net::io_context io{1};
  const int64_t total = static_cast<int64_t>(rate * seconds);
  Sample out;
  out.latency_ms.reserve(static_cast<size_t>(total));
  std::mutex mu;
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(50);
  Clock::time_point last = start;
  auto conn = [&](int index) -> awaitable<void> {
    tcp::socket s(io);
    beast::error_code ec;
    co_await s.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), Into(ec));
    if (ec) co_return;  // its share counts as errors
    s.set_option(tcp::no_delay(true));
    beast::flat_buffer buf;
    net::steady_timer timer(io);
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(true);
    if (!authorization.empty()) req.set(http::field::authorization, authorization);
    for (int64_t k = index; k < total; k += connections) {
      const Clock::time_point due =
          start + std::chrono::nanoseconds(static_cast<int64_t>(1e9 * k / rate));
      timer.expires_at(due);
      co_await timer.async_wait(Into(ec));
      co_await http::async_write(s, req, Into(ec));
      http::response<http::string_body> res;
      if (!ec) co_await http::async_read(s, buf, res, Into(ec));
      const Clock::time_point done = Clock::now();
      if (ec) co_return;  // the connection is gone: the rest of its share counts as errors
      if (res.result() != http::status::ok) continue;
      std::lock_guard lock(mu);
      out.latency_ms.push_back(std::chrono::duration<double, std::milli>(done - due).count());
      last = std::max(last, done);
    }
  };
  for (int i = 0; i < connections; ++i) net::co_spawn(io, conn(i), net::detached);
  io.run();
  out.seconds = std::chrono::duration<double>(last - start).count();
  out.errors = total - static_cast<int64_t>(out.latency_ms.size());
  return out;
}

int Run(int argc, char** argv) {
  std::vector<double> rates = {1000, 10000};
  double seconds = 10;
  int connections = 32;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: gateway_latency [--rates 1000,10000] [--seconds 10] [--connections 32] "
          "[--json FILE]\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gateway_latency: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    try {
      if (a == "--rates") {
        rates = bench::ParseRates(v);
      } else if (a == "--seconds") {
        seconds = std::stod(v);
      } else if (a == "--connections") {
        connections = std::max(1, std::stoi(v));
      } else if (a == "--json") {
        json = v;
      } else {
        std::fprintf(stderr, "gateway_latency: unknown option %s\n", a.c_str());
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "gateway_latency: %s: not a number: '%s'\n", a.c_str(), v.c_str());
      return 2;
    }
  }

  Replica replica;
  OneService directory(replica.port());
  api::gateway::GatewayOptions options;
  options.listen = "127.0.0.1:0";
  api::gateway::Gateway gateway(&directory, options);
  if (Status s = gateway.Start(); !s.ok()) {
    std::fprintf(stderr, "gateway_latency: %s\n", s.ToString().c_str());
    return 1;
  }
  Result<api::Authenticator> auth = api::Authenticator::Create(
      {api::ApiToken{"bench-token", "bench", false, api::Role::kViewer}});
  if (!auth.ok()) return 1;
  api::gateway::GatewayOptions with_auth = options;
  with_auth.auth = &*auth;
  api::gateway::Gateway checked(&directory, with_auth);
  if (Status s = checked.Start(); !s.ok()) {
    std::fprintf(stderr, "gateway_latency: %s\n", s.ToString().c_str());
    return 1;
  }
  const std::string token = "Bearer bench-token";
  // The gateways probe the replica before they route to it: wait for the first answers.
  for (int i = 0; i < 100; ++i) {
    if (Load(gateway.port(), "/services/bench/echo/", 100, 0.05, 1).errors == 0 &&
        Load(checked.port(), "/services/bench/echo/", 100, 0.05, 1, token).errors == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Warm every path (connections, allocators, the gateways' state).
  Load(replica.port(), "/", 1000, 1, connections);
  Load(gateway.port(), "/services/bench/echo/", 1000, 1, connections);
  Load(checked.port(), "/services/bench/echo/", 1000, 1, connections, token);

  std::vector<Row> rows;
  bench::PrintHeader();
  for (double rate : rates) {
    for (const std::string path : {"direct", "gateway", "gw+token"}) {
      const bool direct = path == "direct", keyed = path == "gw+token";
      Sample s = Load(direct  ? replica.port()
                      : keyed ? checked.port()
                              : gateway.port(),
                      direct ? "/" : "/services/bench/echo/", rate, seconds, connections,
                      keyed ? token : "");
      rows.push_back(bench::Summarize(rate, path, s.latency_ms, s.seconds, s.errors));
      bench::PrintRow(rows.back());
    }
    const Row& d = rows[rows.size() - 3];
    const Row& g = rows[rows.size() - 2];
    const Row& k = rows.back();
    bench::PrintAdded(rate, "added", d, g);
    bench::PrintAdded(rate, "+token", g, k);
  }
  gateway.Stop();
  checked.Stop();
  if (!json.empty())
    bench::WriteJson(json, seconds, "\"connections\":" + std::to_string(connections) + ",", rows);
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
