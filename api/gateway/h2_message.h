// HTTP/2 requests and answers as the gateway carries them (api/gateway/h2_server.h,
// api/gateway/h2_upstream.h), and the pure rules for turning one protocol's fields into the
// other's: no I/O here.
//
// Bodies are whole (buffered, at most the gateway's max_body_bytes), and trailers are kept, which
// is what gRPC needs: its status travels in the answer's trailers (grpc-status, grpc-message).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::api::gateway {

// Field names lower-case, as HTTP/2 sends them (RFC 9113 §8.2.1).
using H2Fields = std::vector<std::pair<std::string, std::string>>;

struct H2Request {
  std::string method;
  std::string scheme;
  std::string authority;
  std::string path;
  H2Fields headers;  // regular fields only: the pseudo-fields are the members above
  std::string body;
};

struct H2Response {
  int status = 0;
  H2Fields headers;
  std::string body;
  H2Fields trailers;
};

// The first value of `name` (lower-case), or "" when absent.
std::string_view FieldValue(const H2Fields& fields, std::string_view name);
void EraseField(H2Fields& fields, std::string_view name);

// True for a gRPC call (content-type application/grpc, with or without a +format suffix).
bool IsGrpc(const H2Fields& headers);

// Connection-specific fields that HTTP/2 forbids (RFC 9113 §8.2.2) and a proxy never forwards;
// `te` is allowed only as "trailers", which gRPC servers require.
bool IsConnectionSpecific(std::string_view lower_name, std::string_view value);

std::string Lower(std::string_view s);

// The gRPC status code for a refusal the gateway answers itself with HTTP `http_status`, chosen
// for what a caller should do: 401 UNAUTHENTICATED, 404 NOT_FOUND, 413 and 429
// RESOURCE_EXHAUSTED, 502 and 503 UNAVAILABLE (retry later), anything else UNKNOWN.
int GrpcStatusFor(int http_status);

// grpc-message's percent-encoding (gRPC over HTTP/2 spec: bytes outside 0x20–0x7E, and '%').
std::string PercentEncodeGrpcMessage(std::string_view text);

// The answer the gateway gives itself for a refusal: for a gRPC call a "trailers-only" answer
// (HTTP 200, grpc-status and grpc-message in the headers, no body) that every gRPC client reads as
// that status; otherwise `http_status` with `text` as a plain-text body.
H2Response LocalAnswer(bool grpc, int http_status, const std::string& text, int retry_after_s);

}  // namespace gpupool::api::gateway
