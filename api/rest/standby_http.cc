#include "api/rest/standby_http.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <optional>
#include <thread>

#include "api/rest/json_mapping.h"
#include "base/log.h"
#include "base/mutex.h"

namespace gpupool::api {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

constexpr auto kRequestTimeout = std::chrono::seconds(10);

struct Leader {
  std::string grpc;
  std::string http;
};

http::response<http::string_body> Answer(const http::request<http::string_body>& req,
                                         const Leader& leader) {
  const std::string target(req.target());
  const std::string path = target.substr(0, target.find('?'));
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(false);
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  if (path == "/healthz") {
    res.result(http::status::ok);
    res.body() = "{\"status\":\"ok\",\"role\":\"standby\"}\n";
  } else if (path == "/readyz") {
    res.result(http::status::service_unavailable);
    res.body() =
        "{\"ready\":false,\"role\":\"standby\",\"leader\":" + rest::JsonQuote(leader.grpc) +
        ",\"leader_http\":" + rest::JsonQuote(leader.http) + "}\n";
  } else if (leader.http.empty() || path == "/metrics") {
    res.result(http::status::service_unavailable);
    res.set(http::field::retry_after, "1");
    res.body() = rest::ErrorJson(Status::Unavailable(
        path == "/metrics" ? "this gpupoold replica is a standby: scrape the leader"
                           : "this gpupoold replica is a standby and no replica leads right "
                             "now (a takeover is under way): retry shortly"));
  } else {
    res.result(http::status::temporary_redirect);
    res.set(http::field::location, leader.http + target);
    res.set("Gpupool-Leader", leader.http);
    res.body() = rest::ErrorJson(
        Status::Unavailable("this gpupoold replica is a standby; the leader is at " + leader.http));
  }
  res.prepare_payload();
  return res;
}

// One request, one answer, then close. `Stream` is a beast::tcp_stream or an ssl_stream over one.
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <typename... Args>
  Session(std::function<Leader()> leader, Args&&... args)
      : leader_(std::move(leader)), stream_(std::forward<Args>(args)...) {
    parser_.header_limit(16 * 1024);
    parser_.body_limit(1024 * 1024);
  }

  void Start() {
    beast::get_lowest_layer(stream_).expires_after(kRequestTimeout);
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      Read();
    } else {
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->Read();
                              });
    }
  }

 private:
  void Read() {
    http::async_read(stream_, buffer_, parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return;
                       self->res_ = Answer(self->parser_.get(), self->leader_());
                       http::async_write(self->stream_, self->res_,
                                         [self](beast::error_code, size_t) { self->Close(); });
                     });
  }
  void Close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  std::function<Leader()> leader_;
  Stream stream_;
  beast::flat_buffer buffer_;
  http::request_parser<http::string_body> parser_;
  http::response<http::string_body> res_;
};

}  // namespace

struct HttpStandbyServer::Impl {
  std::string listen_address, cert_pem, key_pem;
  net::io_context ioc;
  std::optional<net::ssl::context> tls;
  std::optional<tcp::acceptor> acceptor;
  std::thread thread;
  Mutex mu;
  Leader leader GPUPOOL_GUARDED_BY(mu);
  bool started = false;

  Leader CurrentLeader() {
    MutexLock lock(&mu);
    return leader;
  }

  void Accept() {
    acceptor->async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (!acceptor->is_open()) return;
      if (!ec) {
        auto leader = [this] { return CurrentLeader(); };
        if (tls) {
          std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(leader, std::move(s),
                                                                          *tls)
              ->Start();
        } else {
          std::make_shared<Session<beast::tcp_stream>>(leader, std::move(s))->Start();
        }
      }
      Accept();
    });
  }
};

HttpStandbyServer::HttpStandbyServer(std::string listen_address, std::string tls_cert_pem,
                                     std::string tls_key_pem)
    : impl_(std::make_unique<Impl>()) {
  impl_->listen_address = std::move(listen_address);
  impl_->cert_pem = std::move(tls_cert_pem);
  impl_->key_pem = std::move(tls_key_pem);
}

HttpStandbyServer::~HttpStandbyServer() { Shutdown(); }

void HttpStandbyServer::SetLeader(const std::string& grpc_address, const std::string& http_url) {
  MutexLock lock(&impl_->mu);
  impl_->leader = {grpc_address, http_url};
}

Status HttpStandbyServer::Start() {
  Impl& s = *impl_;
  const std::string where = "standby HTTP server: cannot listen on '" + s.listen_address + "': ";
  const size_t colon = s.listen_address.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument(where + "expected host:port");
  std::string host = s.listen_address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  beast::error_code ec;
  if (!s.cert_pem.empty()) {
    s.tls.emplace(net::ssl::context::tls_server);
    s.tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                       net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                       net::ssl::context::no_tlsv1_1);
    s.tls->use_certificate_chain(net::buffer(s.cert_pem), ec);
    if (!ec) s.tls->use_private_key(net::buffer(s.key_pem), net::ssl::context::pem, ec);
    if (ec)
      return Status::InvalidArgument("standby HTTP server: TLS certificate or key: " +
                                     ec.message());
  }
  tcp::resolver resolver(s.ioc);
  const auto results =
      resolver.resolve(host, s.listen_address.substr(colon + 1), tcp::resolver::passive, ec);
  if (ec || results.empty()) return Status::Unavailable(where + ec.message());
  s.acceptor.emplace(net::make_strand(s.ioc));
  const tcp::endpoint endpoint = results.begin()->endpoint();
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    s.acceptor.reset();
    return Status::Unavailable(where + ec.message());
  }
  s.started = true;
  net::post(s.acceptor->get_executor(), [&s] { s.Accept(); });
  s.thread = std::thread([&s] {
    try {
      s.ioc.run();
    } catch (const std::exception& e) {
      LogError("api.http", "standby server stopped", {{"error", e.what()}});
    }
  });
  return Status::Ok();
}

void HttpStandbyServer::Shutdown() {
  Impl& s = *impl_;
  if (!s.started) return;
  s.started = false;
  net::post(s.acceptor->get_executor(), [&s] {
    beast::error_code ignored;
    s.acceptor->close(ignored);
  });
  s.ioc.stop();  // open sessions die with the io_context: every answer is one short write
  if (s.thread.joinable()) s.thread.join();
  s.acceptor.reset();
}

}  // namespace gpupool::api
