#include "api/gateway/h2_message.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace gpupool::api::gateway {

std::string_view FieldValue(const H2Fields& fields, std::string_view name) {
  for (const auto& [n, v] : fields) {
    if (n == name) return v;
  }
  return {};
}

void EraseField(H2Fields& fields, std::string_view name) {
  std::erase_if(fields, [&](const auto& f) { return f.first == name; });
}

bool IsGrpc(const H2Fields& headers) {
  const std::string_view type = FieldValue(headers, "content-type");
  constexpr std::string_view kGrpc = "application/grpc";
  if (!type.starts_with(kGrpc)) return false;
  return type.size() == kGrpc.size() || type[kGrpc.size()] == '+' || type[kGrpc.size()] == ';';
}

bool IsConnectionSpecific(std::string_view name, std::string_view value) {
  if (name == "te") return value != "trailers";
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade" || name == "host";
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

int GrpcStatusFor(int http_status) {
  switch (http_status) {
    case 401:
      return 16;  // UNAUTHENTICATED
    case 404:
      return 5;  // NOT_FOUND
    case 413:
    case 429:
      return 8;  // RESOURCE_EXHAUSTED
    case 502:
    case 503:
    case 504:
      return 14;  // UNAVAILABLE
    default:
      return 2;  // UNKNOWN
  }
}

std::string PercentEncodeGrpcMessage(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7E || c == '%') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    } else {
      out += ch;
    }
  }
  return out;
}

H2Response LocalAnswer(bool grpc, int http_status, const std::string& text, int retry_after_s) {
  H2Response r;
  if (grpc) {
    r.status = 200;
    r.headers = {{"content-type", "application/grpc"},
                 {"grpc-status", std::to_string(GrpcStatusFor(http_status))},
                 {"grpc-message", PercentEncodeGrpcMessage(text)}};
  } else {
    r.status = http_status;
    r.headers = {{"content-type", "text/plain; charset=utf-8"}};
    r.body = text + "\n";
  }
  if (retry_after_s > 0) r.headers.emplace_back("retry-after", std::to_string(retry_after_s));
  return r;
}

}  // namespace gpupool::api::gateway
