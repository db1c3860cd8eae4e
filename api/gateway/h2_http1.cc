#include "api/gateway/h2_http1.h"

namespace gpupool::api::gateway {

namespace http = boost::beast::http;

http::request<http::string_body> ToHttp1(const H2Request& request) {
  http::request<http::string_body> out;
  out.version(11);
  const http::verb verb = http::string_to_verb(request.method);
  if (verb == http::verb::unknown) {
    out.method_string(request.method);
  } else {
    out.method(verb);
  }
  out.target(request.path);
  out.set(http::field::host, request.authority);
  std::string cookies;
  for (const auto& [name, value] : request.headers) {
    if (name == "cookie") {
      cookies += (cookies.empty() ? "" : "; ") + value;
    } else if (!IsConnectionSpecific(name, value) && name != "te") {
      out.insert(name, value);
    }
  }
  if (!cookies.empty()) out.set(http::field::cookie, cookies);
  out.body() = request.body;
  out.keep_alive(true);
  out.prepare_payload();
  return out;
}

H2Response FromHttp1(const http::response<http::string_body>& answer) {
  H2Response out;
  out.status = static_cast<int>(answer.result_int());
  for (const auto& field : answer) {
    std::string name = Lower(field.name_string());
    const std::string_view value = field.value();
    if (IsConnectionSpecific(name, value) || name == "te") continue;
    out.headers.emplace_back(std::move(name), std::string(value));
  }
  out.body = answer.body();
  return out;
}

}  // namespace gpupool::api::gateway
