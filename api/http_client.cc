#include "api/http_client.h"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace gpupool::api {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

bool RefusedAddress(const net::ip::address& a) {
  if (a.is_loopback()) return true;
  if (a.is_v4()) return (a.to_v4().to_uint() & 0xffff0000u) == 0xa9fe0000u;  // 169.254/16
  const net::ip::address_v6 v6 = a.to_v6();
  if (v6.is_v4_mapped()) {
    return RefusedAddress(net::ip::make_address_v4(net::ip::v4_mapped, v6));
  }
  return v6.is_link_local();
}

// Runs `ioc` until `*done` or `deadline`; false on the deadline.
bool RunUntil(net::io_context& ioc, const bool* done,
              std::chrono::steady_clock::time_point deadline) {
  ioc.restart();
  while (!*done && std::chrono::steady_clock::now() < deadline) {
    ioc.run_one_until(deadline);
  }
  return *done;
}

}  // namespace

std::string HostHeader(const WebhookUrl& url) {
  // RFC 9110 §7.2: the authority, its port when not the scheme's default; IPv6 in brackets.
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  if (url.port != (url.tls ? 443 : 80)) host += ":" + std::to_string(url.port);
  return host;
}

std::string PrintableAscii(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 300)) out.push_back(c >= ' ' && c < 0x7f ? c : '?');
  return out;
}

HttpExchangeResult HttpExchange(const std::string& method, const WebhookUrl& url,
                                const HttpHeaders& headers, const std::string& body,
                                const HttpClientOptions& o) {
  HttpExchangeResult out;
  const http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown) {
    out.error = "unknown HTTP method " + PrintableAscii(method);
    return out;
  }
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  net::io_context ioc;
  net::ssl::context ctx(net::ssl::context::tls_client);
  beast::error_code ec;
  if (url.tls) {
    ctx.set_default_verify_paths(ec);
    if (!o.extra_ca_pem.empty() && !ec) {
      ctx.add_certificate_authority(net::buffer(o.extra_ca_pem), ec);
    }
    if (ec) {
      out.error = "TLS setup: " + PrintableAscii(ec.message());
      return out;
    }
    ctx.set_verify_mode(net::ssl::verify_peer);
  }
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  beast::tcp_stream& tcp_layer = beast::get_lowest_layer(stream);
  tcp::resolver resolver(ioc);
  bool done = false;
  // Every step: start it, run until it ends or the deadline passes.
  auto step = [&](const char* what, auto start) -> bool {
    done = false;
    ec = {};
    start();
    if (!RunUntil(ioc, &done, deadline)) {
      out.error =
          std::string("timeout after ") + std::to_string(o.timeout.count()) + " ms (" + what + ")";
      beast::error_code ignored;
      resolver.cancel();
      tcp_layer.socket().close(ignored);
      ioc.restart();
      ioc.run();  // the cancelled handler runs while what it refers to is alive
      return false;
    }
    if (ec) {
      out.error = std::string(what) + ": " + PrintableAscii(ec.message());
      return false;
    }
    return true;
  };
  auto finish = [&](beast::error_code e, auto&&...) {
    ec = e;
    done = true;
  };

  tcp::resolver::results_type endpoints;
  const std::string port = std::to_string(url.port);
  if (!step("resolve", [&] {
        resolver.async_resolve(url.host, port,
                               [&](beast::error_code e, tcp::resolver::results_type r) {
                                 ec = e;
                                 endpoints = std::move(r);
                                 done = true;
                               });
      })) {
    return out;
  }
  std::vector<tcp::endpoint> allowed;
  for (const auto& entry : endpoints) {
    if (o.allow_loopback || !RefusedAddress(entry.endpoint().address())) {
      allowed.push_back(entry.endpoint());
    }
  }
  if (allowed.empty()) {
    out.error = "refused: " + url.host + " is a loopback or link-local address";
    return out;
  }
  if (!step("connect", [&] { tcp_layer.async_connect(allowed, finish); })) return out;
  http::request<http::string_body> req{verb, url.target, 11};
  req.set(http::field::host, HostHeader(url));
  req.set(http::field::user_agent, o.user_agent);
  bool typed = false;
  for (const auto& [k, v] : headers) {
    req.set(k, v);
    typed = typed || beast::iequals(k, "content-type");
  }
  if (!body.empty() && !typed) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(o.max_body_bytes);
  if (url.tls) {
    beast::error_code addr_ec;
    net::ip::make_address(url.host, addr_ec);
    if (addr_ec && !SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str())) {
      out.error = "TLS: cannot set the server name";
      return out;
    }
    stream.set_verify_callback(net::ssl::host_name_verification(url.host));
    if (!step("TLS handshake",
              [&] { stream.async_handshake(net::ssl::stream_base::client, finish); })) {
      return out;
    }
    if (!step("send", [&] { http::async_write(stream, req, finish); })) return out;
    if (!step("answer", [&] { http::async_read(stream, buffer, parser, finish); })) return out;
  } else {
    if (!step("send", [&] { http::async_write(tcp_layer, req, finish); })) return out;
    if (!step("answer", [&] { http::async_read(tcp_layer, buffer, parser, finish); })) {
      return out;
    }
  }
  out.http_status = static_cast<int>(parser.get().result_int());
  out.body = std::move(parser.get().body());
  if (out.http_status < 200 || out.http_status >= 300) {
    out.error = "HTTP " + std::to_string(out.http_status);
  }
  beast::error_code ignored;
  tcp_layer.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace gpupool::api
