// A small blocking HTTPS client over Boost.Beast for tests of the secure default: one request per
// connection, verifying the server against a given CA (gpupoold's DATA_DIR/tls/ca.crt) and the
// name "127.0.0.1", as curl --cacert would.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/api/http_client.h"

namespace gpupool::api::testing {

// A failed handshake or connection comes back as status 0 with the error in `body`.
inline HttpResult HttpsCall(int port, const std::string& ca_pem, http::verb verb,
                            const std::string& target, const std::string& body = "",
                            std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpResult out;
  net::io_context ioc;
  net::ssl::context ctx(net::ssl::context::tls_client);
  beast::error_code ec;
  ctx.add_certificate_authority(net::buffer(ca_pem), ec);
  if (ec) {
    out.body = "CA: " + ec.message();
    return out;
  }
  ctx.set_verify_mode(net::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  stream.set_verify_callback(net::ssl::host_name_verification("127.0.0.1"));
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
  beast::get_lowest_layer(stream).connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)), ec);
  if (!ec) stream.handshake(net::ssl::stream_base::client, ec);
  if (ec) {
    out.body = "TLS: " + ec.message();
    return out;
  }
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (!ec) http::read(stream, buffer, res, ec);
  if (ec) {
    out.body = "HTTP: " + ec.message();
    return out;
  }
  out.status = static_cast<int>(res.result_int());
  out.body = res.body();
  for (const auto& f : res) out.headers.set(f.name_string(), f.value());
  stream.shutdown(ec);  // close_notify; the server may just close
  return out;
}

}  // namespace gpupool::api::testing
