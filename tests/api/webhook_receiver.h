// A webhook receiver for tests: an HTTPS server on loopback (Boost.Beast, a certificate of a test
// CA) that records every delivery it is sent, checks its signature with the webhook's secret, and
// answers with the status it is told to, after the delay it is told to. Stop() takes it down (its
// port refuses connections) and Start(port) brings it back on the same port.
//
// Thread safety: the setters and deliveries() may be called from any thread.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/webhooks/signature.h"

namespace gpupool::api::testing {

class WebhookReceiver {
 public:
  struct Delivery {
    std::string id;    // Gpupool-Delivery
    std::string kind;  // Gpupool-Event
    std::string body;
    bool signature_ok = false;
    std::string signature_error;
  };

  WebhookReceiver(std::string cert_pem, std::string key_pem, std::string secret)
      : ctx_(boost::asio::ssl::context::tls_server), secret_(std::move(secret)) {
    ctx_.use_certificate_chain(boost::asio::buffer(cert_pem));
    ctx_.use_private_key(boost::asio::buffer(key_pem), boost::asio::ssl::context::pem);
  }
  ~WebhookReceiver() { Stop(); }

  // Listens on 127.0.0.1:`port` (0: any free one); the port.
  uint16_t Start(uint16_t port = 0) {
    namespace net = boost::asio;
    acceptor_ = std::make_unique<net::ip::tcp::acceptor>(ioc_);
    net::ip::tcp::endpoint ep(net::ip::make_address("127.0.0.1"), port);
    acceptor_->open(ep.protocol());
    acceptor_->set_option(net::socket_base::reuse_address(true));
    acceptor_->bind(ep);
    acceptor_->listen();
    acceptor_->non_blocking(true);
    port_ = acceptor_->local_endpoint().port();
    stop_ = false;
    thread_ = std::thread([this] { Serve(); });
    return port_;
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    acceptor_.reset();
  }

  void set_status(int status) { status_ = status; }
  void set_delay(std::chrono::milliseconds d) { delay_ms_ = d.count(); }
  uint16_t port() const { return port_; }

  std::vector<Delivery> deliveries() {
    std::lock_guard lock(mu_);
    return deliveries_;
  }

 private:
  void Serve() {
    namespace net = boost::asio;
    namespace beast = boost::beast;
    namespace http = beast::http;
    while (!stop_) {
      net::ip::tcp::socket socket(ioc_);
      beast::error_code ec;
      acceptor_->accept(socket, ec);
      if (ec) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      socket.non_blocking(false);
      beast::ssl_stream<net::ip::tcp::socket&> stream(socket, ctx_);
      stream.handshake(net::ssl::stream_base::server, ec);
      if (ec) continue;
      beast::flat_buffer buffer;
      http::request<http::string_body> req;
      http::read(stream, buffer, req, ec);
      if (ec) continue;
      Delivery d;
      d.id = std::string(req["Gpupool-Delivery"]);
      d.kind = std::string(req["Gpupool-Event"]);
      d.body = req.body();
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      Status st =
          webhooks::Verify(secret_, std::string(req["Gpupool-Signature"]), d.body, now, 300);
      d.signature_ok = st.ok();
      d.signature_error = st.message();
      {
        std::lock_guard lock(mu_);
        deliveries_.push_back(d);
      }
      for (int64_t waited = 0; waited < delay_ms_ && !stop_; waited += 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      http::response<http::string_body> res{static_cast<http::status>(status_.load()), 11};
      if (status_ != 204) res.body() = "ok";  // a 204 has no body
      res.prepare_payload();
      http::write(stream, res, ec);
      stream.shutdown(ec);
    }
  }

  boost::asio::io_context ioc_;
  boost::asio::ssl::context ctx_;
  const std::string secret_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::thread thread_;
  std::atomic<bool> stop_{true};
  std::atomic<int> status_{204};
  std::atomic<int64_t> delay_ms_{0};
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<Delivery> deliveries_;  // guarded by mu_
};

}  // namespace gpupool::api::testing
