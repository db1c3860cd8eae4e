// The services' gateway's tests' common parts: a directory the test controls, the service most
// tests route to, and a gateway started with quick timers.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/gateway/directory.h"
#include "api/gateway/gateway.h"

namespace gpupool::api::gateway::fixture {

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

inline RoutedService Chat(std::vector<Backend> running, std::string readiness = "/healthz") {
  RoutedService s;
  s.id = 7;
  s.tenant = "acme/research";
  s.name = "chat";
  s.readiness_path = std::move(readiness);
  s.running = std::move(running);
  return s;
}

class GatewayFixture : public ::testing::Test {
 protected:
  void Start(GatewayOptions o = {}) {
    using namespace std::chrono_literals;
    o.probe_interval = 20ms;
    o.refresh_interval = 20ms;
    o.report_interval = 20ms;
    gateway_ = std::make_unique<Gateway>(&dir_, o);
    ASSERT_TRUE(gateway_->Start().ok());
  }
  // Waits until the gateway has read the directory and reported a few times: a replica that
  // accepts connections has been probed ready by then.
  void WaitRoutable() {
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::lock_guard lock(dir_.mu);
      if (dir_.reports > 3) break;
    }
  }

  TestDirectory dir_;
  std::unique_ptr<Gateway> gateway_;
};

}  // namespace gpupool::api::gateway::fixture
