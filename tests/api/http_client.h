// A small blocking HTTP/1.1 client over Boost.Beast for the REST adapter tests: real requests
// over loopback, one connection per HttpClient (keep-alive across requests).
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <utility>
#include <vector>

namespace gpupool::api::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpResult {
  int status = 0;
  std::string body;
  http::fields headers;
  bool keep_alive = false;
};

class HttpClient {
 public:
  explicit HttpClient(int port) : stream_(ioc_) {
    stream_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  }

  HttpResult Send(http::verb verb, const std::string& target, const std::string& body = "",
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || verb == http::verb::post || verb == http::verb::patch) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    http::write(stream_, req);
    return Read();
  }

  HttpResult Read() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(stream_, buffer_, parser);
    auto res = parser.release();
    HttpResult out;
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    out.keep_alive = res.keep_alive();
    for (const auto& f : res) out.headers.set(f.name_string(), f.value());
    return out;
  }

  // Writes raw bytes (for malformed requests).
  void WriteRaw(const std::string& bytes) { net::write(stream_.socket(), net::buffer(bytes)); }

  beast::tcp_stream& stream() { return stream_; }
  beast::flat_buffer& buffer() { return buffer_; }

 private:
  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

// One request on a fresh connection.
inline HttpResult HttpCall(int port, http::verb verb, const std::string& target,
                           const std::string& body = "",
                           std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpClient c(port);
  return c.Send(verb, target, body, std::move(headers));
}

}  // namespace gpupool::api::testing
