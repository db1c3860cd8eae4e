#include "api/rest/http_server.h"

#include <prometheus/registry.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/rest/http_session.h"
#include "base/log.h"

namespace gpupool::api {

using rest::net::ip::tcp;
namespace net = rest::net;

struct HttpServer::Impl {
  Impl(ApiService& service, const Authenticator& auth, std::shared_ptr<prometheus::Registry> reg,
       std::string address, HttpServerOptions o)
      : registry(std::move(reg)),
        listen_address(std::move(address)),
        options(std::move(o)),
        metrics(registry.get()),
        api(service, auth, registry, options.audit, options.console_sign_in),
        gate(std::make_shared<rest::Gate>()) {}

  void DoAccept();
  void RunIo();
  // A slot in `client`'s connection count, released when the returned pointer dies; null when
  // the client already holds max_connections_per_client.
  std::shared_ptr<void> TakeClientSlot(const std::string& client);
  // At max_connections: closes the connection that has waited longest for a request, so idle
  // connections cannot keep out one with a request; false when every one has a request in hand.
  bool MakeRoom();
  std::atomic<uint64_t> at_cap{0};

  struct ClientCounts {
    std::mutex mu;
    std::unordered_map<std::string, size_t> open;  // guarded by mu; by client address
    uint64_t refused = 0;                          // guarded by mu
  };

  // Destroyed last: sessions still referenced by queued handlers die with it.
  net::io_context ioc;
  std::shared_ptr<prometheus::Registry> registry;
  const std::string listen_address;
  const HttpServerOptions options;
  rest::HttpMetrics metrics;
  rest::RestApi api;
  std::shared_ptr<rest::Gate> gate;
  rest::SessionRegistry sessions;
  std::shared_ptr<ClientCounts> clients = std::make_shared<ClientCounts>();
  std::optional<net::ssl::context> tls;   // set up by Start() when options ask for HTTPS
  std::optional<tcp::acceptor> acceptor;  // used on its strand once serving
  std::optional<net::steady_timer> retry_timer;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;

  std::mutex mu;  // serialises Start() and Shutdown()
  int port = 0;
  bool started = false;
  bool stopped = false;
};

void HttpServer::Impl::DoAccept() {
  acceptor->async_accept(net::make_strand(ioc), [this](rest::beast::error_code ec,
                                                       tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      // Out of file descriptors and the like: back off instead of spinning.
      LogWarn("api.http", "accept failed", {{"error", ec.message()}});
      retry_timer->expires_after(std::chrono::milliseconds(100));
      retry_timer->async_wait([this](rest::beast::error_code wait_ec) {
        if (!wait_ec && acceptor->is_open()) DoAccept();
      });
      return;
    }
    std::shared_ptr<void> slot;
    if (options.max_connections_per_client > 0) {
      rest::beast::error_code addr_ec;
      const tcp::endpoint peer = socket.remote_endpoint(addr_ec);
      slot = TakeClientSlot(addr_ec ? std::string("?") : peer.address().to_string());
      if (!slot) {
        socket.close(addr_ec);  // over its limit: refused before any byte is read
        DoAccept();
        return;
      }
    }
    if (options.max_connections > 0 && sessions.size() >= options.max_connections && !MakeRoom()) {
      rest::beast::error_code close_ec;
      socket.close(close_ec);  // full of connections with requests in hand: refused
      DoAccept();
      return;
    }
    auto session = std::make_shared<rest::HttpSession>(
        std::move(socket), rest::SessionEnv{&api, &options, &metrics, gate, &sessions,
                                            std::move(slot), tls ? &*tls : nullptr});
    sessions.Add(session);
    session->Start();
    DoAccept();
  });
}

bool HttpServer::Impl::MakeRoom() {
  const bool evicted = sessions.EvictLongestWaiting();
  const uint64_t n = ++at_cap;
  if ((n & (n - 1)) == 0) {  // the 1st, 2nd, 4th, 8th…: no log flood
    LogWarn(
        "api.http",
        evicted ? "at the connection limit; closing the connection idle the longest"
                : "at the connection limit and none idle; refusing the new one",
        {{"limit", std::to_string(options.max_connections)}, {"occurrences", std::to_string(n)}});
  }
  return evicted;
}

std::shared_ptr<void> HttpServer::Impl::TakeClientSlot(const std::string& client) {
  {
    std::lock_guard lock(clients->mu);
    size_t& n = clients->open[client];
    if (n >= options.max_connections_per_client) {
      const uint64_t refused = ++clients->refused;
      if ((refused & (refused - 1)) == 0) {  // the 1st, 2nd, 4th, 8th…: no log flood
        LogWarn("api.http", "client at its connection limit; refusing more",
                {{"client", client},
                 {"limit", std::to_string(n)},
                 {"refused_total", std::to_string(refused)}});
      }
      return nullptr;
    }
    ++n;
  }
  // The counts outlive the server's Impl if a session does: the deleter holds them.
  return std::shared_ptr<void>(clients.get(), [counts = clients, client](void*) {
    std::lock_guard lock(counts->mu);
    auto it = counts->open.find(client);
    if (it != counts->open.end() && --it->second == 0) counts->open.erase(it);
  });
}

void HttpServer::Impl::RunIo() {
  while (true) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      LogError("api.http", "handler threw; continuing", {{"error", e.what()}});
    }
  }
}

HttpServer::HttpServer(ApiService& service, const Authenticator& auth,
                       std::shared_ptr<prometheus::Registry> registry, std::string listen_address,
                       HttpServerOptions options)
    : impl_(std::make_unique<Impl>(service, auth, std::move(registry), std::move(listen_address),
                                   std::move(options))) {}

HttpServer::~HttpServer() { Shutdown(); }

Status HttpServer::Start() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  if (s.started || s.stopped) return Status::FailedPrecondition("HTTP server: already started");
  const std::string where = "HTTP server: cannot listen on '" + s.listen_address + "': ";

  const size_t colon = s.listen_address.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument(where + "expected host:port");
  std::string host = s.listen_address.substr(0, colon);
  const std::string port = s.listen_address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";

  if (!s.options.tls_cert_pem.empty()) {
    s.tls.emplace(net::ssl::context::tls_server);
    s.tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                       net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                       net::ssl::context::no_tlsv1_1);
    rest::beast::error_code tls_ec;
    s.tls->use_certificate_chain(net::buffer(s.options.tls_cert_pem), tls_ec);
    if (!tls_ec) {
      s.tls->use_private_key(net::buffer(s.options.tls_key_pem), net::ssl::context::pem, tls_ec);
    }
    if (tls_ec) {
      s.tls.reset();
      return Status::InvalidArgument("HTTP server: TLS certificate or key: " + tls_ec.message());
    }
  }

  rest::beast::error_code ec;
  tcp::resolver resolver(s.ioc);
  const auto results = resolver.resolve(host, port, tcp::resolver::passive, ec);
  if (ec || results.empty()) return Status::Unavailable(where + ec.message());
  const tcp::endpoint endpoint = results.begin()->endpoint();

  s.acceptor.emplace(net::make_strand(s.ioc));
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    s.acceptor.reset();
    return Status::Unavailable(where + ec.message());
  }
  s.port = s.acceptor->local_endpoint().port();
  s.retry_timer.emplace(s.acceptor->get_executor());
  s.started = true;
  s.work.emplace(s.ioc.get_executor());
  net::post(s.acceptor->get_executor(), [&s] { s.DoAccept(); });
  const int n = std::max(1, s.options.io_threads);
  for (int i = 0; i < n; ++i) s.threads.emplace_back([&s] { s.RunIo(); });
  LogInfo("api.http", "listening",
          {{"address", s.listen_address}, {"port", std::to_string(s.port)}});
  return Status::Ok();
}

int HttpServer::port() const {
  std::lock_guard lock(impl_->mu);
  return impl_->port;
}

void HttpServer::Shutdown() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  if (s.stopped) return;
  s.stopped = true;
  if (!s.started) return;

  // 1. No new connections: close the acceptor on its strand and wait for that.
  std::promise<void> closed;
  net::post(s.acceptor->get_executor(), [&s, &closed] {
    rest::beast::error_code ignored;
    s.acceptor->close(ignored);
    s.retry_timer->cancel();
    closed.set_value();
  });
  closed.get_future().wait();
  // 2. Idle connections and streams close now; requests in flight get until the grace ends.
  for (const auto& session : s.sessions.Snapshot()) session->Drain();
  s.sessions.WaitEmpty(std::chrono::steady_clock::now() + s.options.shutdown_grace);
  // 3. Replies from here on are dropped, then the io threads stop.
  {
    std::unique_lock gate_lock(s.gate->mu);
    s.gate->open = false;
  }
  s.work.reset();
  s.ioc.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  s.sessions.Clear();  // whatever still waited for a reply; the io_context is still alive
  LogInfo("api.http", "stopped", {{"address", s.listen_address}});
}

}  // namespace gpupool::api
